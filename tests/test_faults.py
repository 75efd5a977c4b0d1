"""Fault hardening of the harness (issue 6, part 3): every fault fails loudly and cleanly.

Each case asserts a clear one-line cause (plus the log tail where there is a log), the exit
code (2 for faults; 130/143 for SIGINT/SIGTERM, see docs/serve.md "Fault handling"), no process
left behind (psutil: no descendant of the test running sglang/servegate, no process carrying
the run's tag in its environment or the run folder in its command line) and no half-written
JSON (every ``*.json`` parses, no ``.*.tmp`` left by the write-then-rename).

``e2e`` cases use the real sglang server (SmolLM2-135M CPU profile) through a tiny suite in
tmp_path (one mode, one point of 2 prompts) and a copy of the real model profile with one field
changed (an invalid server argument, a short readiness timeout). Servers crash at start where
that shows the behaviour, so the whole e2e set needs few full server starts. The unmarked cases
need no server (their fault happens before or after one would run).

Test doubles, named as such: ``FAKE_CLIENT`` replaces sglang's load client at the client
boundary (the real client cannot be made to write garbage); OSError(ENOSPC/EROFS) raised from
``os.fsync`` / ``tempfile.mkstemp`` simulates a full or read-only disk.
"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from judge_runs import make_run

from servegate import atomic, bench
from servegate import compare as command
from servegate.judge import update
from servegate.judge.baselines import baseline_from_run, write_baseline
from servegate.measure.client import ClientError, parse_client_jsonl, run_client
from servegate.results import load_run
from servegate.serve import process

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
    repeats = 1
    seed = 7

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


# --------------------------------------------------------------------------- helpers

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
    text = MODEL_PROFILE.read_text()
    if launch_timeout_s is not None:
        text, n = re.subn(r"launch_timeout_s = \d+", f"launch_timeout_s = {launch_timeout_s}",
                          text)
        assert n == 1
    if extra_args:
        text, n = re.subn(r"^args = \[", "args = [" + "".join(f'"{a}", ' for a in extra_args),
                          text, flags=re.M)
        assert n == 1
    (models / MODEL_PROFILE.name).write_text(text)
    suite = tmp_path / "faults.toml"
    suite.write_text(FAULT_SUITE)
    return ["--suite", str(suite), "--models-dir", str(models), "--results-dir",
            str(tmp_path / "results"), "--skip-accuracy", "--no-compare"]


def _run_dir(tmp_path: Path) -> Path:
    (run_dir,) = (tmp_path / "results").iterdir()
    return run_dir


@pytest.fixture
def tag(monkeypatch: pytest.MonkeyPatch) -> str:
    """A unique value in the environment of everything this test starts."""
    value = uuid.uuid4().hex
    monkeypatch.setenv(TAG_VAR, value)
    monkeypatch.setenv("SERVEGATE_RUNNER", "cpu")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return value


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


def _communicate(proc: subprocess.Popen[str], timeout_s: float = 120) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


# --------------------------------------------------------------------------- server faults (e2e)

@pytest.mark.e2e
def test_server_crashes_at_start(tmp_path: Path, tag: str) -> None:
    """The real server rejects an invalid argument and exits: exit 2, cause + sglang's error."""
    args = _fault_suite(tmp_path, extra_args=("--dtype", "not-a-dtype"))
    out, err = _communicate(_bench_proc(args), timeout_s=240)
    run_dir = Path(out.strip().splitlines()[-1])
    cause = _cause(err)
    assert re.fullmatch(r"ServerError: server exited with code \d+ before it was ready "
                        r"\(log: .*/server/off-r0\.log\)", cause), cause
    assert "--- last lines ---" in err and "not-a-dtype" in err      # sglang's own error
    _failed_run(run_dir, cause)
    _assert_no_process_left(tag, run_dir)


@pytest.mark.e2e
def test_server_never_ready(tmp_path: Path, tag: str) -> None:
    """Readiness timeout while the real server is still loading (scheduler already spawned)."""
    args = _fault_suite(tmp_path, launch_timeout_s=12)
    started = time.monotonic()
    out, err = _communicate(_bench_proc(args), timeout_s=240)
    run_dir = Path(out.strip().splitlines()[-1])
    cause = _cause(err)
    assert cause.startswith("ServerError: server not ready after 12 s (http://127.0.0.1:"), cause
    assert "--- last lines ---" in err
    _failed_run(run_dir, cause)
    _assert_no_process_left(tag, run_dir)
    assert time.monotonic() - started < 120          # no hang past the timeout + teardown


