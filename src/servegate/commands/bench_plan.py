"""Plan selection for ``servegate bench``: the suite's design as server slots or live pairs, and
that design as run.json records it (block order, warm-up, live-pair layout)."""

from __future__ import annotations

import dataclasses
import os

from servegate.commands.bench_blocks import WARMUP_NOTE
from servegate.commands.bench_context import Context
from servegate.config import Suite
from servegate.plan.design import (
    HalvesRound,
    LivePair,
    PlannedPoint,
    ServerSlot,
    build_block_plan,
    build_halves_plan,
    build_live_pair_plan,
    half_of,
    halves_layout,
    live_pair_layout,
)
from servegate.serve.trees import SglangTree


def select_plan(suite: Suite, modes: list[str], trees: dict[str, SglangTree | None],
                accuracy_only: bool, runner_class: str = "cpu",
                gpus: int = 0) -> list[ServerSlot | LivePair | HalvesRound]:
    """The suite's design as server slots (accuracy-only runs: one start, no load points).
    Head vs base in an in-server design runs as live pairs where the runner holds two servers
    (:func:`live_pair_layout`), else one start per tree after the other; one tree in a
    ``[design] halves`` suite runs two starts at once where it holds two servers."""
    design = suite.effective_design
    arms = tuple(trees)
    starts = 1 if accuracy_only else design.starts
    if design.halves and arms == ("",) and not accuracy_only:
        halves, devices = halves_layout(suite, runner_class, gpus, os.cpu_count() or 1)
        if halves.live:
            return list(build_halves_plan(modes, suite.load.concurrency, suite.load.num_prompts,
                                          starts, design.blocks, suite.seed, devices))
    layout = (live_pair_layout(suite, runner_class, gpus) if arms == ("base", "head")
              else None)
    if layout is not None and layout.live:
        crossover = layout.crossover(starts, design.looks)
        pairs = build_live_pair_plan(modes, suite.load.concurrency, suite.load.num_prompts,
                                     2 if crossover else starts, design.blocks, suite.seed,
                                     gpus=layout.gpus, per_server=layout.per_server)
        if accuracy_only:
            pairs = [dataclasses.replace(pair, points=()) for pair in pairs]
        return list(pairs)
    slots = build_block_plan(modes, suite.load.concurrency, suite.load.num_prompts,
                             starts, design.blocks, suite.seed, arms=arms,
                             forced_blocks=design.forced_blocks)
    if accuracy_only:
        slots = [dataclasses.replace(slot, points=()) for slot in slots]
    return list(slots)


def order_label(point: PlannedPoint) -> str:
    """A block in run.json's design order: ``off@c2`` (``head:off@c2`` in a live pair)."""
    where = f"{point.mode}@c{point.concurrency}"
    return f"{point.arm}:{where}" if point.arm else where


def record_design(ctx: Context, modes: list[str],
                  slots: list[ServerSlot | LivePair | HalvesRound]) -> None:
    """run.json's ``design``: the suite's design, the modes, every start's block order, the
    warm-up and notes; head vs base in-server adds the live-pair layout (and logs its note), a
    halves suite its layout and, where two starts ran at once, each start's half and the
    halves' devices."""
    suite, detected, run = ctx.suite, ctx.detected, ctx.run
    design = suite.effective_design
    starts = [s for item in slots
              for s in (item.slots if isinstance(item, HalvesRound) else (item,))]
    run["design"] = {**design.record(), "modes": list(modes),
                     "order": [[order_label(p) for p in slot.points]
                               for slot in starts
                               if isinstance(slot, LivePair) or slot.in_server],
                     "warmup": WARMUP_NOTE if design.in_server else "",
                     "note": "; ".join(suite.notes)}
    if design.halves and set(ctx.trees) == {""}:
        layout, _ = halves_layout(suite, detected.runner_class, detected.gpu_count,
                                  os.cpu_count() or 1)
        rounds = [item for item in slots if isinstance(item, HalvesRound)]
        run["design"]["halves_note"] = layout.note
        if rounds:
            run["design"]["start_halves"] = [half_of(s.repeat) for s in starts]
            run["design"]["devices"] = [{s.label: list(d) for s, d in zip(
                r.slots, r.devices, strict=True)} for r in rounds]
        ctx.console.log(layout.note)
    if set(ctx.trees) == {"base", "head"} and design.in_server:
        layout = live_pair_layout(suite, detected.runner_class, detected.gpu_count)
        run["design"]["live_pair"] = layout.live
        run["design"]["pair_note"] = layout.note
        if layout.crossover(design.starts, design.looks):
            run["design"]["crossover"] = True
        run["design"]["devices"] = [
            {s.label: list(d) for s, d in zip(pair.slots, pair.devices, strict=True)}
            for pair in slots if isinstance(pair, LivePair) and pair.devices]
        ctx.console.log(layout.note)
