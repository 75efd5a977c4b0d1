"""Build and reuse the environments servegate runs sglang in (stdlib only: the noxfile imports it).

The CPU environment is shared by every nox session, keyed by the lock's digest and interpreter
under ``$SERVEGATE_CACHE``, built once under a file lock. GPU sessions run on the image's own
interpreter (``$SERVEGATE_PYTHON``), never a venv over it: a venv made from ROCm's ``/opt/venv``
python sees the base site-packages (``No module named sglang``)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from servegate.core.errors import ServegateError
from servegate.core.paths import REPO_ROOT, cache_root

CPU_REQUIREMENTS = REPO_ROOT / "ci" / "requirements-cpu.txt"
COMPLETE_MARKER = ".servegate-complete.json"


class EnvBuildError(ServegateError, RuntimeError):
    """An environment could not be built; the message names the failing step."""


def _digest(*parts: bytes) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part)
        sha.update(b"\0")
    return sha.hexdigest()[:12]


def _python_tag(python: str) -> bytes:
    out = subprocess.run(
        [python, "-c", "import sys; print(sys.version)"],
        check=True, capture_output=True, text=True,
    )
    return out.stdout.strip().encode()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(step: str, argv: list[str], log: Callable[[str], None]) -> None:
    log(f"[servegate env] {step}")
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
        raise EnvBuildError(f"{step} failed (exit {proc.returncode}):\n{tail}")


def is_complete(env_dir: Path) -> bool:
    """Built to the end (the marker is written last, atomically)."""
    return (env_dir / COMPLETE_MARKER).is_file()


def env_python(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def _build(
    env_dir: Path,
    steps: list[tuple[str, list[str]]],
    venv_args: list[str],
    info: dict[str, object],
    log: Callable[[str], None],
) -> Path:
    """Create ``env_dir`` from scratch unless it is already marked complete."""
    marker = env_dir / COMPLETE_MARKER
    with _locked(env_dir.parent / f".{env_dir.name}.lock"):
        if marker.exists():
            return env_python(env_dir)
        if env_dir.exists():
            log(f"[servegate env] removing incomplete environment {env_dir}")
            shutil.rmtree(env_dir)
        started = time.monotonic()
        _run("create venv", [sys.executable, "-m", "venv", *venv_args, str(env_dir)], log)
        python = str(env_python(env_dir))
        _run("upgrade pip", [python, "-m", "pip", "install", "-q", "--upgrade", "pip"], log)
        for step, argv in steps:
            _run(step, [python if a == "{python}" else a for a in argv], log)
        info = {**info, "built_seconds": round(time.monotonic() - started, 1)}
        tmp = marker.with_suffix(".tmp")
        tmp.write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, marker)
        log(f"[servegate env] ready in {info['built_seconds']} s: {env_dir}")
        return Path(python)


def lock_pins(path: Path = CPU_REQUIREMENTS) -> bytes:
    """The lock's requirement lines only: a comment fix must not rebuild a 6 GB environment."""
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return "\n".join(sorted(line for line in lines if line)).encode()


def cpu_env_dir() -> Path:
    """Where the shared CPU environment for the current lock and interpreter lives (or will)."""
    if not CPU_REQUIREMENTS.exists():
        raise EnvBuildError(f"{CPU_REQUIREMENTS}: missing (the pinned CPU environment)")
    return cache_root() / "envs" / f"cpu-{_digest(lock_pins(), _python_tag(sys.executable))}"


def ensure_cpu_env(log: Callable[[str], None] = print) -> Path:
    """Return the python of the shared CPU sglang environment, building it on first use."""
    env_dir = cpu_env_dir()
    log(f"[servegate env] shared CPU environment: {env_dir}")
    steps = [
        # Every package is pinned in the file, so nothing is resolved at install time;
        # --no-deps keeps sglang's CUDA-only requirements (sgl-kernel, flashinfer, ...) out.
        ("install pinned CPU requirements (first time: a few minutes, about 6 GB)",
         ["{python}", "-m", "pip", "install", "-q", "--no-deps", "-r", str(CPU_REQUIREMENTS)]),
    ]
    info = {"requirements": str(CPU_REQUIREMENTS), "python": sys.version}
    return _build(env_dir, steps, [], info, log)


IMAGE_PYTHON_ENV = "SERVEGATE_PYTHON"
# What the GPU session needs from the image (never installed by servegate).
IMAGE_STACK: tuple[str, ...] = ("sglang", "torch")
# Import name -> requirement: servegate's light runtime dependencies (pyproject.toml) plus the
# test runner for `nox -s tests` on a GPU. Installed only when the import is missing.
LIGHT_DEPS: tuple[tuple[str, str], ...] = (
    ("numpy", "numpy>=1.26"), ("scipy", "scipy>=1.11"), ("rich", "rich>=13"),
    ("matplotlib", "matplotlib>=3.8"), ("aiohttp", "aiohttp>=3.9"), ("psutil", "psutil>=5.9"),
    ("pydantic", "pydantic>=2.6"), ("ruptures", "ruptures>=1.1"), ("pytest", "pytest>=8"),
    ("pytest_benchmark", "pytest-benchmark>=4"), ("xdist", "pytest-xdist>=3.6"),
)
_PROBE = ("import importlib.util, sys\n"
          "print('\\n'.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))")


def image_python() -> str:
    """The runner image's own interpreter: ``$SERVEGATE_PYTHON``, else the one running nox."""
    return os.environ.get(IMAGE_PYTHON_ENV) or sys.executable