@pytest.mark.e2e
def test_sigterm_during_server_start(tmp_path: Path, tag: str) -> None:
    """SIGTERM (CI cancel) while the server is spawning its scheduler: 143, whole tree gone."""
    proc = _bench_proc(_fault_suite(tmp_path))
    try:
        _wait_for(tag, "sglang.launch_server", ready=lambda p: bool(p.children()))
        proc.send_signal(signal.SIGTERM)
    finally:
        out, err = _communicate(proc)
    assert proc.returncode == 143, err[-3000:]
    run_dir = Path(out.strip().splitlines()[-1])
    cause = _cause(err)
    assert cause == "interrupted (Terminated: received signal 15)"
    _failed_run(run_dir, cause)
    _assert_no_process_left(tag, run_dir)


@pytest.mark.e2e
def test_ctrl_c_during_client(tmp_path: Path, tag: str) -> None:
    """Ctrl-C (SIGINT to bench's process group) while sglang's client drives the server, and
    an impatient second Ctrl-C during the teardown: still 130, still nothing left behind."""
    proc = _bench_proc(_fault_suite(tmp_path))
    try:
        _wait_for(tag, "sglang.benchmark.serving")
        time.sleep(1.0)
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.3)
        os.killpg(proc.pid, signal.SIGINT)
    finally:
        out, err = _communicate(proc)
    assert proc.returncode == 130, err[-3000:]
    run_dir = Path(out.strip().splitlines()[-1])
    cause = _cause(err)
    assert cause == "interrupted (KeyboardInterrupt)"
    _failed_run(run_dir, cause)
    _assert_no_process_left(tag, run_dir)


@pytest.mark.e2e
def test_server_dies_during_run(tmp_path: Path, tag: str) -> None:
    """The server's launcher is killed (as by the OOM killer) mid-point: bench notices at once
    (not after the point timeout), blames the server, and reaps its orphaned scheduler."""
    proc = _bench_proc(_fault_suite(tmp_path))
    try:
        _wait_for(tag, "sglang.benchmark.serving")
        time.sleep(1.0)
        server = _wait_for(tag, "sglang.launch_server")
        orphans = server.children(recursive=True)
        assert orphans                                  # scheduler + detokenizer
        server.kill()
        killed_at = time.monotonic()
    finally:
        out, err = _communicate(proc)
    assert proc.returncode == 2, err[-3000:]
    assert time.monotonic() - killed_at < 60
    run_dir = Path(out.strip().splitlines()[-1])
    cause = _cause(err)
    assert re.fullmatch(r"ServerError: server died with code -9 \(log: .*/server/off-r0\.log\)",
                        cause), cause
    assert "--- last lines ---" in err
    run = _failed_run(run_dir, cause)
    assert run["points"] == []
    _assert_no_process_left(tag, run_dir)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in orphans)


@pytest.mark.e2e
def test_client_returns_garbage(tmp_path: Path, tag: str, monkeypatch: pytest.MonkeyPatch,
                                capfd: pytest.CaptureFixture[str]) -> None:
    """The load client exits 0 but its result file is not JSON (test double at the client
    boundary, against the real server): exit 2 naming the file; server torn down."""
    script = tmp_path / "fake_client.py"
    script.write_text(FAKE_CLIENT)
    monkeypatch.setattr(bench, "client_argv", lambda python, point: [
        python, str(script), str(point.output_file), "garbage"])
    code = bench.main(_fault_suite(tmp_path))
    out, err = capfd.readouterr()
    assert code == 2, err[-3000:]
    run_dir = _run_dir(tmp_path)
    assert out.strip().splitlines()[-1] == str(run_dir)
    cause = _cause(err)
    assert re.fullmatch(r"ClientError: .*/client/off-c2-r0\.jsonl: last line is not JSON .*",
                        cause), cause
    _failed_run(run_dir, cause)
    _assert_no_process_left(tag, run_dir)


