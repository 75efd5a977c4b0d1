"""Interim looks of a sequential design inside ``servegate bench`` (``[design] looks``).

After block round ``k`` of the last server start, when ``k`` is a look, the run so far is judged
at that look's family level (:mod:`servegate.judge.sequential`); the run stops there when its
verdict cannot change (a gated regression, or every gated check decided). Head vs base stops
both trees together (their blocks are one interleaved list). run.json's ``sequential`` records
every look taken, where the run stopped and the measured minutes it saved.
"""

from __future__ import annotations

from typing import Any

from servegate.commands import bench_timings
from servegate.commands.bench_context import Context
from servegate.judge import sequential
from servegate.judge.evaluate import judge
from servegate.plan.design import PlannedPoint


def look_due(ctx: Context, planned: PlannedPoint, following: PlannedPoint | None) -> int | None:
    """The block count ``k`` when ``planned`` ends block round ``k`` of the last start and
    ``k`` is one of the design's looks (the final look is the run's end, not taken here)."""
    design = ctx.suite.effective_design
    if not design.looks or planned.start != design.starts - 1:
        return None
    if following is not None and following.block == planned.block:
        return None                         # the round is not finished
    blocks = planned.block + 1
    return blocks if blocks in design.looks else None


def _record(ctx: Context) -> dict[str, Any]:
    alpha = 1.0 - ctx.suite.judge.confidence
    look = sequential.look_at({**ctx.suite.effective_design.record(),
                               **(ctx.run.get("design") or {})}, alpha, None)
    assert look is not None                 # a look is only taken in a design with looks
    return ctx.run.setdefault("sequential", {     # type: ignore[typeddict-item]
        "looks": list(look.schedule), "unit": look.unit,
        "levels": [round(x, 6) for x in sequential.nominal_levels(
            look.schedule[:-1], look.of_blocks, alpha)],
        "taken": [], "stopped_at_blocks": None})


def take_look(ctx: Context, blocks: int) -> bool:
    """Judge the run at the look after ``blocks`` blocks (a crossover: starts); True when it
    should stop there."""
    record = _record(ctx)
    ctx.session.save()
    judgement = judge(ctx.run_dir, at_blocks=blocks)
    gated = [c for c in judgement.checks if c.primary and c.gate and c.kind != "integrity"]
    regressions = [c.name for c in gated if c.verdict == "regression"]
    undecided = [c.name for c in gated if c.verdict in ("inconclusive", "error")]
    stop = bool(gated) and (bool(regressions) or not undecided)
    record["taken"].append({"blocks": blocks, "level": round(1.0 - judgement.config.confidence, 6),
                            "stop": stop, "regressions": regressions, "undecided": undecided})
    why = (f"regression: {', '.join(regressions)}" if regressions
           else "every gated check decided" if stop
           else f"{len(undecided)} gated check(s) undecided")
    ctx.console.log(f"look after {blocks} of {record['looks'][-1]} {record['unit']}: "
                    f"{'stop' if stop else 'go on'} ({why})")
    if stop:
        record["stopped_at_blocks"] = blocks
    ctx.session.save()
    return stop


def skipped(ctx: Context, rest: list[PlannedPoint]) -> None:
    """Record the blocks a stop saved and their measured cost (this run's mean block)."""
    record = _record(ctx)
    mean = bench_timings.mean_block_wall(ctx.run) or 0.0
    record["skipped_points"] = len(rest)
    record["minutes_saved"] = round(len(rest) * mean / 60.0, 2)
    ctx.console.log(f"stopped early: {len(rest)} planned block(s) not run, ~"
                    f"{record['minutes_saved']} min saved")
    ctx.session.save()


def run_points(ctx: Context, points: tuple[PlannedPoint, ...], measure: Any) -> None:
    """Measure ``points`` in order (``measure(planned)`` records one), taking the design's
    looks on the way and stopping at the first that decides the run."""
    for index, planned in enumerate(points):
        measure(planned)
        following = points[index + 1] if index + 1 < len(points) else None
        blocks = look_due(ctx, planned, following)
        if blocks is not None and take_look(ctx, blocks):
            skipped(ctx, list(points[index + 1:]))
            return
