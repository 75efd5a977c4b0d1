"""``servegate env``: locate or build the shared CPU environment and print its interpreter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from servegate_cli import run_servegate

from servegate.commands import env as env_command
from servegate.serve import envbuild


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SERVEGATE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_check_does_not_build(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert env_command.main(["--check"]) == env_command.EXIT_MISSING
    err = capsys.readouterr().err
    assert "not built yet" in err and str(cache / "envs") in err
    assert not cache.exists()  # nothing was created


def test_built_env_is_printed_without_rebuilding(cache: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    env_dir = envbuild.cpu_env_dir()
    assert env_dir.parent == cache / "envs" and env_dir.name.startswith("cpu-")
    (env_dir / "bin").mkdir(parents=True)
    (env_dir / envbuild.COMPLETE_MARKER).write_text("{}")
    assert env_command.main([]) == 0
    assert capsys.readouterr().out.strip() == str(env_dir / "bin" / "python")
    assert env_command.main(["--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info == {"python": str(env_dir / "bin" / "python"), "env_dir": str(env_dir),
                    "built": True, "requirements": str(envbuild.CPU_REQUIREMENTS)}


def test_missing_lock_is_a_build_error(cache: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(envbuild, "CPU_REQUIREMENTS", tmp_path / "nope.txt")
    assert env_command.main([]) == env_command.EXIT_BUILD_FAILED
    assert f"{tmp_path / 'nope.txt'}: missing" in capsys.readouterr().err


def test_cli_lists_and_runs_env(cache: Path) -> None:
    proc = run_servegate("env", "--check", env=envbuild.servegate_env_vars())
    assert proc.returncode == env_command.EXIT_MISSING, proc.stderr
    assert "ModuleNotFoundError" not in proc.stderr and "not built yet" in proc.stderr