@pytest.mark.e2e
def test_port_in_use_is_retried_and_secret_stays_out(
        tmp_path: Path, tag: str, monkeypatch: pytest.MonkeyPatch,
        capfd: pytest.CaptureFixture[str]) -> None:
    """Two port faults, then a complete run with HF_TOKEN in the environment.

    1st port: already bound before launch -> refused without starting a server.
    2nd port: free at launch, taken while the real server loads (the race free_port leaves);
    sglang logs "address already in use" and hangs -> bench sees it in the log, kills the tree.
    3rd port: the run completes. The secret reached the server's environment but appears in
    no file of the run folder, not in stdout/stderr and not in the server logs.
    """
    secret = f"hf_{uuid.uuid4().hex}"
    monkeypatch.setenv("HF_TOKEN", secret)
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    taken_port = held.getsockname()[1]
    stolen: list[socket.socket] = []
    stolen_port: list[int] = []
    ports = iter([taken_port, process.free_port()])
    monkeypatch.setattr(bench, "free_port", lambda: next(ports, None) or process.free_port())
    secret_seen: list[bool] = []
    log = tmp_path / "results"

    def steal_second_port() -> None:
        """Bind the 2nd port as soon as the server using it has been launched."""
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not stolen:
            for path in log.glob("*/server/off-r0.log"):
                match = re.search(r"--port (\d+)", path.read_text(errors="replace"))
                if match and int(match.group(1)) != taken_port:
                    sock = socket.socket()
                    sock.bind(("127.0.0.1", int(match.group(1))))
                    sock.listen(1)
                    stolen.append(sock)
                    stolen_port.append(int(match.group(1)))
                    server = _wait_for(tag, "sglang.launch_server", timeout_s=60)
                    secret_seen.append(server.environ().get("HF_TOKEN") == secret)
                    return
            time.sleep(0.05)

    thief = threading.Thread(target=steal_second_port, daemon=True)
    thief.start()
    try:
        code = bench.main(_fault_suite(tmp_path))
    finally:
        thief.join(timeout=5)
        held.close()
        for sock in stolen:
            sock.close()
    out, err = capfd.readouterr()
    assert code == 0, err[-3000:]
    run_dir = _run_dir(tmp_path)
    flat = re.sub(r"\s+", " ", re.sub(r"\S+\.py:\d+", "", err))   # undo rich's wrapping
    assert f"port {taken_port} on 127.0.0.1 is already in use; retrying on another port" in flat
    assert stolen_port and f"could not bind port {stolen_port[0]}: already in use" in flat
    assert "address already in use" in (run_dir / "server/off-r0.attempt2.log").read_text()
    final_port = int(re.search(r"--port (\d+)", (run_dir / "server/off-r0.log").read_text())[1])
    assert final_port not in {taken_port, stolen_port[0]}
    run = load_run(run_dir)
    assert run["complete"] is True and len(run["points"]) == 1
    _assert_no_half_json(run_dir)
    _assert_no_process_left(tag, run_dir)

    assert secret_seen == [True]                     # the server did get the token
    assert secret not in out and secret not in err
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert any(p.parent.name == "server" for p in files)
    assert [p for p in files if secret.encode() in p.read_bytes()] == []


# --------------------------------------------------------------------------- client boundary

def _fake_client(tmp_path: Path, what: str) -> tuple[list[str], Path]:
    script = tmp_path / "fake_client.py"
    script.write_text(FAKE_CLIENT)
    out = tmp_path / "client" / "point.jsonl"
    out.parent.mkdir(exist_ok=True)
    return [sys.executable, str(script), str(out), what], out


def test_client_writes_nothing(tmp_path: Path) -> None:
    argv, out = _fake_client(tmp_path, "nothing")
    run_client(argv, tmp_path / "client" / "point.log", timeout_s=60)
    with pytest.raises(ClientError, match=r"point\.jsonl: the load client wrote no output file"):
        parse_client_jsonl(out, expect_prompts=2)


def test_client_crash_reports_log_tail(tmp_path: Path) -> None:
    argv, _ = _fake_client(tmp_path, "crash")
    with pytest.raises(ClientError) as info:
        run_client(argv, tmp_path / "client" / "point.log", timeout_s=60)
    first, *rest = str(info.value).splitlines()
    assert re.fullmatch(r"load client exited with code 3 \(log: .*point\.log\)", first)
    assert "ConnectionRefusedError" in "\n".join(rest)


def test_hanging_client_stopped_when_watch_fails(tmp_path: Path, tag: str) -> None:
    """A dead server (``watch`` raises) stops a hanging client within a poll, not at timeout."""
    argv, _ = _fake_client(tmp_path, "hang")
    deadline = time.monotonic() + 1.5

    def server_check() -> None:
        if time.monotonic() > deadline:
            raise process.ServerError("server died with code -9")

    started = time.monotonic()
    with pytest.raises(process.ServerError, match="died"):
        run_client(argv, tmp_path / "client" / "point.log", timeout_s=600, watch=server_check,
                   poll_s=0.2)
    assert time.monotonic() - started < 15
    _assert_no_process_left(tag, tmp_path)


def test_hanging_client_times_out(tmp_path: Path, tag: str) -> None:
    argv, _ = _fake_client(tmp_path, "hang")
    with pytest.raises(ClientError, match=r"load client timed out after 1 s"):
        run_client(argv, tmp_path / "client" / "point.log", timeout_s=1, poll_s=0.2)
    _assert_no_process_left(tag, tmp_path)


