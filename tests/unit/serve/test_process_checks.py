"""A server's liveness check, its log and a taken port, on real short-lived processes (not
sglang): a server that died says so with its exit code, its log's path and the log's last lines;
one still running passes; a log not written yet is at offset 0; a log naming a taken port is a
port clash. And the signal handling around a teardown: held and handed on (or dropped), left
alone outside the main thread, SIGTERM turned into an exception."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servegate.serve.launch import LaunchSpec
from servegate.serve.process import (
    PortInUse,
    Server,
    ServerError,
    Terminated,
    signals_deferred,
    tail,
    terminate_on_sigterm,
)


def _server(tmp_path: Path, code: str) -> Server:
    spec = LaunchSpec(argv=[sys.executable, "-c", code, "--port", "1"], env={}, set_env={},
                      health_path="/health", timeout_s=5, chunk_size=256, page_size=64)
    return Server(spec, tmp_path / "logs" / "server.log", port=0)


def test_a_server_that_died_is_reported_with_its_code_log_and_last_lines(tmp_path: Path) -> None:
    server = _server(tmp_path, "import sys; print('fatal: out of pages', flush=True); sys.exit(3)")
    server.start()
    assert server.proc is not None and server.proc.wait(timeout=30) == 3
    with pytest.raises(ServerError) as info:
        server.check_alive()
    assert str(info.value) == f"server died with code 3 (log: {server.log_path})"
    assert info.value.log_tail.splitlines()[-1] == "fatal: out of pages"
    assert info.value.log_tail.startswith("# servegate: ")


def test_a_running_server_passes_the_check(tmp_path: Path) -> None:
    server = _server(tmp_path, "import time; time.sleep(60)")
    with server:
        server.check_alive()
    assert server.proc is not None and server.proc.poll() is not None


def test_a_server_dying_just_after_the_check_is_blamed_when_the_check_waits(
        tmp_path: Path) -> None:
    """A client fails as a killed server's socket closes, a moment before the launcher's exit is
    visible: the check after a client failure waits for it (bench_blocks.DYING_SERVER_S), and
    a server that stays up is not blamed, the wait bounded."""
    dying = _server(tmp_path / "dying", "import time; time.sleep(0.5); raise SystemExit(9)")
    with dying:
        dying.check_alive()                             # still up: no wait, no blame
        with pytest.raises(ServerError, match="server died with code 9"):
            dying.check_alive(wait_s=20.0)
    unstarted = _server(tmp_path / "unstarted", "pass")
    unstarted.check_alive(wait_s=5.0)                   # nothing started: nothing to wait for
    alive = _server(tmp_path / "alive", "import time; time.sleep(60)")
    with alive:
        started = time.monotonic()
        alive.check_alive(wait_s=0.3)
        assert 0.3 <= time.monotonic() - started < 5.0


def test_a_log_not_written_yet_is_at_offset_zero(tmp_path: Path) -> None:
    server = _server(tmp_path, "pass")
    assert not server.log_path.exists()
    assert server.log_offset() == 0
    assert server.wait_log_quiet(quiet_s=0.05, max_s=0.2) == 0


def test_with_no_time_to_wait_the_log_size_now_is_returned(tmp_path: Path) -> None:
    server = _server(tmp_path, "pass")
    server.log_path.parent.mkdir(parents=True)
    server.log_path.write_text("twelve bytes")
    assert server.wait_log_quiet(max_s=0.0) == 12


@pytest.mark.parametrize("line", ["ERROR:    [Errno 98] error while attempting to bind on address",
                                  "OSError: Address already in use",
                                  "Port 30000 is not available in this machine"])
def test_a_server_that_logs_a_taken_port_and_hangs_is_a_port_clash(tmp_path: Path,
                                                                   line: str) -> None:
    """sglang 0.5.23 logs uvicorn's bind error and hangs: the log says so before any timeout."""
    said = tmp_path / "said.txt"          # not in the argv (the log's first line shows the argv)
    said.write_text(line)
    code = f"import time; print(open({str(said)!r}).read(), flush=True); time.sleep(60)"
    with _server(tmp_path, code) as server, pytest.raises(PortInUse) as info:
        server.wait_ready(timeout_s=30, poll_s=0.05)
    assert str(info.value) == (f"server could not bind port 0: already in use "
                               f"(log: {server.log_path})")
    assert info.value.log_tail.splitlines()[-1] == line


def test_a_logs_tail_is_its_last_lines(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(f"line {i}\n" for i in range(50)))
    assert tail(log) == "\n".join(f"line {i}" for i in range(10, 50))
    assert tail(log, lines=2) == "line 48\nline 49"
    assert tail(tmp_path / "absent.log") == ""


@pytest.fixture
def sigterm_calls() -> Iterator[list[int]]:
    """SIGTERM handled by a recording handler for the test (never pytest's default: death)."""
    calls: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))
    try:
        yield calls
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_and_wait(sig: int, seen: list[int]) -> None:
    signal.raise_signal(sig)
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.parametrize("redeliver", [True, False])
def test_a_signal_during_a_deferred_block_is_held_then_handed_on_or_dropped(
        sigterm_calls: list[int], redeliver: bool) -> None:
    handler = signal.getsignal(signal.SIGTERM)
    with signals_deferred(redeliver=redeliver) as received:
        _raise_and_wait(signal.SIGTERM, received)
        assert received == [signal.SIGTERM] and sigterm_calls == []
    assert sigterm_calls == ([signal.SIGTERM] if redeliver else [])
    assert signal.getsignal(signal.SIGTERM) is handler


