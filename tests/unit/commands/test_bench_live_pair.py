"""The live pair's idle check: the other server's log slice over a block counts its batches."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from servegate.commands.bench_blocks import LiveServer, batches_since
from servegate.measure.client_host import ClientHost
from servegate.measure.logparse import batch_lines
from servegate.plan.design import ServerSlot
from servegate.serve.launch import LaunchSpec
from servegate.serve.modeswitch import ModeControl
from servegate.serve.process import Server


def test_an_idle_server_log_slice_has_no_batches() -> None:
    busy = ("[2026-12-01 12:30:00] Prefill batch, #new-seq: 1, #new-token: 256, ...\n"
            "[2026-12-01 12:30:01] Decode batch, #running-req: 2, #token: 640, ...\n"
            "[2026-12-01 12:30:01 DP1 TP2] Prefill batch, #new-seq: 2, ...\n")
    idle = ('[2026-12-01 12:30:02] INFO:     127.0.0.1:4 - "GET /v1/models HTTP/1.1" 200 OK\n'
            "servegate-hook: mode ack seq=3 mode=off gate=False in pid 7\n")
    assert batch_lines(busy) == 3 and batch_lines(idle) == 0 and batch_lines("") == 0


def _other_server(tmp_path: Path, log_text: str) -> LiveServer:
    """The other arm of a live pair, not started: only its log is read."""
    log = tmp_path / "server" / "base.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(log_text)
    spec = LaunchSpec(argv=[sys.executable, "-c", "pass", "--port", "1"], env={}, set_env={},
                      health_path="/health", timeout_s=5, chunk_size=256, page_size=64)
    slot = ServerSlot(mode="off", repeat=0, index=1, points=(), arm="base", in_server=True)
    return LiveServer(slot, Server(spec, log), ModeControl(tmp_path / "base.mode.json"),
                      ClientHost(sys.executable, None, tmp_path / "worker.log"), "server/base.log")


def test_the_idle_check_counts_only_batches_logged_during_the_block(tmp_path: Path) -> None:
    """Batches the other server ran before the block (its own warm-up, an earlier block) do
    not count; one logged after the block's start does."""
    before = "[2026-12-01 12:29:59] Prefill batch, #new-seq: 4, #new-token: 256, ...\n"
    other = _other_server(tmp_path, before)
    since = other.server.log_offset()
    with other.server.log_path.open("a") as log:
        log.write('[2026-12-01 12:30:02] INFO:     127.0.0.1:4 - "GET /health HTTP/1.1" 200\n')
    assert batches_since(other.server, since) == 0
    with other.server.log_path.open("a") as log:
        log.write("[2026-12-01 12:30:03] Decode batch, #running-req: 1, #token: 300, ...\n")
    assert batches_since(other.server, since) == 1
    assert batches_since(other.server, 0) == 2


def test_a_crossover_start_runs_only_when_the_first_look_leaves_it_undecided(
        tmp_path: Path, monkeypatch: Any) -> None:
    """The second start of a crossover: the look after the first start is taken; when it
    decides the run, the start is skipped (no server started) and its blocks recorded as
    saved; the first start never looks."""
    from servegate.commands import bench_live_pair
    from servegate.plan.design import LivePair, PlannedPoint

    looked: list[int] = []
    saved: list[int] = []
    monkeypatch.setattr(bench_live_pair, "take_look", lambda ctx, n: looked.append(n) or True)
    monkeypatch.setattr(bench_live_pair, "skipped", lambda ctx, rest: saved.append(len(rest)))
    points = tuple(PlannedPoint(mode="off", concurrency=2, num_prompts=2, repeat=1, order=i,
                                seed=1, arm=arm, start=1, block=0)
                   for i, arm in enumerate(("base", "head")))
    ctx = SimpleNamespace(run={"design": {"crossover": True}}, suite=None)
    bench_live_pair.run_live_pair(ctx, LivePair(1, (), points), None, None, False)
    assert looked == [1] and saved == [2]
    with pytest.raises(AttributeError):     # the first start goes on to start its servers
        bench_live_pair.run_live_pair(ctx, LivePair(0, (), points), None, None, False)
    assert looked == [1]
