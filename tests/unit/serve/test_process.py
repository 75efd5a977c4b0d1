"""Server teardown on every exit path, with a real long-running fake server process tree.

The fake server (not sglang) answers GET /health and spawns a grandchild, like sglang's launcher
spawning its scheduler; one variant's grandchild even leaves the process group (setsid). After
normal exit, an exception, Ctrl-C (SIGINT) or SIGTERM, no process of the tree may be left.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_helpers import _assert_no_process_left
from repo_files import SRC

from servegate.serve import process
from servegate.serve.launch import LaunchSpec
from servegate.serve.process import PortInUse, Server, ServerError, descendants, free_port, kill_tree

FAKE_SERVER = textwrap.dedent("""
    import http.server, os, subprocess, sys, time
    port, delay, escape = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "1"
    child = [sys.executable, "-c", "import time; time.sleep(3600)"]
    subprocess.Popen(child, start_new_session=escape)   # the 'scheduler'
    print("fake server: starting", flush=True)
    if delay < 0:
        print("fake server: fatal error, exiting", flush=True)
        sys.exit(3)
    time.sleep(delay)
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
        def log_message(self, *args):
            pass
    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
""")


def _spec(tmp_path: Path, delay: float = 0.0, escape: bool = False,
          timeout_s: int = 30) -> LaunchSpec:
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    port = free_port()
    argv = [sys.executable, str(script), str(port), str(delay), "1" if escape else "0",
            "--port", str(port)]
    return LaunchSpec(argv=argv, env=dict(os.environ), set_env={}, health_path="/health",
                      timeout_s=timeout_s, chunk_size=256, page_size=64)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _wait_gone(pids: list[int], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [p for p in pids if _alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def _tree(server: Server) -> list[int]:
    assert server.proc is not None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pids = descendants(server.proc.pid)
        if pids:
            return [server.proc.pid, *pids]
        time.sleep(0.1)
    raise AssertionError("fake server did not spawn its child")


@pytest.mark.parametrize("escape", [False, True])
def test_normal_exit_kills_tree(tmp_path: Path, escape: bool) -> None:
    with Server(_spec(tmp_path, escape=escape), tmp_path / "server.log") as server:
        server.wait_ready()
        pids = _tree(server)
        assert all(_alive(p) for p in pids)
    assert _wait_gone(pids) == []
    assert "# servegate:" in (tmp_path / "server.log").read_text()


def test_exception_kills_tree(tmp_path: Path) -> None:
    pids: list[int] = []
    with pytest.raises(RuntimeError, match="boom"), \
            Server(_spec(tmp_path), tmp_path / "server.log") as server:
        server.wait_ready()
        pids = _tree(server)
        raise RuntimeError("boom")
    assert pids and _wait_gone(pids) == []


def test_dead_server_reports_log_tail(tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="exited with code 3") as info, \
            Server(_spec(tmp_path, delay=-1), tmp_path / "server.log") as server:
        server.wait_ready()
    assert "fatal error, exiting" in info.value.log_tail


def test_readiness_timeout(tmp_path: Path) -> None:
    pids: list[int] = []
    with pytest.raises(ServerError, match="not ready after 1 s"), \
            Server(_spec(tmp_path, delay=60), tmp_path / "server.log") as server:
        pids = _tree(server)
        server.wait_ready(timeout_s=1, poll_s=0.2)
    assert pids and _wait_gone(pids) == []


DRIVER = textwrap.dedent("""
    import json, signal, sys, time
    from pathlib import Path
    # Set the disposition under test: a driver started in the background of a non-interactive
    # shell (or by nohup) inherits SIGINT ignored, and Python then installs no Ctrl-C handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from servegate.serve.launch import LaunchSpec
    from servegate.serve.process import Server, descendants, terminate_on_sigterm
    spec = LaunchSpec(**json.loads(sys.argv[1]))
    try:
        with terminate_on_sigterm(), Server(spec, Path(sys.argv[2])) as server:
            server.wait_ready()
            while not descendants(server.proc.pid):
                time.sleep(0.1)
            print(json.dumps([server.proc.pid, *descendants(server.proc.pid)]), flush=True)
            time.sleep(3600)
    except BaseException as err:
        print(f"driver: {type(err).__name__}", flush=True)
        raise SystemExit(1)
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_to_driver_kills_tree(tmp_path: Path, sig: signal.Signals) -> None:
    spec = _spec(tmp_path, escape=True)
    fields = {k: getattr(spec, k) for k in ("argv", "env", "set_env", "health_path",
                                            "timeout_s", "chunk_size", "page_size")}
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, json.dumps(fields), str(tmp_path / "server.log")],
        stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
    try:
        assert driver.stdout is not None
        pids = json.loads(driver.stdout.readline())
        assert len(pids) >= 2 and all(_alive(p) for p in pids)
        driver.send_signal(sig)
        out, _ = driver.communicate(timeout=60)
        expected = "KeyboardInterrupt" if sig == signal.SIGINT else "Terminated"
        assert f"driver: {expected}" in out
        assert _wait_gone(pids) == []
    finally:
        if driver.poll() is None:
            driver.kill()


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
        kill_tree(stubborn, grace_s=60)
    assert time.monotonic() - started < 10
    assert stubborn.poll() == -signal.SIGKILL
    stubborn.stdout.close()
    _assert_no_process_left(tag, None)


