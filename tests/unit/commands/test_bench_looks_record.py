"""What bench's interim looks write and print: run.json's ``sequential`` record (the design's
levels at the suite's confidence, each look's level, its regressions and undecided checks, the
minutes a stop saved), the console line saying why a look stops or goes on, and a look judging
this run's own folder at its own block count (the real judge on a block run)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from unit.judge.block_runs import write_block_run

from servegate.commands import bench_looks
from servegate.config import Design
from servegate.judge import sequential
from servegate.judge.checks import Check
from servegate.plan.design import build_block_plan


def _ctx(run_dir: Path, run: dict[str, Any] | None = None, confidence: float = 0.95,
         design: Design | None = None) -> Any:
    suite = SimpleNamespace(effective_design=design or Design(starts=1, blocks=4, looks=(2, 3)),
                            judge=SimpleNamespace(confidence=confidence))
    logged: list[str] = []
    return SimpleNamespace(suite=suite, run=run if run is not None else {"points": []},
                           run_dir=run_dir, session=SimpleNamespace(save=lambda: None),
                           console=SimpleNamespace(log=logged.append), logged=logged)


def _judgement(*checks: tuple[str, str]) -> Any:
    """Checks as (kind, verdict), all primary and gated, named ``check <i>``."""
    built = [Check(kind, f"check {i}", "mean_ttft_ms", verdict, gate=True, primary=True)
             for i, (kind, verdict) in enumerate(checks)]
    return SimpleNamespace(checks=built, config=SimpleNamespace(confidence=0.99))


def test_the_record_holds_the_designs_levels_at_the_suites_confidence(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, confidence=0.9)
    record = bench_looks._record(ctx)
    levels = sequential.nominal_levels([2, 3], 4, 0.1)
    assert record["looks"] == [2, 3, 4] and record["unit"] == "blocks"
    assert record["levels"] == [round(x, 6) for x in levels]
    assert record["levels"][0] == pytest.approx(sequential.spent(0.5, 0.1), abs=1e-6)
    assert record["taken"] == [] and record["stopped_at_blocks"] is None


def test_the_runs_recorded_design_decides_the_looks_a_crossover_looks_over_starts(
        tmp_path: Path) -> None:
    """A one-start live pair records ``crossover`` in run.json's design: its looks are over
    the two starts, whatever the suite's block looks."""
    ctx = _ctx(tmp_path, run={"points": [], "design": {"crossover": True}})
    record = bench_looks._record(ctx)
    assert (record["looks"], record["unit"]) == ([1, 2], "starts")
    assert record["levels"] == [round(x, 6) for x in sequential.nominal_levels([1], 2, 0.05)]


@pytest.mark.parametrize(("checks", "line", "regressions", "undecided"), [
    ((("ab", "regression"), ("ab", "inconclusive"), ("ab", "regression")),
     "look after 2 of 4 blocks: stop (regression: check 0, check 2)",
     ["check 0", "check 2"], ["check 1"]),
    ((("ab", "pass"), ("ab", "improvement")),
     "look after 2 of 4 blocks: stop (every gated check decided)", [], []),
    ((("ab", "pass"), ("ab", "inconclusive"), ("ab", "error")),
     "look after 2 of 4 blocks: go on (2 check(s) undecided or short of the power to gate)",
     [], ["check 1", "check 2"]),
])
def test_a_look_records_and_prints_why_it_stops_or_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checks: tuple[tuple[str, str], ...],
        line: str, regressions: list[str], undecided: list[str]) -> None:
    ctx = _ctx(tmp_path)
    monkeypatch.setattr(bench_looks, "judge", lambda run_dir, at_blocks: _judgement(*checks))
    bench_looks.take_look(ctx, 2)
    [taken] = ctx.run["sequential"]["taken"]
    assert (taken["regressions"], taken["undecided"]) == (regressions, undecided)
    assert ctx.logged == [line]


@pytest.mark.parametrize(("checks", "stop"), [
    ((("ab", "pass"), ("integrity", "inconclusive")), True),
    ((("ab", "pass"), ("integrity", "error")), True),
    ((("ab", "inconclusive"), ("integrity", "regression")), False),
])
def test_integrity_checks_neither_stop_a_run_nor_hold_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, checks: tuple[tuple[str, str], ...],
        stop: bool) -> None:
    """The stop rule reads the gated comparisons only: an integrity check (exact fill
    effective, ...) is judged on the whole run at its end, not as a sequential decision."""
    ctx = _ctx(tmp_path)
    monkeypatch.setattr(bench_looks, "judge", lambda run_dir, at_blocks: _judgement(*checks))
    assert bench_looks.take_look(ctx, 2) is stop
    [taken] = ctx.run["sequential"]["taken"]
    assert "check 1" not in taken["regressions"] + taken["undecided"]


def test_a_look_judges_this_runs_folder_at_its_own_blocks(tmp_path: Path) -> None:
    """The real judge on a block run with looks at 2 and 3 of 4 blocks: the look after 2
    blocks is judged at the first look's level (not the final one's), on this run."""
    run_dir = write_block_run(tmp_path / "run", starts=1, blocks=4)
    run = json.loads((run_dir / "run.json").read_text())
    run["design"]["looks"] = [2, 3]
    (run_dir / "run.json").write_text(json.dumps(run))
    ctx = _ctx(run_dir, run=run)
    bench_looks.take_look(ctx, 2)
    record = ctx.run["sequential"]
    first = sequential.nominal_levels([2, 3], 4, 0.05)[0]
    assert record["taken"][0]["blocks"] == 2
    assert record["taken"][0]["level"] == round(first, 6) == record["levels"][0]


def _points() -> tuple[Any, ...]:
    slots = build_block_plan(("off", "on"), (2, 4), (2, 4), 1, 4, seed=1)
    return tuple(p for slot in slots for p in slot.points)


def test_a_stop_prints_and_records_the_measured_minutes_it_saved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real look (the judge's verdicts given) inside run_points: stopped after 3 of 4
    blocks, the last block's 4 points not run, at this run's mean block of 7 s."""
    ctx = _ctx(tmp_path)
    verdicts = {2: "inconclusive", 3: "pass"}
    monkeypatch.setattr(bench_looks, "judge",
                        lambda run_dir, at_blocks: _judgement(("ab", verdicts[at_blocks])))

    def measure(planned: Any) -> None:
        ctx.run["points"].append({"wall_s": 7.0})

    bench_looks.run_points(ctx, _points(), measure)
    record = ctx.run["sequential"]
    assert [t["blocks"] for t in record["taken"]] == [2, 3] and record["stopped_at_blocks"] == 3
    assert record["skipped_points"] == 4 and record["minutes_saved"] == 0.47   # 4 x 7 s
    assert ctx.logged[-1] == "stopped early: 4 planned block(s) not run, ~0.47 min saved"


def test_a_stop_before_any_measured_block_time_claims_no_minutes(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, run={"points": [{"mode": "off"}]})       # no wall_s recorded
    bench_looks.skipped(ctx, list(_points()[:3]))
    assert ctx.run["sequential"]["minutes_saved"] == 0.0
    assert ctx.logged == ["stopped early: 3 planned block(s) not run, ~0.0 min saved"]
