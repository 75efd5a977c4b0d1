"""Where ``free_port`` draws a server's port, on real sockets: from below the kernel's ephemeral
range while that leaves room for all its probes (exactly as many ports as probes included), else
the port the kernel picks for bind(0), which lies in its ephemeral range; each port probed on the
server's own host. And a health check that hangs is given up (its request has a timeout)."""

from __future__ import annotations

import contextlib
import socket
import sys
import threading
from pathlib import Path

import pytest

from servegate.serve import process
from servegate.serve.launch import LaunchSpec


def _kernel_ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def _room(monkeypatch: pytest.MonkeyPatch, ports: int) -> range:
    """The kernel's range made to start ``ports`` ports above the server range's bottom."""
    low = process.SERVER_PORTS[0]
    monkeypatch.setattr(process, "ephemeral_low", lambda: low + ports)
    return range(low, low + ports)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's port range")
def test_exactly_as_many_free_ports_as_probes_are_drawn_from(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """64 ports below the ephemeral range: every draw is one of them (the top one too: a
    sample of all 64 probes each once), none from the kernel's bind(0)."""
    room = _room(monkeypatch, process.PORT_PROBES)
    ports = [process.free_port() for _ in range(100)]
    assert all(p in room for p in ports), sorted(set(ports) - set(room))
    assert len(set(ports)) > 1


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's port range")
def test_one_port_fewer_than_the_probes_gets_the_kernels_own_pick(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """63 ports are too few to draw 64 probes from: the port is bind(0)'s, from the kernel's
    ephemeral range (not port 1, nor one of the 63)."""
    kernel_low = _kernel_ephemeral_low()
    _room(monkeypatch, process.PORT_PROBES - 1)
    port = process.free_port()
    assert port >= kernel_low, (port, kernel_low)
    assert process.port_is_free(port)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="127.0.0.2 is loopback")
def test_each_port_is_probed_on_the_servers_own_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every drawable port taken on 127.0.0.2 (free on 127.0.0.1): a server on 127.0.0.2 gets
    the kernel's pick there, never a drawn port its host has taken."""
    kernel_low = _kernel_ephemeral_low()
    room = _room(monkeypatch, process.PORT_PROBES)
    with contextlib.ExitStack() as stack:
        for port in room:
            sock = stack.enter_context(socket.socket())
            with contextlib.suppress(OSError):   # taken by another process: taken anyway
                sock.bind(("127.0.0.2", port))
        port = process.free_port("127.0.0.2")
        assert port not in room and port >= kernel_low, (port, kernel_low)
        assert process.port_is_free(port, "127.0.0.2")


def test_a_health_check_that_never_answers_is_given_up(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A listener that accepts /health and never replies (a wedged server) does not block
    ``wait_ready``: the request times out (10 s; 1 s here), the deadline is checked and the wait
    fails naming the URL. Without the request's timeout it would block for ever."""
    monkeypatch.setattr(process, "HEALTH_REQUEST_TIMEOUT_S", 1.0)
    port = process.free_port()
    spec = LaunchSpec(argv=[sys.executable, "-c", "import time; time.sleep(60)",
                            "--port", str(port)], env={}, set_env={}, health_path="/health",
                      timeout_s=0, chunk_size=256, page_size=64)
    errors: list[BaseException] = []
    with process.Server(spec, tmp_path / "server.log") as server, socket.socket() as wedged:
        wedged.bind(("127.0.0.1", port))       # the 'server' binds its port and never answers
        wedged.listen(4)

        def wait() -> None:
            try:
                server.wait_ready(poll_s=0.1)
            except process.ServerError as err:
                errors.append(err)

        waiter = threading.Thread(target=wait, daemon=True)
        waiter.start()
        waiter.join(timeout=30)
        assert not waiter.is_alive(), "wait_ready blocked on a health check that never answers"
    assert len(errors) == 1 and f"127.0.0.1:{port}/health" in str(errors[0])
