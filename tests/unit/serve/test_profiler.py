"""sglang's profiler endpoints as servegate calls them: the request body, the trace files a
request wrote (rank 0 first), and ``finish`` stopping the profiler only when the block left it
running. The server here is a real local HTTP server standing in for sglang's two endpoints
(their request handling is sglang's; the e2e test runs the real one)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from servegate.serve.profiler import (
    ProfileError,
    ProfileRequest,
    activities_for,
    finish,
    start,
    traces,
)


class _Endpoints(BaseHTTPRequestHandler):
    calls: ClassVar[list[tuple[str, dict]]] = []
    write_on_stop: ClassVar[Path | None] = None
    fail: ClassVar[bool] = False

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        type(self).calls.append((self.path, body))
        if type(self).fail:
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b"Profiling is already in progress")
            return
        if self.path == "/stop_profile" and type(self).write_on_stop is not None:
            type(self).write_on_stop.write_bytes(b"{}")
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok\n")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Endpoints.calls, _Endpoints.write_on_stop, _Endpoints.fail = [], None, False
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Endpoints)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def test_start_sends_the_bounded_request(server: str, tmp_path: Path) -> None:
    request = ProfileRequest(tmp_path / "raw", "forced-s0", 8, activities_for("cpu"))
    start(server, request)
    assert _Endpoints.calls == [("/start_profile", {
        "output_dir": str(tmp_path / "raw"), "num_steps": 8, "activities": ["CPU"],
        "profile_prefix": "forced-s0", "with_stack": False, "record_shapes": False})]
    assert (tmp_path / "raw").is_dir()
    assert activities_for("gfx95") == ("CPU", "GPU")


def test_finish_reads_the_trace_the_scheduler_wrote(server: str, tmp_path: Path) -> None:
    request = ProfileRequest(tmp_path, "off-s0", 8, ("CPU",))
    (tmp_path / "off-s0-17.5-TP-1.trace.json.gz").write_bytes(b"")
    (tmp_path / "off-s0-17.5-TP-0.trace.json.gz").write_bytes(b"")
    (tmp_path / "forced-s0-17.5-TP-0.trace.json.gz").write_bytes(b"")
    assert [p.name for p in traces(request)] == ["off-s0-17.5-TP-0.trace.json.gz",
                                                 "off-s0-17.5-TP-1.trace.json.gz"]
    first = finish(server, request, lambda: None)[0]
    assert first.name.endswith("TP-0.trace.json.gz")
    assert _Endpoints.calls == []               # stopped by itself: no /stop_profile


def test_finish_stops_a_profile_the_block_left_running(server: str, tmp_path: Path) -> None:
    request = ProfileRequest(tmp_path, "on-s1", 50, ("CPU",))
    _Endpoints.write_on_stop = tmp_path / "on-s1-3.0-TP-0.trace.json.gz"
    assert [p.name for p in finish(server, request, lambda: None)] == [
        "on-s1-3.0-TP-0.trace.json.gz"]
    assert [c[0] for c in _Endpoints.calls] == ["/stop_profile"]


def test_a_refusal_or_a_missing_trace_is_an_error(server: str, tmp_path: Path) -> None:
    _Endpoints.fail = True
    with pytest.raises(ProfileError, match=r"HTTP 500.*already in progress"):
        start(server, ProfileRequest(tmp_path, "x", 1, ("CPU",)))
    _Endpoints.fail = False
    with pytest.raises(ProfileError, match="no trace y-"):
        finish(server, ProfileRequest(tmp_path, "y", 1, ("CPU",)), lambda: None, timeout_s=0.3)
