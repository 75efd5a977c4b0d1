"""Blocks sized in time (``[design] min_block_seconds``): the first start measures this
machine's wave and a block's overhead, and every block runs the waves that make it last."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from servegate.commands import bench_in_server
from servegate.config import load_suite, suite_path
from servegate.plan.design import build_block_plan


def _sized(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, wave_s: float, overhead_s: float,
           min_block_s: float | None = 2.5) -> tuple[Any, Any, list[str]]:
    suite = load_suite(suite_path("cpu"))
    suite = dataclasses.replace(suite, design=dataclasses.replace(
        suite.design, min_block_seconds=min_block_s))
    [slot] = build_block_plan(suite.modes, (2, 4), (2, 4), 1, 3, suite.seed)
    ctx = SimpleNamespace(suite=suite, run={"design": suite.design.record()},
                          session=SimpleNamespace(save=lambda: None),
                          console=SimpleNamespace(log=lambda *_: None))
    runs: list[str] = []

    def warm_up(ctx: Any, server: Any, planned: Any, host: Any, runs_: range,
                tag: str) -> tuple[float, Path]:
        runs.extend(f"{planned.mode}-c{planned.concurrency}-{tag}{i}" for i in runs_)
        jsonl = tmp_path / f"c{planned.concurrency}.jsonl"
        n = planned.num_prompts                 # the client's record, per request too
        jsonl.write_text(json.dumps({
            "completed": n, "duration": wave_s, "median_ttft_ms": 1.0, "median_tpot_ms": 1.0,
            "ttfts": [0.1] * n, "itls": [[0.01]] * n, "input_lens": [300] * n,
            "output_lens": [16] * n, "errors": [""] * n}) + "\n")
        return wave_s + overhead_s, jsonl

    monkeypatch.setattr(bench_in_server, "warm_up", warm_up)
    monkeypatch.setattr(bench_in_server, "switch", lambda *a, **k: None)
    this = SimpleNamespace(slot=slot, server=None, control=None, host=None)
    return ctx, this, runs


def test_a_fast_machine_runs_more_waves_a_block_measured_once_per_concurrency(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, this, runs = _sized(tmp_path, monkeypatch, wave_s=0.4, overhead_s=0.5)
    points = bench_in_server.sized_points(ctx, this)
    # (2.5 s - 0.5 s overhead) / 0.4 s a wave: 5 waves of each concurrency's prompts a block
    assert {(p.concurrency, p.num_prompts) for p in points} == {(2, 10), (4, 20)}
    assert len(points) == len(this.slot.points)
    first = this.slot.points[0].mode        # the server's first run is untimed (first use)
    assert runs == [f"{first}-c2-size0", f"{first}-c2-size1", f"{first}-c4-size0"]
    assert ctx.run["design"]["waves"] == {"2": 5, "4": 5}
    assert ctx.run["design"]["sizing"] == {
        "min_block_seconds": 2.5, "max_minutes": ctx.suite.design.max_minutes,
        "wave_seconds": [0.4, 0.4], "block_overhead_seconds": [0.5, 0.5], "measured_in": "s0"}
    again = bench_in_server.sized_points(ctx, this)     # a later start: sized, not measured
    assert again == points and len(runs) == 3


def test_a_slow_machine_runs_one_wave_and_a_counted_design_is_left_as_planned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, this, _ = _sized(tmp_path, monkeypatch, wave_s=3.8, overhead_s=1.0)
    assert bench_in_server.sized_points(ctx, this) == this.slot.points
    assert ctx.run["design"]["waves"] == {"2": 1, "4": 1}
    ctx, this, runs = _sized(tmp_path, monkeypatch, 0.4, 0.5, min_block_s=None)
    assert bench_in_server.sized_points(ctx, this) is this.slot.points and not runs
    assert "waves" not in ctx.run["design"]
