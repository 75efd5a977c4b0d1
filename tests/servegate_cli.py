"""``python -m servegate ...`` as a user runs it: a subprocess of this interpreter on this
checkout's source (``src/`` first on PYTHONPATH), its output captured as text."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from repo_files import SRC


def run_servegate(*args: str | Path, timeout: int = 300, env: dict[str, str] | None = None,
                  unset: tuple[str, ...] = (), cwd: Path | None = None
                  ) -> subprocess.CompletedProcess[str]:
    """Run ``servegate *args``; ``env`` adds to this process's environment (this checkout's
    ``src/`` goes first on any PYTHONPATH it has) and ``unset`` drops names from it. Never
    raises on a non-zero exit: the tests assert on the exit code and the output."""
    path = os.pathsep.join([str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])])
    full_env = {**os.environ, "PYTHONPATH": path, **(env or {})}
    for name in unset:
        full_env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "servegate", *map(str, args)],
                          capture_output=True, text=True, env=full_env, timeout=timeout,
                          check=False, cwd=cwd)