def missing_modules(python: str, modules: list[str] | tuple[str, ...]) -> list[str]:
    """The top-level modules ``python`` cannot find (a subprocess: the interpreter's own view)."""
    proc = subprocess.run([python, "-c", _PROBE, *modules], capture_output=True, text=True)
    if proc.returncode != 0:
        raise EnvBuildError(f"{python}: cannot run it to probe imports (exit {proc.returncode}): "
                            f"{proc.stderr.strip()[-500:]}")
    return [line for line in proc.stdout.splitlines() if line.strip()]


def _pip_install(python: str, requirements: list[str], log: Callable[[str], None]) -> None:
    argv = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *requirements]
    log(f"[servegate env] installing into {python}: {' '.join(requirements)}")
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0 and "externally-managed-environment" in proc.stdout + proc.stderr:
        # PEP 668 system python (e.g. a CUDA image): the container is thrown away afterwards.
        proc = subprocess.run([*argv, "--break-system-packages"], capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
        raise EnvBuildError(f"installing {' '.join(requirements)} into {python} failed "
                            f"(exit {proc.returncode}):\n{tail}")


def ensure_image_python(log: Callable[[str], None] = print, *,
                        python: str | None = None,
                        stack: tuple[str, ...] = IMAGE_STACK,
                        deps: tuple[tuple[str, str], ...] = LIGHT_DEPS) -> Path:
    """The GPU session's interpreter: the image's own, with its sglang stack importable (checked
    first: a clear error, not a failed server start) and servegate's light dependencies added
    only when missing. No venv is created."""
    python = python or image_python()
    log(f"[servegate env] GPU session on the image's own interpreter: {python}")
    absent = missing_modules(python, stack)
    if absent:
        raise EnvBuildError(
            f"{python} cannot import {', '.join(absent)}: GPU sessions run on the runner "
            f"image's own interpreter (no venv on top). Point {IMAGE_PYTHON_ENV} at the "
            f"interpreter that has sglang (ROCm images: /opt/venv/bin/python)")
    lacking = set(missing_modules(python, [module for module, _req in deps])) if deps else set()
    needed = [req for module, req in deps if module in lacking]
    if needed:
        _pip_install(python, needed, log)
        still = missing_modules(python, [m for m, req in deps if req in needed])
        if still:
            raise EnvBuildError(f"{python}: still cannot import {', '.join(still)} after "
                                f"installing them")
    return Path(python)


def servegate_env_vars() -> dict[str, str]:
    """Make the checkout's package importable in a shared env without installing it there."""
    src = str(REPO_ROOT / "src")
    existing = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": src if not existing else f"{src}{os.pathsep}{existing}"}


def gpu_present() -> bool:
    """Cheap check for a GPU runner, before any torch import (the noxfile cannot import torch)."""
    if os.environ.get("SERVEGATE_RUNNER", "").lower() == "cpu":
        return False
    return Path("/dev/kfd").exists() or Path("/dev/nvidiactl").exists()


CHROMIUM_INSTALL_LOG = Path("/tmp/servegate-chromium-install.log")
CHROMIUM_STEP_TIMEOUT_S = 900


def _logged_runner(log_file: Path) -> Callable[[list[str]], int]:
    """Run a command with its output appended to ``log_file``: its exit code (124 on a timeout,
    127 when it or the log could not be opened)."""
    def run(argv: list[str]) -> int:
        try:
            with open(log_file, "a") as out:
                out.write(f"$ {' '.join(argv)}\n")
                out.flush()
                try:
                    return subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL,
                                          timeout=CHROMIUM_STEP_TIMEOUT_S).returncode
                except subprocess.TimeoutExpired as err:
                    out.write(f"{err}\n")
                    return 124
        except OSError:
            return 127
    return run


def ensure_chromium(log: Callable[[str], None] = print, *,
                    which: Callable[[str], str | None] = shutil.which,
                    run: Callable[[list[str]], int] | None = None,
                    euid: Callable[[], int] = os.geteuid,
                    log_file: Path = CHROMIUM_INSTALL_LOG) -> bool:
    """Best effort: headless Chromium for the history site's browser test
    (``tests/unit/history/test_site.py``), Debian's ``chromium`` through apt. Already there
    (``$SERVEGATE_CHROMIUM``, ``chromium`` or ``chromium-browser`` on PATH), no ``apt-get``, or
    neither root nor passwordless sudo: left as it is, and the log says why. A failed install is
    logged (its output in ``log_file``), never raised: the test then skips naming why. True when
    Chromium is there afterwards."""
    found = os.environ.get("SERVEGATE_CHROMIUM") or which("chromium") or which("chromium-browser")
    if found:
        log(f"[servegate env] chromium: {found} (the browser test runs)")
        return True
    if not which("apt-get"):
        log("[servegate env] chromium: not installed and no apt-get here: the browser test "
            "will be skipped")
        return False
    run = run or _logged_runner(log_file)
    as_root = ["env"]
    if euid() != 0:
        if not which("sudo") or run(["sudo", "-n", "true"]) != 0:
            log("[servegate env] chromium: not installed, and neither root nor passwordless sudo "
                "to install it: the browser test will be skipped")
            return False
        as_root = ["sudo", "-n", "env"]
    log(f"[servegate env] chromium: installing Debian's package (apt-get; output in {log_file})")
    for argv in ([*as_root, "apt-get", "update", "-qq"],
                 [*as_root, "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq",
                  "chromium"]):
        code = run(argv)
        if code != 0:
            log(f"[servegate env] chromium: could not install it ({' '.join(argv)} exited {code}; "
                f"see {log_file}): the browser test will be skipped")
            return False
    installed = which("chromium")
    if not installed:
        log(f"[servegate env] chromium: apt-get installed the package but no chromium is on PATH "
            f"(see {log_file}): the browser test will be skipped")
        return False
    log(f"[servegate env] chromium: installed {installed}")
    return True
