"""Interim looks of a sequential design inside ``servegate bench`` (``[design] looks``).

After block round ``k`` of the last start, when ``k`` is a look, the run is judged at that
look's family level (:mod:`servegate.judge.sequential`) and stops when its verdict cannot
change, or when the next look would end past ``[design] max_minutes`` (:func:`cap_here`).
run.json ``sequential`` records the looks (docs/judge.md, Sequential looks)."""

from __future__ import annotations

import dataclasses
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
    design = ctx.suite.effective_design
    look = sequential.look_at({**design.record(),
                               **(ctx.run.get("design") or {})}, alpha, None)
    assert look is not None                 # a look is only taken in a design with looks
    return ctx.run.setdefault("sequential", {     # type: ignore[typeddict-item]
        "looks": list(look.schedule), "unit": look.unit,
        "levels": [round(x, 6) for x in sequential.nominal_levels(
            look.schedule[:-1], look.of_blocks, alpha, design.spending_power)],
        "taken": [], "stopped_at_blocks": None})


def take_look(ctx: Context, blocks: int, rest: tuple[PlannedPoint, ...] = ()) -> bool:
    """Judge the run at the look after ``blocks`` blocks (a crossover: starts); True when it
    should stop there (``rest``: the blocks planned after it, for the time cap)."""
    record = _record(ctx)
    ctx.session.save()
    judgement = judge(ctx.run_dir, at_blocks=blocks)
    family = [c for c in judgement.checks if c.primary and c.kind != "integrity"]
    regressions = [c.name for c in family if c.gate and c.verdict == "regression"]
    undecided = [c.name for c in family if not c.gate or c.verdict in ("inconclusive", "error")]
    stop = any(c.gate for c in family) and (bool(regressions) or not undecided)
    capped = not stop and past_cap(ctx, blocks, rest)
    record["taken"].append({"blocks": blocks, "level": round(1.0 - judgement.config.confidence, 6),
                            "stop": stop or capped, "regressions": regressions,
                            "undecided": undecided})
    why = (f"regression: {', '.join(regressions)}" if regressions
           else "every gated check decided" if stop
           else f"{len(undecided)} check(s) undecided or short of the power to gate" + (
               f"; the next look would end past the {ctx.suite.effective_design.max_minutes:g}"
               " min time cap: this look is the final one" if capped else ""))
    ctx.console.log(f"look after {blocks} of {record['looks'][-1]} {record['unit']}: "
                    f"{'stop' if stop or capped else 'go on'} ({why})")
    if stop:
        record["stopped_at_blocks"] = blocks
    elif capped:
        cap_here(ctx, blocks)
    ctx.session.save()
    return stop or capped


def past_cap(ctx: Context, blocks: int, rest: tuple[PlannedPoint, ...]) -> bool:
    """Whether ``rest``'s blocks up to the next look, at this run's pace (its last 8 blocks'
    when slower), would end past ``[design] max_minutes`` of points."""
    design = ctx.suite.effective_design
    following = next((k for k in (*design.looks, design.blocks) if k > blocks), None)
    if design.max_minutes is None or following is None:
        return False
    timings = ctx.run.get("timings") or {}
    spent = sum(float(item["seconds"]) for kind in ("blocks", "switches")
                for item in timings.get(kind, []))      # type: ignore[attr-defined]
    walls = [float(item["seconds"]) for item in timings.get("blocks", [])]
    pace = max(spent / max(len(walls), 1), sum(walls[-8:]) / max(len(walls[-8:]), 1))
    return spent + pace * sum(p.block < following for p in rest) > 60.0 * design.max_minutes


def cap_here(ctx: Context, blocks: int) -> None:
    """The time cap makes the look after ``blocks`` the final one, spending the rest of alpha
    there (why that keeps the family's level: docs/judge.md, Blocks sized in time)."""
    design = ctx.suite.effective_design
    final = dataclasses.replace(design, blocks=blocks,
                                looks=tuple(k for k in design.looks if k < blocks))
    ctx.suite = dataclasses.replace(ctx.suite, design=final)
    ctx.run["design"].update(blocks=blocks, looks=list(final.looks))
    ctx.run["sequential"].update(looks=[*final.looks, blocks], time_cap={  # type: ignore[typeddict-item]
        "planned_blocks": design.blocks, "max_minutes": design.max_minutes},
        levels=[round(x, 6) for x in sequential.nominal_levels(
            final.looks, blocks, 1.0 - ctx.suite.judge.confidence, design.spending_power)])


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
        if blocks is not None and take_look(ctx, blocks, points[index + 1:]):
            skipped(ctx, list(points[index + 1:]))
            return
