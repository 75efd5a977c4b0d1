"""GSM8K client: retry policy and concurrency bound over real HTTP on 127.0.0.1.

The server here is a test double of sglang at the HTTP boundary only: a stdlib
``ThreadingHTTPServer`` that speaks ``POST /generate`` like sglang (``text`` + ``meta_info``) and
can drop connections, fail, stall or answer wrongly on request. It exists to observe retry and
concurrency behaviour that a healthy real server never exhibits; the real sglang path is covered
by ``tests/real_sglang/serving/test_fresh_clone.py`` (marker ``e2e``: the README main command,
GSM8K included).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from servegate.accuracy.client import GenerateClient, GenerationError

pytest.importorskip("aiohttp", reason="the GSM8K client uses aiohttp (a dependency of sglang)")


class FakeSglang(ThreadingHTTPServer):
    """sglang stand-in (HTTP boundary only); behaviour is chosen by the prompt text."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.calls: Counter[str] = Counter()
        self.bodies: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: FakeSglang

    def log_message(self, *args: object) -> None:  # keep pytest output clean
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = body["text"]
        srv = self.server
        with srv.lock:
            srv.calls[text] += 1
            srv.bodies.append(body)
            attempt = srv.calls[text]
            srv.in_flight += 1
            srv.max_in_flight = max(srv.max_in_flight, srv.in_flight)
        try:
            if text.startswith("drop:") and attempt <= int(text.split(":")[1]):
                self.close_connection = True      # no response at all: a connection error
                self._leave()
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if text == "error":
                self._send(500, b'{"error": "boom"}')
                return
            if text.startswith("sleep:"):
                time.sleep(float(text.split(":")[1].split("#")[0]))
            answer = "#### 0" if text == "wrong" else f"echo {text}"
            self._send(200, json.dumps({"text": answer, "meta_info": {
                "completion_tokens": 3, "prompt_tokens": 5,
                "finish_reason": {"type": "stop", "matched": "Question"}}}).encode())
        finally:
            self._leave()

    def _leave(self) -> None:
        """Count the request out before its response is written: a client may send its next
        request the moment it has read this one, and must not be seen as two in flight."""
        if getattr(self, "_left", False):
            return
        self._left = True
        with self.server.lock:
            self.server.in_flight -= 1

    def _send(self, status: int, payload: bytes) -> None:
        self._leave()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def server() -> Iterator[FakeSglang]:
    srv = FakeSglang()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_payload_is_greedy_native_generate(server: FakeSglang) -> None:
    [completion] = GenerateClient(server.url, concurrency=1).run(["hello"])
    assert completion.text == "echo hello" and completion.completion_tokens == 3
    assert completion.attempts == 1
    assert server.bodies == [{"text": "hello", "sampling_params": {
        "temperature": 0, "max_new_tokens": 512, "stop": ["Question"]}}]


@pytest.mark.parametrize("concurrency", [1, 3, 6])
def test_concurrency_is_bounded_and_order_kept(server: FakeSglang, concurrency: int) -> None:
    prompts = [f"sleep:{0.05 + 0.02 * ((i * 7) % 10):.2f}#{i}" for i in range(12)]
    start = time.perf_counter()
    completions = GenerateClient(server.url, concurrency=concurrency, retries=0).run(prompts)
    elapsed = time.perf_counter() - start
    assert [c.text for c in completions] == [f"echo {p}" for p in prompts]
    assert server.max_in_flight == concurrency        # reached, never exceeded
    assert sum(server.calls.values()) == 12
    serial = sum(float(p.split(":")[1].split("#")[0]) for p in prompts)
    assert elapsed < serial / concurrency * 1.5 + 0.2  # requests actually overlapped


def test_connection_drops_are_retried(server: FakeSglang) -> None:
    client = GenerateClient(server.url, concurrency=2, retries=3, backoff_s=0.01)
    completions = client.run(["drop:2", "ok"])
    assert completions[0].text == "echo drop:2" and completions[0].attempts == 3
    assert server.calls["drop:2"] == 3 and server.calls["ok"] == 1


def test_retries_are_bounded(server: FakeSglang) -> None:
    client = GenerateClient(server.url, concurrency=1, retries=2, backoff_s=0.01)
    with pytest.raises(GenerationError, match="connection failed after 3 attempts"):
        client.run(["drop:99"])
    assert server.calls["drop:99"] == 3


def test_wrong_answer_is_not_retried(server: FakeSglang) -> None:
    [completion] = GenerateClient(server.url, retries=3, backoff_s=0.01).run(["wrong"])
    assert completion.text == "#### 0" and completion.attempts == 1
    assert server.calls["wrong"] == 1


def test_http_error_is_not_retried(server: FakeSglang) -> None:
    client = GenerateClient(server.url, retries=3, backoff_s=0.01)
    with pytest.raises(GenerationError, match="HTTP 500"):
        client.run(["error"])
    assert server.calls["error"] == 1


def test_slow_answer_times_out_without_retry(server: FakeSglang) -> None:
    """A 0.5 s budget against a 3 s answer (wide enough that a loaded machine still sends the
    request within it); the server's count is read once its handler has seen the request."""
    client = GenerateClient(server.url, retries=3, backoff_s=0.01, timeout_s=0.5)
    with pytest.raises(GenerationError, match="no answer within"):
        client.run(["sleep:3.0"])
    deadline = time.monotonic() + 5.0
    while not server.calls["sleep:3.0"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.calls["sleep:3.0"] == 1


def test_refused_connection_fails_with_the_url() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = GenerateClient(f"http://127.0.0.1:{port}", retries=1, backoff_s=0.01)
    with pytest.raises(GenerationError, match=rf"127.0.0.1:{port}/generate: connection failed"):
        client.run(["x"])
