"""Shared plumbing for the fault tests (``tests/real_sglang/serving/test_faults_bench.py`` with a
real server, and the fault paths in ``tests/unit/``).

Fault hardening of the harness (issue 6, part 3): every fault fails loudly and cleanly. Each case
asserts a clear one-line cause (plus the log tail where there is a log), the exit code (2 for
faults; 130/143 for SIGINT/SIGTERM, see docs/serve.md "Fault handling"), no process left behind
(psutil: no descendant of the test running sglang/servegate, no process carrying the run's tag in
its environment or the run folder in its command line) and no half-written JSON (every ``*.json``
parses, no ``.*.tmp`` left by the write-then-rename).

``e2e`` cases use the real sglang server (SmolLM2-135M CPU profile) through a tiny suite in
tmp_path (one mode, one point of 2 prompts) and a copy of the real model profile with one field
changed (an invalid server argument, a short readiness timeout). Servers crash at start where
that shows the behaviour, so the whole e2e set needs few full server starts. The unmarked cases
need no server (their fault happens before or after one would run).

Test doubles, named as such: ``FAKE_CLIENT`` replaces sglang's load client at the client
boundary (the real client cannot be made to write garbage); OSError(ENOSPC/EROFS) raised from
``os.fsync`` / ``tempfile.mkstemp`` simulates a full or read-only disk (:func:`_failing_disk`).

The fixtures ``tag`` and ``ctrl_c_raises`` live in ``conftest.py``.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
MODEL_PROFILE = REPO / "models" / "smollm2-135m.toml"
TAG_VAR = "SERVEGATE_FAULT_TAG"

FAULT_SUITE = textwrap.dedent("""
    [suite]
    name = "faults"
    description = "fault tests: one mode, one point of 2 prompts"
    model = "smollm2-135m"
    runners = ["cpu"]
    modes = ["off"]
    seed = 7

    [design]
    starts = 1
    blocks = 1

    [server]
    chunked_prefill_size = 256
    page_size = 64

    [load]
    input_len = 300
    output_len = 8
    concurrency = [2]
    num_prompts = [2]
    warmup_requests = 1
    point_timeout_s = 300
""")

# Test double at the load-client boundary: argv[1] is the output file, argv[2] what to do.
FAKE_CLIENT = textwrap.dedent("""
    import sys, time
    out, what = sys.argv[1], sys.argv[2]
    print("fake client: " + what, flush=True)
    if what == "garbage":
        open(out, "w").write("<html>502 Bad Gateway</html>\\n")
    elif what == "crash":
        print("Traceback: ConnectionRefusedError", flush=True)
        sys.exit(3)
    elif what == "hang":
        time.sleep(3600)
    # "nothing": exit 0 without writing a result
""")


def _leftovers(tag: str, run_dir: Path | None) -> list[str]:
    """Live processes of the run: descendants of this test running sglang/servegate, or any
    process with the run's tag in its environment or the run folder in its command line."""
    found: dict[int, str] = {}
    me = psutil.Process()
    candidates = {p.pid: p for p in me.children(recursive=True)}
    candidates.update({p.pid: p for p in psutil.process_iter()})
    for pid, proc in candidates.items():
        if pid == me.pid:
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            cmd = " ".join(proc.cmdline())
            mine = pid in {c.pid for c in me.children(recursive=True)} and (
                "sglang" in cmd or "servegate" in cmd)
            tagged = proc.environ().get(TAG_VAR) == tag
            in_run = run_dir is not None and str(run_dir) in cmd
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        if mine or tagged or in_run:
            found[pid] = cmd[:160]
    return [f"{pid}: {cmd}" for pid, cmd in sorted(found.items())]


