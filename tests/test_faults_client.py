"""Faults at the load-client boundary: the client writes nothing, crashes, or hangs (stopped
when the server dies, or at its timeout), with ``FAKE_CLIENT`` as the named test double.

No server needed. A client that writes garbage during a real run is the ``e2e`` case
``test_client_returns_garbage`` in ``test_faults_bench.py``.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest
from fault_helpers import FAKE_CLIENT, _assert_no_process_left

from servegate.measure.client import ClientError, parse_client_jsonl, run_client
from servegate.serve import process

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
