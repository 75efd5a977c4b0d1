"""Server lifecycle: start in its own session, wait for readiness, always tear the tree down.

sglang spawns a scheduler and a detokenizer, so the whole process group (and any descendant that
left it, found through /proc) is killed. ``terminate_on_sigterm`` turns SIGTERM into an
exception so teardown runs on CI cancellation too. A taken port is refused before launch."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

from servegate.core.errors import ServegateError
from servegate.serve.launch import LaunchSpec

HEALTH_REQUEST_TIMEOUT_S = 10.0     # one /health request; a wedged server must not block the wait


class ServerError(ServegateError, RuntimeError):
    """The server failed to start or died; ``log_tail`` holds the end of its log."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail


class PortInUse(ServerError):
    """The server's port was taken (before launch, or by the time the server bound it)."""


class Terminated(BaseException):
    """Raised in the main thread on SIGTERM so cleanup runs like for KeyboardInterrupt."""


@contextlib.contextmanager
def terminate_on_sigterm() -> Iterator[None]:
    def _raise(signum: int, frame: FrameType | None) -> None:
        raise Terminated(f"received signal {signum}")

    previous = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def signals_deferred(redeliver: bool = True) -> Iterator[list[int]]:
    """Hold SIGINT/SIGTERM so a second Ctrl-C (or CI's SIGTERM after its SIGINT) cannot cut a
    teardown short; the yielded list records them. With ``redeliver`` the first one is handed
    to the previous handler afterwards (e.g. KeyboardInterrupt), else it is dropped (exiting
    anyway). Only the main thread can set handlers; elsewhere this does nothing."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, lambda signum, frame: received.append(signum))
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if received and redeliver:
            handler = previous[signal.Signals(received[0])]
            if callable(handler):
                handler(received[0], None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(received[0])


# Server ports come from below the kernel's ephemeral range and below sglang's own picks
# (srt/utils/network.py get_free_port_below_ephemeral: 22000-29999 for its NCCL/TCPStore port):
# bind(0) and outgoing connections of every process, a live pair's other server while it loads
# included, take their ports from the ephemeral range, so a port chosen there could be taken
# before the server binds it late (after loading). Measured 2026-12-03: two CPU servers started
# together lost the second's port that way.
SERVER_PORTS = (10000, 21999)
PORT_PROBES = 64
_ports = random.SystemRandom()          # not the run's seeded random: two runs, two draws


def ephemeral_low(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> int:
    """The lowest port the kernel hands out for bind(0) and connect() (Linux; else 32768)."""
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port(host: str = "127.0.0.1") -> int:
    """A port a server can bind later: free now and outside the range other processes draw
    from on their own; bind(0)'s answer only when that range is exhausted or absent."""
    low, high = SERVER_PORTS[0], min(SERVER_PORTS[1], ephemeral_low() - 1)
    if high - low + 1 >= PORT_PROBES:
        for port in _ports.sample(range(low, high + 1), PORT_PROBES):
            if port_is_free(port, host):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether ``port`` can be bound now (free_port's answer can be stale: another process may
    take the port between the probe and the server's bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


# What sglang (uvicorn) or its port checks print when a port is taken. sglang 0.5.23 does not
# exit when uvicorn cannot bind: it logs the error and hangs, so the log is watched.
_PORT_CLASH = ("address already in use", "[errno 98]", "is not available in")


def _port_clash(log_tail: str) -> bool:
    text = log_tail.lower()
    return any(key in text for key in _PORT_CLASH)


def _proc_table() -> list[tuple[int, int, int]]:
    """(pid, parent pid, process group) of every live process (Linux /proc; empty elsewhere)."""
    table = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if len(fields) > 2:
            table.append((int(entry.name), int(fields[1]), int(fields[2])))
    return table


def descendants(pid: int) -> list[int]:
    """All live descendants of ``pid``."""
    children: dict[int, list[int]] = {}
    for child, parent, _group in _proc_table():
        children.setdefault(parent, []).append(child)
    found, stack = [], [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def group_members(pgid: int) -> list[int]:
    """Processes of process group ``pgid``: a server that died at start leaves its scheduler
    orphaned (no longer a descendant) but still in the group it started."""
    # pragma on the next line: its `!=` mutant signals every process outside the group
    return [pid for pid, _parent, group in _proc_table() if group == pgid]  # pragma: no mutate


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:   # a zombie is dead for our purposes
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        return state != "Z"
    except (OSError, IndexError):
        return True


def kill_tree(proc: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    """SIGTERM the group (and stray descendants), then SIGKILL whatever is left after grace.

    A signal arriving meanwhile does not abort the teardown: it skips the grace (straight to
    SIGKILL) and is re-raised once the tree is gone.
    """
    with signals_deferred() as received:
        pids = set(descendants(proc.pid)) | set(group_members(proc.pid))
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            pids |= set(descendants(proc.pid)) | set(group_members(proc.pid))
            pids.discard(proc.pid)
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 5.0)
            while time.monotonic() < deadline and not (sig == signal.SIGTERM and received):
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=0.2)
                if proc.poll() is not None:
                    if not any(_alive(p) for p in pids):
                        return
                    time.sleep(0.2)     # the launcher is gone, others linger: do not spin
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


class Server:
    """One sglang server process; use as a context manager so teardown always happens."""

    def __init__(self, spec: LaunchSpec, log_path: Path, host: str = "127.0.0.1",
                 port: int | None = None) -> None:
        self.spec = spec
        self.log_path = log_path
        self.host = host
        self.port = port if port is not None else _port_from_argv(spec.argv)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> None:
        if not port_is_free(self.port, self.host):
            # Never launch onto a taken port: /health could be answered by whatever holds it.
            raise PortInUse(f"port {self.port} on {self.host} is already in use")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            log.write(f"# servegate: {self.spec.display()}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.spec.argv, env=self.spec.env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True)

    def log_offset(self) -> int:
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def wait_log_quiet(self, quiet_s: float = 0.1, max_s: float = 0.5,
                       poll_s: float = 0.02) -> int:
        """Wait until the log stops growing for ``quiet_s`` (at most ``max_s``); returns its size.

        Why: a block's measured log slice must hold its last lines (the final request's access
        line, late stats), and a fixed pause of ``max_s`` per block added up to minutes over a
        CI run, while the server usually writes nothing more after a block within 0.1 s."""
        size = self.log_offset()
        deadline = time.monotonic() + max_s
        still_since = time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(poll_s)
            now = self.log_offset()
            if now != size:
                size, still_since = now, time.monotonic()
            elif time.monotonic() - still_since >= quiet_s:
                break
        return size

    def wait_ready(self, timeout_s: float | None = None, poll_s: float = 1.0) -> float:
        """Block until GET health answers 200; returns seconds waited. Dies/timeouts raise."""
        assert self.proc is not None, "start() first"
        timeout = float(timeout_s if timeout_s is not None else self.spec.timeout_s)
        started = time.monotonic()
        url = self.base_url + self.spec.health_path
        while True:
            code = self.proc.poll()
            last = tail(self.log_path)
            if _port_clash(last):
                raise PortInUse(f"server could not bind port {self.port}: already in use "
                                f"(log: {self.log_path})", last)
            if code is not None:
                raise ServerError(f"server exited with code {code} before it was ready "
                                  f"(log: {self.log_path})", last)
            try:
                with urllib.request.urlopen(url, timeout=HEALTH_REQUEST_TIMEOUT_S) as response:
                    if response.status == 200:
                        return time.monotonic() - started
            except (urllib.error.URLError, OSError, TimeoutError):
                pass
            if time.monotonic() - started > timeout:
                raise ServerError(f"server not ready after {timeout:.0f} s "
                                  f"({url}; log: {self.log_path})", tail(self.log_path))
            time.sleep(poll_s)

    def check_alive(self, wait_s: float = 0.0) -> None:
        """Raise ServerError if the launcher exited; ``wait_s`` gives a dying one time to be
        reaped (a client may see the server's socket close before its exit is visible)."""
        if self.proc is not None and wait_s > 0:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=wait_s)
        if self.proc is not None and self.proc.poll() is not None:
            raise ServerError(f"server died with code {self.proc.returncode} "
                              f"(log: {self.log_path})", tail(self.log_path))

    def stop(self) -> None:
        if self.proc is not None:
            kill_tree(self.proc)

    def __enter__(self) -> Server:
        if self.proc is None:           # bench starts it first (to retry a taken port)
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _port_from_argv(argv: list[str]) -> int:
    return int(argv[argv.index("--port") + 1])