# --------------------------------------------------------------------------- teardown vs signals

def test_second_signal_during_teardown_forces_kill(tmp_path: Path, tag: str,
                                                   ctrl_c_raises: None) -> None:
    """A process that ignores SIGTERM plus a Ctrl-C during kill_tree's grace: the grace is cut
    short (SIGKILL now), the tree is gone, and the Ctrl-C is re-raised afterwards."""
    stubborn = subprocess.Popen(
        [sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
         "signal.SIG_IGN); print('up', flush=True); time.sleep(3600)"],
        stdout=subprocess.PIPE, start_new_session=True)
    assert stubborn.stdout is not None and stubborn.stdout.readline() == b"up\n"
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        process.kill_tree(stubborn, grace_s=60)
    assert time.monotonic() - started < 10
    assert stubborn.poll() == -signal.SIGKILL
    stubborn.stdout.close()
    _assert_no_process_left(tag, None)


@pytest.fixture
def ctrl_c_raises() -> Any:
    """SIGINT raises KeyboardInterrupt in this process, whatever disposition pytest inherited
    (a test run started with SIGINT ignored, e.g. in the background or under nohup)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


# --------------------------------------------------------------------------- port (no server)

def test_taken_port_refused_before_launch(tmp_path: Path) -> None:
    """The server is never launched onto a taken port (its /health could be someone else's)."""
    from servegate.serve.launch import LaunchSpec

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        port = held.getsockname()[1]
        spec = LaunchSpec(argv=[sys.executable, "-c", "pass", "--port", str(port)], env={},
                          set_env={}, health_path="/health", timeout_s=5, chunk_size=256,
                          page_size=64)
        server = process.Server(spec, tmp_path / "server.log")
        with pytest.raises(process.PortInUse, match=f"port {port} on 127.0.0.1 is already in use"):
            server.start()
        assert server.proc is None and not (tmp_path / "server.log").exists()


# --------------------------------------------------------------------------- results folder

@pytest.fixture
def no_model_prep(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tag: str) -> None:
    """Model preparation is not under test here (the fault strikes before a server would start)."""
    monkeypatch.setattr(bench, "ensure_gguf_model", lambda name, package_file: tmp_path / "m")


@pytest.mark.usefixtures("no_model_prep")
def test_results_dir_not_creatable(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("a file where the results folder should be\n")
    code = bench.main(["--suite", "cpu", "--results-dir", str(blocker / "sub")])
    out, err = capfd.readouterr()
    assert code == 2 and out == ""
    assert re.fullmatch(r"cannot create the run folder: \[Errno 20\] Not a directory: .*",
                        _cause(err))
    assert blocker.read_text().startswith("a file")


@pytest.mark.usefixtures("no_model_prep")
@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_results_dir_read_only(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    results.mkdir(mode=0o555)
    try:
        code = bench.main(["--suite", "cpu", "--results-dir", str(results)])
    finally:
        results.chmod(0o755)
    _, err = capfd.readouterr()
    assert code == 2 and "Permission denied" in _cause(err)
    assert list(results.iterdir()) == []


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


@pytest.mark.usefixtures("no_model_prep")
@pytest.mark.parametrize("err_no", [errno.ENOSPC, errno.EROFS])
def test_disk_full_mid_run_keeps_previous_run_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str],
        err_no: int) -> None:
    """run.json + summary.md are written once, then the disk fills (or turns read-only) at the
    next save: exit 2 naming the file, the previous run.json intact, no temp file left."""
    results = tmp_path / "results"
    written = _failing_disk(monkeypatch, results, err_no, after=2)
    code = bench.main(["--suite", "cpu", "--results-dir", str(results), "--no-compare"])
    out, err = capfd.readouterr()
    assert code == 2
    run_dir = Path(out.strip().splitlines()[-1])
    assert written == ["run.json", "summary.md"]
    cause = _cause(err)
    assert cause == f"OSError: [Errno {err_no}] {os.strerror(err_no)}: '{run_dir / 'run.json'}'"
    run = json.loads((run_dir / "run.json").read_text())      # the first save, whole
    assert run["complete"] is False and run["points"] == [] and "error" not in run
    _assert_no_half_json(run_dir)


def test_atomic_write_on_full_disk_keeps_old_file(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run.json"
    atomic.write_json(path, {"points": [1, 2, 3]})
    _failing_disk(monkeypatch, tmp_path, errno.ENOSPC, after=0)
    with pytest.raises(OSError, match=re.escape(f"No space left on device: '{path}'")):
        atomic.write_json(path, {"points": [1, 2, 3, 4]})
    assert json.loads(path.read_text()) == {"points": [1, 2, 3]}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]


# --------------------------------------------------------------------------- baselines

@pytest.fixture
def judged_run(tmp_path: Path) -> Path:
    return make_run(tmp_path / "run", n_requests=20)


def _baseline_for(tmp_path: Path, **run_kwargs: Any) -> Path:
    source = make_run(tmp_path / f"src-{uuid.uuid4().hex[:6]}", n_requests=20, **run_kwargs)
    path = tmp_path / "baselines" / "cpu" / "smollm2-135m" / "synthetic.json"
    write_baseline(path, baseline_from_run(load_run(source), source))
    return path


def _compare(run_dir: Path, baseline: Path, capsys: pytest.CaptureFixture[str]
             ) -> tuple[int, str]:
    code = command.main([str(run_dir), "--baseline", str(baseline), "--no-plots"])
    out = capsys.readouterr().out
    _assert_no_half_json(run_dir)
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["overall"] == "error"
    return code, out


def _error_line(out: str) -> str:
    (line,) = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("[ERROR")]
    return line


