"""Interim looks in bench: due only at the end of a look's block round in the last start; the
run stops where the judge says its verdict is known, and run.json says what that saved."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from servegate.commands import bench_looks
from servegate.config import Design
from servegate.judge.checks import Check
from servegate.plan.design import build_block_plan


def _ctx(tmp_path: Path, starts: int = 2, blocks: int = 4,
         looks: tuple[int, ...] = (2, 3)) -> Any:
    design = Design(starts=starts, blocks=blocks, looks=looks)
    suite = SimpleNamespace(effective_design=design, judge=SimpleNamespace(confidence=0.95))
    logged: list[str] = []
    return SimpleNamespace(suite=suite, run={"points": []}, run_dir=tmp_path,
                           session=SimpleNamespace(save=lambda: None),
                           console=SimpleNamespace(log=logged.append), logged=logged)


def _points(starts: int = 2, blocks: int = 4) -> list[Any]:
    slots = build_block_plan(("off", "on"), (2, 4), (2, 4), starts, blocks, seed=1)
    return [p for slot in slots for p in slot.points]


def test_a_look_is_due_after_its_round_in_the_last_start_only(tmp_path: Path) -> None:
    ctx, points = _ctx(tmp_path), _points()
    due = [(p.start, p.block, bench_looks.look_due(ctx, p, nxt))
           for p, nxt in zip(points, [*points[1:], None], strict=True)]
    assert [(s, b, k) for s, b, k in due if k is not None] == [(1, 1, 2), (1, 2, 3)]
    assert sum(k is not None for _, _, k in due) == 2       # once per round, not per point
    assert bench_looks.look_due(_ctx(tmp_path, looks=()), points[-1], None) is None


def test_the_run_stops_at_the_first_look_that_decides_and_records_the_saving(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = _ctx(tmp_path, starts=1)
    points = tuple(_points(starts=1))
    looked: list[int] = []
    rests: list[int] = []

    def take(ctx: Any, blocks: int, rest: Any) -> bool:
        looked.append(blocks)
        rests.append(len(rest))                 # the blocks planned after the look (the cap's)
        return blocks == 3

    monkeypatch.setattr(bench_looks, "take_look", take)
    measured: list[Any] = []

    def measure(planned: Any) -> None:
        measured.append(planned)
        ctx.run["points"].append({"wall_s": 6.0})

    bench_looks.run_points(ctx, points, measure)
    assert looked == [2, 3] and rests == [2 * 4, 1 * 4]
    assert {p.block for p in measured} == {0, 1, 2} and len(measured) == 3 * 4
    record = ctx.run["sequential"]
    assert record["skipped_points"] == 4 and record["minutes_saved"] == 0.4   # 4 x 6 s
    assert record["looks"] == [2, 3, 4] and len(record["levels"]) == 3


def _judgement(*verdicts: str, gate: bool = True) -> Any:
    checks = [Check("ab", f"check {i}", "mean_ttft_ms", v, gate=gate, primary=True)
              for i, v in enumerate(verdicts)]
    return SimpleNamespace(checks=checks, config=SimpleNamespace(confidence=0.99))


@pytest.mark.parametrize(("verdicts", "gate", "stop"), [
    (("regression", "inconclusive"), True, True),       # the run fails whatever comes next
    (("pass", "improvement"), True, True),              # every gated check decided
    (("pass", "inconclusive"), True, False),            # one still open: go on
    (("regression",), False, False),                    # nothing gated: nothing to decide
    (("pass", "error"), True, False),                   # an error is not a decision: go on
    (("error",), True, False),
    (("regression", "error"), True, True),              # a regression fails the run anyway
    (("improvement", "pass", "pass"), True, True),
])
def test_a_look_stops_on_a_gated_regression_or_when_every_gated_check_is_decided(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, verdicts: tuple[str, ...],
        gate: bool, stop: bool) -> None:
    ctx = _ctx(tmp_path, starts=1)
    monkeypatch.setattr(bench_looks, "judge",
                        lambda run_dir, at_blocks: _judgement(*verdicts, gate=gate))
    assert bench_looks.take_look(ctx, 2) is stop
    [taken] = ctx.run["sequential"]["taken"]
    assert taken["blocks"] == 2 and taken["stop"] is stop and taken["level"] == 0.01
    assert ctx.run["sequential"]["stopped_at_blocks"] == (2 if stop else None)
    assert ctx.logged[-1].startswith(f"look after 2 of 4 blocks: {'stop' if stop else 'go on'}")


VERDICTS = ("pass", "regression", "improvement", "inconclusive", "error")


@pytest.mark.parametrize("first", VERDICTS)
@pytest.mark.parametrize("second", VERDICTS)
def test_bench_stops_where_the_calibrated_rule_stops_in_every_verdict_state(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first: str, second: str) -> None:
    """The look bench takes and the rule the calibration simulates (judge.sequential.stops)
    agree for two gated checks in every pair of states; an ``error`` counts as undecided (the
    simulation's inconclusive), so a broken check never stops a run as if decided."""
    import numpy as np

    from servegate.judge import sequential
    from servegate.judge.stats import CODES

    code = {verdict: number for number, verdict in CODES.items()} | {"error": 3}
    ctx = _ctx(tmp_path, starts=1)
    monkeypatch.setattr(bench_looks, "judge", lambda run_dir, at_blocks: _judgement(first, second))
    simulated = sequential.stops(np.array([[code[first], code[second]]]), np.array([[True, True]]))
    assert bench_looks.take_look(ctx, 2) is bool(simulated[0])


def test_a_family_check_short_of_the_power_to_gate_keeps_the_run_going(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A no-op TOST reported, not gating (its power below noop_min_power) is not a decision:
    more blocks may let it gate, so the look goes on, as the simulated rule does."""
    import numpy as np

    from servegate.judge import sequential

    judged = _judgement("pass", "pass")
    judged.checks[1].gate = False
    ctx = _ctx(tmp_path, starts=1)
    monkeypatch.setattr(bench_looks, "judge", lambda run_dir, at_blocks: judged)
    assert bench_looks.take_look(ctx, 2) is False
    assert ctx.run["sequential"]["taken"][0]["undecided"] == ["check 1"]
    assert not sequential.stops(np.array([[0, 0]]), np.array([[True, False]]))[0]


def _rest() -> tuple[Any, ...]:
    """The blocks planned after round 4 of 12 (2 modes, one concurrency)."""
    [slot] = build_block_plan(("off", "on"), (2,), (2,), 1, 12, seed=1)
    return tuple(p for p in slot.points if p.block >= 4)


def _capped_ctx(tmp_path: Path, block_s: float, walls: list[float] | None = None) -> Any:
    import dataclasses

    from servegate.config import load_suite, suite_path

    ctx = _ctx(tmp_path, starts=1)
    ctx.suite = dataclasses.replace(load_suite(suite_path("cpu")), design=Design(
        starts=1, blocks=12, looks=(4, 8), max_minutes=1.0))
    ctx.run["design"] = ctx.suite.effective_design.record()
    # 4 rounds of 2 modes measured, block_s each, plus a switch per block
    ctx.run["timings"] = {"blocks": [{"seconds": w} for w in walls or [block_s] * 8],
                          "switches": [] if walls else [{"seconds": 0.5}] * 8}
    return ctx


def test_the_time_cap_makes_a_look_the_final_one_when_the_next_would_end_past_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks counted by need: undecided at look 4 of 12, 8 blocks of 3.5 s (and 0.5 s switches)
    measured, the 8 planned to the look at 8 would end at 64 s, past the 1 min cap: this look is
    the final one, run.json's design and sequential say so, judged at the shorter schedule's
    level."""
    from servegate.judge import sequential

    monkeypatch.setattr(bench_looks, "judge",
                        lambda run_dir, at_blocks: _judgement("pass", "inconclusive"))
    ctx = _capped_ctx(tmp_path, 3.5)
    assert bench_looks.take_look(ctx, 4, _rest()) is True
    record = ctx.run["sequential"]
    assert record["stopped_at_blocks"] is None and record["taken"][0]["stop"] is True
    assert record["time_cap"] == {"planned_blocks": 12, "max_minutes": 1.0}
    assert record["looks"] == [4] and ctx.run["design"]["blocks"] == 4
    assert ctx.run["design"]["looks"] == []
    design = ctx.suite.effective_design                 # the judge's schedule from here on
    assert (design.blocks, design.looks, design.max_minutes) == (4, (), 1.0)
    assert record["levels"] == [round(sequential.nominal_levels((), 4, 0.05)[0], 6)] == [0.05]
    assert "1 min time cap: this look is the final one" in ctx.logged[-1]
    faster = _capped_ctx(tmp_path, 3.0)                 # 8 blocks would end at 56 s: go on
    assert bench_looks.take_look(faster, 4, _rest()) is False and "time_cap" not in faster.run[
        "sequential"]
    exactly = _capped_ctx(tmp_path, 3.25)       # 30 s spent + 8 x 3.75 s: ends at the cap
    assert bench_looks.past_cap(exactly, 4, _rest()) is False
    assert bench_looks.past_cap(_capped_ctx(tmp_path, 3.26), 4, _rest()) is True
    exactly.run.pop("timings")                  # nothing measured yet: nothing to extrapolate
    assert bench_looks.past_cap(exactly, 4, _rest()) is False


def test_a_machine_getting_busier_is_capped_at_its_recent_pace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """16 blocks measured, 8 of 0.5 s then 8 of 4 s: at the mean pace the 8 planned blocks to
    the next look would end at 54 s, at the last 8 blocks' pace at 68 s, past the 1 min cap."""
    monkeypatch.setattr(bench_looks, "judge",
                        lambda run_dir, at_blocks: _judgement("pass", "inconclusive"))
    ctx = _capped_ctx(tmp_path, 0.0, walls=[0.5] * 8 + [4.0] * 8)
    assert bench_looks.take_look(ctx, 4, _rest()) is True
    assert ctx.run["sequential"]["time_cap"]["planned_blocks"] == 12
