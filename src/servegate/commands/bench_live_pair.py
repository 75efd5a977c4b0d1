"""The live-pair executor of ``servegate bench``: head vs base with both trees' servers alive
for one start, their blocks alternating, each server switching its modes in place, and the
other server's idleness checked over every block."""

from __future__ import annotations

import contextlib
from typing import Any

from rich.progress import Progress

from servegate.commands.bench_blocks import (
    accuracy_per_mode,
    batches_since,
    measure_block,
    record,
)
from servegate.commands.bench_context import BenchError, Context
from servegate.commands.bench_in_server import start_live
from servegate.commands.bench_looks import run_points, skipped, take_look
from servegate.commands.bench_profile import profile_modes
from servegate.plan.design import LivePair, PlannedPoint


def run_live_pair(ctx: Context, pair: LivePair, progress: Progress, task: Any,
                  with_accuracy: bool) -> None:
    """Head vs base with both trees' servers alive for one start: they load together, then
    the blocks alternate between them (same prompts per block pair), each server switching its
    modes in place; while a block runs on one server the other must stay idle (no prefill or
    decode batch in its log over the block), else the run stops with that named. A
    crossover's second start runs only when the look after the first leaves a gated check
    undecided."""
    crossover = pair.start > 0 and (ctx.run.get("design") or {}).get("crossover")
    if crossover and take_look(ctx, pair.start):
        skipped(ctx, list(pair.points))
        return
    progress.update(task, description=f"starting the live pair "
                                      f"{' + '.join(s.label for s in pair.slots)}")
    with contextlib.ExitStack() as stack:
        # both trees load at once (a 2-core CPU: ready after 84 s against 48 + 55 s in series,
        # 2026-12-03); their ports come from below the ephemeral range (serve/process.py
        # free_port), where neither loading server's own sockets can take the other's port
        live = {this.slot.arm: this for this in start_live(ctx, stack, pair.slots, pair.devices)}

        def measure(planned: PlannedPoint) -> None:
            others = [o for arm, o in live.items() if arm != planned.arm]
            before = {o.slot.arm: o.server.log_offset() for o in others}
            point = measure_block(ctx, live[planned.arm], planned, progress, task)
            point["idle_check"] = {o.slot.label: batches_since(o.server, before[o.slot.arm])
                                   for o in others}
            busy = {label: n for label, n in point["idle_check"].items() if n}
            if busy:
                raise BenchError(f"live pair: server(s) {busy} ran batches while block "
                                 f"{planned.arm} {planned.mode} s{planned.start} "
                                 f"b{planned.block} ran on the other (something else is "
                                 f"using them): the pair's blocks are not comparable")
            record(ctx, planned, point, progress, task)

        run_points(ctx, pair.points, measure)    # both trees stop together at a look
        if with_accuracy and pair.start == 0 and ctx.suite.gsm8k:
            for this in live.values():      # GSM8K per tree and mode, each in its own server
                accuracy_per_mode(ctx, this)
        for this in live.values():          # per tree, after everything measured; no points
            profile_modes(ctx, this, pair.start)