# --------------------------------------------------------------------------- port (no server)

@contextlib.contextmanager
def _server_on_a_held_port(tmp_path: Path, host: str = "127.0.0.1") -> Iterator[tuple[Server, int]]:
    """A server for a port something already listens on, on ``host``."""
    with socket.socket() as held:
        held.bind((host, 0))
        held.listen(1)
        port = held.getsockname()[1]
        spec = LaunchSpec(argv=[sys.executable, "-c", "pass", "--port", str(port)], env={},
                          set_env={}, health_path="/health", timeout_s=5, chunk_size=256,
                          page_size=64)
        yield Server(spec, tmp_path / "server.log", host=host), port


def test_taken_port_refused_before_launch(tmp_path: Path) -> None:
    """The server is never launched onto a taken port (its /health could be someone else's).
    No server ran, so no log: bench then shows the error's own lines, not a stale tail."""
    with _server_on_a_held_port(tmp_path) as (server, port):
        with pytest.raises(PortInUse, match=f"port {port} on 127.0.0.1 is already in use") as info:
            server.start()
        assert server.proc is None and not (tmp_path / "server.log").exists()
    assert info.value.log_tail == ""


def test_the_port_is_checked_on_the_servers_own_host(tmp_path: Path) -> None:
    """Taken on 127.0.0.2 (loopback), free on 127.0.0.1: a server for 127.0.0.2 is refused."""
    with _server_on_a_held_port(tmp_path, "127.0.0.2") as (server, port), \
            pytest.raises(PortInUse, match=f"port {port} on 127.0.0.2 is already in use"):
        server.start()


def test_wait_log_quiet_returns_once_the_log_stops_growing(tmp_path: Path) -> None:
    """A block's log slice ends after the server's last lines: waiting follows a log that is
    still being written, and returns soon (not after the cap) once it is quiet."""
    import threading
    import time

    log = tmp_path / "server.log"
    log.write_text("start\n")
    spec = LaunchSpec(argv=[sys.executable, "-c", "pass", "--port", "1"], env={}, set_env={},
                      health_path="/health", timeout_s=5, chunk_size=256, page_size=64)
    server = Server(spec, log)

    def write_late_lines() -> None:
        for i in range(5):
            time.sleep(0.03)
            with log.open("a") as out:
                out.write(f"late line {i}\n")

    writer = threading.Thread(target=write_late_lines)
    writer.start()
    started = time.monotonic()
    size = server.wait_log_quiet(quiet_s=0.1, max_s=6.0)
    waited = time.monotonic() - started
    writer.join()
    assert size == log.stat().st_size and "late line 4" in log.read_text()
    assert waited < 3.0                                   # quiet, so not the 6 s cap
    started = time.monotonic()
    assert server.wait_log_quiet(quiet_s=0.1, max_s=6.0) == size
    assert time.monotonic() - started < 3.0               # already quiet: about quiet_s