def _assert_no_process_left(tag: str, run_dir: Path | None, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    left = _leftovers(tag, run_dir)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = _leftovers(tag, run_dir)
    assert left == [], f"processes left behind: {left}"


def _assert_no_half_json(folder: Path) -> None:
    assert not [p for p in folder.rglob(".*.tmp")], "temp file of an interrupted write left"
    for path in folder.rglob("*.json"):
        json.loads(path.read_text())            # raises on a half-written file


def _cause(stderr: str, prefix: str = "servegate bench: ") -> str:
    """The one-line cause: the last line of stderr, after the log tail."""
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(prefix), stderr[-3000:]
    return last[len(prefix):]


def _failed_run(run_dir: Path, cause: str) -> dict[str, Any]:
    run = json.loads((run_dir / "run.json").read_text())
    assert run["complete"] is False and run["error"] == cause
    assert "\n" not in run["error"]
    _assert_no_half_json(run_dir)
    return run


def _fault_suite(tmp_path: Path, *, launch_timeout_s: int | None = None,
                 extra_args: tuple[str, ...] = ()) -> list[str]:
    """bench arguments for the tiny suite + a copy of the real CPU profile with one change."""
    models = tmp_path / "models"
    models.mkdir()
    # Only the [runners.cpu] section changes (the profile has other sections after it).
    profile = MODEL_PROFILE.read_text()
    start = profile.index("[runners.cpu]\n")
    end = profile.find("\n[", start + 1)
    end = len(profile) if end < 0 else end + 1
    text = profile[start:end]
    if launch_timeout_s is not None:
        text, n = re.subn(r"launch_timeout_s = \d+", f"launch_timeout_s = {launch_timeout_s}",
                          text)
        assert n == 1
    if extra_args:
        text, n = re.subn(r"^args = \[", "args = [" + "".join(f'"{a}", ' for a in extra_args),
                          text, flags=re.M)
        assert n == 1
    text = profile[:start] + text + profile[end:]
    (models / MODEL_PROFILE.name).write_text(text)
    suite = tmp_path / "faults.toml"
    suite.write_text(FAULT_SUITE)
    return ["--suite", str(suite), "--models-dir", str(models), "--results-dir",
            str(tmp_path / "results"), "--skip-accuracy", "--no-compare"]


def _run_dir(tmp_path: Path) -> Path:
    (run_dir,) = (tmp_path / "results").iterdir()
    return run_dir


def _bench_proc(args: list[str]) -> subprocess.Popen[str]:
    """``python -m servegate bench`` in its own process group, with Ctrl-C at its default as a
    terminal would run it (not the SIG_IGN a background test run may have inherited)."""
    return subprocess.Popen([sys.executable, "-m", "servegate", "bench", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_sigint)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for(tag: str, needle: str, timeout_s: float = 240.0,
              ready: Callable[[psutil.Process], bool] = lambda p: True) -> psutil.Process:
    """The tagged process whose command line contains ``needle`` (and passes ``ready``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for proc in psutil.process_iter():
            try:
                if (needle in " ".join(proc.cmdline()) and proc.environ().get(TAG_VAR) == tag
                        and proc.status() != psutil.STATUS_ZOMBIE and ready(proc)):
                    return proc
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        time.sleep(0.2)
    raise AssertionError(f"no process {needle!r} appeared within {timeout_s:.0f} s")


def _wait_for_load(tmp_path: Path, timeout_s: float = 240.0) -> None:
    """The load client is driving the server: a chunk-sized prefill batch (256 tokens of a
    300-token prompt: the client's warm-up or the block, never the server's own 6- and 1-token
    warm-up) in the run's server log. In-server blocks run the client inside one worker per
    start (``servegate.measure.client_worker``), so there is no per-point client process."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for log in (tmp_path / "results").glob("*/server/s0.log"):
            if "#new-token: 256," in log.read_text(errors="replace"):
                return
        time.sleep(0.2)
    raise AssertionError(f"no load prefill in a server log under {tmp_path} within "
                         f"{timeout_s:.0f} s")


def _communicate(proc: subprocess.Popen[str], timeout_s: float = 120) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

def _failing_disk(monkeypatch: pytest.MonkeyPatch, under: Path, err_no: int,
                  after: int) -> list[str]:
    """From the ``after``+1-th atomic write under ``under`` on, fsync/mkstemp fail with
    ``err_no`` (the disk stays full / read-only); returns the names of files written before."""
    written: list[str] = []
    real_fsync, real_mkstemp = os.fsync, tempfile.mkstemp

    def full() -> bool:
        return len(written) >= after

    def fsync(fd: int) -> None:
        path = os.readlink(f"/proc/self/fd/{fd}")
        if path.startswith(str(under)):
            if full():
                raise OSError(err_no, os.strerror(err_no))
            written.append(re.sub(r"^\.(.+)\.\w+\.tmp$", r"\1", Path(path).name))
        real_fsync(fd)

    def mkstemp(*args: Any, **kwargs: Any) -> tuple[int, str]:
        if str(kwargs.get("dir", "")).startswith(str(under)) and full() \
                and err_no != errno.ENOSPC:
            raise OSError(err_no, os.strerror(err_no))
        return real_mkstemp(*args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    return written