def test_compare_baseline_missing(judged_run: Path, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere" / "synthetic.json"
    code, out = _compare(judged_run, missing, capsys)
    assert code == 2
    assert _error_line(out).endswith(f"{missing}: baseline file not found")


@pytest.mark.parametrize(("content", "expected"), [
    ('{"schema_version": 1, "runner_class": "cpu",', "not valid JSON"),
    ("", "not valid JSON"),
    ('{"schema_version": 1, "runner_class": "cpu", "model_profile": "smollm2-135m", '
     '"suite": "synthetic", "provenance": {"created_at": "x", "source_run": "y"}, '
     '"points": {}}', "points must be a list, got {}"),
])
def test_compare_baseline_malformed(judged_run: Path, tmp_path: Path, content: str,
                                    expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, out = _compare(judged_run, bad, capsys)
    assert code == 2
    assert f"{bad}: {expected}" in _error_line(out)


def test_compare_baseline_for_another_runner(judged_run: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    other = _baseline_for(tmp_path, runner_class="gfx942")
    code, out = _compare(judged_run, other, capsys)
    assert code == 2
    assert "baseline does not belong to this run: runner_class 'gfx942'" in _error_line(out)


def test_compare_reports_unwritable(judged_run: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    _failing_disk(monkeypatch, judged_run, errno.ENOSPC, after=0)
    code = command.main([str(judged_run), "--no-plots"])
    err = capsys.readouterr().err
    assert code == 2
    assert re.fullmatch(r"cannot write reports into .*: \[Errno 28\] No space left on device: "
                        r"'.*verdict\.json'", _cause(err, "servegate compare: "))
    assert not (judged_run / "verdict.json").exists()
    _assert_no_half_json(judged_run)


def _update(run_dir: Path, target: Path, capsys: pytest.CaptureFixture[str]
            ) -> tuple[int, str]:
    code = update.main([str(run_dir), "--baseline", str(target)])
    return code, capsys.readouterr().err


def test_update_baselines_malformed_target_untouched(judged_run: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "baselines" / "cpu" / "smollm2-135m" / "synthetic.json"
    target.parent.mkdir(parents=True)
    target.write_text("{ half a file")
    code, err = _update(judged_run, target, capsys)
    assert code == 2
    assert _cause(err, "update-baselines: ").startswith(f"{target}: not valid JSON")
    assert target.read_text() == "{ half a file"


def test_update_baselines_other_runner_refused(judged_run: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    target = _baseline_for(tmp_path, runner_class="gfx942")
    before = target.read_bytes()
    code, err = _update(judged_run, target, capsys)
    assert code == 2
    assert "runner_class: run has 'cpu' but baseline" in err and "'gfx942'" in err
    assert target.read_bytes() == before


def test_update_baselines_disk_full_keeps_old(judged_run: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    target = _baseline_for(tmp_path)
    before = target.read_bytes()
    _failing_disk(monkeypatch, target.parent, errno.ENOSPC, after=0)
    code, err = _update(judged_run, target, capsys)
    assert code == 2
    assert _cause(err, "update-baselines: ") == (
        f"cannot write {target}: [Errno 28] No space left on device: '{target}'")
    assert target.read_bytes() == before
    assert [p.name for p in target.parent.iterdir()] == [target.name]


def test_update_baselines_run_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _update(tmp_path / "no-such-run", tmp_path / "b.json", capsys)
    assert code == 2 and "no-such-run" in _cause(err, "update-baselines: ")
    assert not (tmp_path / "b.json").exists()

