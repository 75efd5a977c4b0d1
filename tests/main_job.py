"""The README main command run in a fresh clone (fixture ``main_job``:
tests/real_sglang/serving/conftest.py): one run, read by the fresh-clone test (the whole
pipeline) and by the gate validation (this machine's baseline, kept by that run's bench).

Clones this repository's HEAD into an empty temporary folder (no data folder beside it), makes a
new virtual environment from the base interpreter (as a new user's ``python``), and runs exactly
``python -m pip install nox && python -m nox -s bench`` there with ``HF_HUB_OFFLINE=1`` (no hub).
The shared CPU environment is keyed by the lock's pins, so the clone reuses it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from repo_files import REPO_ROOT

from servegate.core.paths import LOCAL_BASELINES_ENV

TAG_VAR = "SERVEGATE_E2E_TAG"


@dataclass(frozen=True)
class MainJob:
    """The README main command's run in a fresh clone."""

    proc: subprocess.CompletedProcess[str]
    clone: Path
    store: Path             # the nightly history store the run was kept in
    local: Path             # the local baselines folder its bench kept this machine's run in
    tag: str                # in the environment of every process the run started
    seconds: float

    @property
    def run_dir(self) -> Path:
        lines = self.proc.stdout.strip().splitlines()
        return Path(lines[-1]) if lines else self.clone / "results" / "none"  # last: the folder


def run_main_job(tmp_path: Path, local: Path) -> MainJob:
    """``python -m pip install nox && python -m nox -s bench`` in a fresh clone and venv."""
    clone = tmp_path / "servegate"
    subprocess.run(["git", "clone", "--quiet", str(REPO_ROOT), str(clone)], check=True)
    assert [p.name for p in tmp_path.iterdir()] == ["servegate"]    # nothing beside the clone
    base_python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base_python, "-m", "venv", str(tmp_path / "user")], check=True)
    python = str(tmp_path / "user" / "bin" / "python")
    tag = uuid.uuid4().hex
    env = {**_user_env(tag), LOCAL_BASELINES_ENV: str(local)}
    started = time.monotonic()
    install = subprocess.run([python, "-m", "pip", "install", "-q", "nox"], cwd=clone,
                             env=env, capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    store = tmp_path / "history"
    proc = subprocess.run([python, "-m", "nox", "-s", "bench"], cwd=clone,
                          env={**env, "SERVEGATE_HISTORY": str(store)}, capture_output=True,
                          text=True, timeout=2400)
    return MainJob(proc, clone, store, local, tag, time.monotonic() - started)


def tagged_processes(tag: str) -> list[int]:
    """Live (not zombie) processes whose environment carries the tag."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if f"{TAG_VAR}={tag}".encode() in (entry / "environ").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
                if state != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def _user_env(tag: str) -> dict[str, str]:
    """This environment minus anything that would point the clone back at this checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"} and not k.startswith("NOX")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if not p.startswith(sys.prefix))
    return {**env, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", TAG_VAR: tag}