def test_outside_the_main_thread_deferring_changes_no_handler(sigterm_calls: list[int]) -> None:
    handler = signal.getsignal(signal.SIGTERM)
    seen: list[object] = []

    def worker() -> None:
        with signals_deferred() as received:
            seen.append((received, signal.getsignal(signal.SIGTERM)))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert seen == [([], handler)]


def test_sigterm_becomes_an_exception_inside_and_the_handler_returns_after(
        sigterm_calls: list[int]) -> None:
    handler = signal.getsignal(signal.SIGTERM)
    with pytest.raises(Terminated, match=f"^received signal {int(signal.SIGTERM)}$"), \
            terminate_on_sigterm():
        signal.raise_signal(signal.SIGTERM)
        time.sleep(5)
    assert signal.getsignal(signal.SIGTERM) is handler and sigterm_calls == []


def test_a_server_torn_down_from_a_worker_thread_is_gone(tmp_path: Path) -> None:
    server = _server(tmp_path, "import time; time.sleep(60)")
    server.start()
    thread = threading.Thread(target=server.stop)
    thread.start()
    thread.join(timeout=30)
    assert server.proc is not None and server.proc.poll() is not None


def test_waiting_for_a_server_never_started_says_to_start_it(tmp_path: Path) -> None:
    with pytest.raises(AssertionError, match=r"^start\(\) first$"):
        _server(tmp_path, "pass").wait_ready(timeout_s=1)


def test_a_server_not_ready_in_time_is_reported_with_its_url_and_last_lines(
        tmp_path: Path) -> None:
    with _server(tmp_path, "import time; print('loading weights', flush=True); time.sleep(60)") \
            as server, pytest.raises(ServerError) as info:
        server.wait_ready(timeout_s=1, poll_s=0.1)
    assert str(info.value) == (f"server not ready after 1 s (http://127.0.0.1:0/health; "
                               f"log: {server.log_path})")
    assert info.value.log_tail.splitlines()[-1] == "loading weights"


def test_a_ready_server_reports_the_seconds_it_waited(tmp_path: Path) -> None:
    """A real HTTP server answering /health (not sglang): ready within the timeout, and the
    time returned is what was waited, not a clock reading."""
    port_file = tmp_path / "port"
    code = ("import http.server, sys\n"
            "class H(http.server.BaseHTTPRequestHandler):\n"
            "    def do_GET(self):\n"
            "        self.send_response(200); self.end_headers()\n"
            "    def log_message(self, *a): pass\n"
            "s = http.server.HTTPServer(('127.0.0.1', 0), H)\n"
            f"open({str(port_file)!r}, 'w').write(str(s.server_address[1]))\n"
            "s.serve_forever()\n")
    server = _server(tmp_path, code)
    started = time.monotonic()
    with server:
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        server.port = int(port_file.read_text())
        waited = server.wait_ready(timeout_s=30, poll_s=0.05)
    assert 0 <= waited <= time.monotonic() - started


def test_the_log_folder_is_made_with_its_parents(tmp_path: Path) -> None:
    server = _server(tmp_path, "pass")
    server.log_path = tmp_path / "run" / "servers" / "off" / "server.log"
    with server:
        pass
    assert server.log_path.read_text().startswith("# servegate: ")


def test_the_server_gets_the_specs_environment_stderr_in_its_log_and_no_stdin(
        tmp_path: Path) -> None:
    """What bench's launch spec sets is what the server sees; its stderr (where sglang logs)
    goes to the log; its stdin is /dev/null even when ours is a pipe (it can never hold a
    terminal or wait on input)."""
    import os

    code = ("import os, sys; print('mark', os.environ.get('SERVEGATE_TEST_MARK'), flush=True); "
            "print('on stderr', file=sys.stderr, flush=True); "
            "print('stdin', os.readlink('/proc/self/fd/0'), flush=True)")
    spec = LaunchSpec(argv=[sys.executable, "-c", code, "--port", "1"],
                      env={"SERVEGATE_TEST_MARK": "from-the-spec"}, set_env={},
                      health_path="/health", timeout_s=5, chunk_size=256, page_size=64)
    server = Server(spec, tmp_path / "server.log", port=0)
    read, write = os.pipe()
    saved = os.dup(0)
    os.dup2(read, 0)
    try:
        server.start()
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read, write):
            os.close(fd)
    assert server.proc is not None and server.proc.wait(timeout=30) == 0
    lines = server.log_path.read_text().splitlines()
    assert "mark from-the-spec" in lines and "on stderr" in lines
    assert "stdin /dev/null" in lines


def test_no_port_from_the_ephemeral_range_is_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the kernel's range starting at 10070, only 10000-10069 are drawn (70 ports, more
    than the 64 probes, so drawn rather than bound to 0)."""
    from servegate.serve import process

    monkeypatch.setattr(process, "ephemeral_low", lambda: process.SERVER_PORTS[0] + 70)
    ports = {process.free_port() for _ in range(300)}
    assert min(ports) >= process.SERVER_PORTS[0] and max(ports) <= process.SERVER_PORTS[0] + 69