def test_wait_log_quiet_gives_up_at_its_cap_on_a_log_that_never_stops(tmp_path: Path) -> None:
    import threading
    import time

    log = tmp_path / "server.log"
    log.write_text("")
    spec = LaunchSpec(argv=[sys.executable, "-c", "pass", "--port", "1"], env={}, set_env={},
                      health_path="/health", timeout_s=5, chunk_size=256, page_size=64)
    server = Server(spec, log)
    stop = threading.Event()

    def chatter() -> None:
        while not stop.is_set():
            with log.open("a") as out:
                out.write("x\n")
            time.sleep(0.01)

    writer = threading.Thread(target=chatter)
    writer.start()
    try:
        started = time.monotonic()
        server.wait_log_quiet(quiet_s=0.1, max_s=0.3)
        assert 0.25 <= time.monotonic() - started < 3.0
    finally:
        stop.set()
        writer.join()


def test_free_port_is_below_the_ephemeral_range_where_no_loading_server_draws(
        tmp_path: Path) -> None:
    from servegate.serve import process

    ports = {free_port() for _ in range(20)}
    low = process.ephemeral_low()
    assert all(process.SERVER_PORTS[0] <= p <= min(process.SERVER_PORTS[1], low - 1)
               for p in ports), (ports, low)
    assert len(ports) > 1                           # drawn, not one fixed port
    with socket.socket() as held:                   # a port taken now is never handed out
        held.bind(("127.0.0.1", min(ports)))
        assert all(free_port() != min(ports) for _ in range(50))


def test_free_port_falls_back_to_bind_zero_without_room_below_the_ephemeral_range(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from servegate.serve import process

    ranges = tmp_path / "ip_local_port_range"
    ranges.write_text("40000\t60999\n")
    assert process.ephemeral_low(ranges) == 40000
    assert process.ephemeral_low(tmp_path / "absent") == 32768
    monkeypatch.setattr(process, "ephemeral_low", lambda: process.SERVER_PORTS[0] + 10)
    port = free_port()
    assert not process.SERVER_PORTS[0] <= port <= process.SERVER_PORTS[1]
    assert process.port_is_free(port)


DYING_SERVER = textwrap.dedent("""
    import subprocess, sys, time
    child = [sys.executable, "-c",
             "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
             "print('scheduler up', flush=True); time.sleep(3600)"]
    subprocess.Popen(child)            # the 'scheduler', in the server's group, deaf to SIGTERM
    time.sleep(1.0)
    print("fake server: fatal error at start, exiting", flush=True)
    sys.exit(3)
""")


def _group(pgid: int) -> list[int]:
    """Live processes whose process group is ``pgid`` (/proc stat field 5)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(entry.name))
    return found


def test_no_process_of_the_servers_group_is_left_when_it_died_at_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher died before it was ready; its scheduler (now an orphan: not a descendant any
    more) ignores SIGTERM. Teardown still leaves no process of the server's group (after a 2 s
    grace here; the server's is 15 s)."""
    monkeypatch.setattr(process, "kill_tree", functools.partial(kill_tree, grace_s=2.0))
    script = tmp_path / "dying_server.py"
    script.write_text(DYING_SERVER)
    port = free_port()
    spec = LaunchSpec(argv=[sys.executable, str(script), "--port", str(port)],
                      env=dict(os.environ), set_env={}, health_path="/health", timeout_s=30,
                      chunk_size=256, page_size=64)
    pgid = 0
    with pytest.raises(ServerError, match="exited with code 3") as info, \
            Server(spec, tmp_path / "server.log") as server:
        assert server.proc is not None
        pgid = server.proc.pid
        server.wait_ready(poll_s=0.1)
    assert "fatal error at start" in info.value.log_tail
    assert "scheduler up" in (tmp_path / "server.log").read_text()
    assert _wait_gone(_group(pgid), timeout=10.0) == [] and _group(pgid) == []
