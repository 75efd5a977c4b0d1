"""``servegate env``: locate or build the shared CPU environment and print its interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from servegate_cli import run_servegate

from servegate.serve import envbuild


@pytest.mark.sglang
def test_env_locates_the_environment_the_tests_run_in() -> None:
    """Under `nox -s tests` this interpreter is the shared env: `servegate env --check` finds it."""
    env_dir = envbuild.cpu_env_dir()
    if Path(sys.prefix).resolve() != env_dir.resolve():
        pytest.skip(f"not running in the shared CPU environment ({sys.prefix})")
    proc = run_servegate("env", "--check", env=envbuild.servegate_env_vars())
    assert proc.returncode == 0, proc.stderr
    python = proc.stdout.strip()
    assert subprocess.run([python, "-c", "import sglang"], capture_output=True).returncode == 0
