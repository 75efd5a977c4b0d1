"""The legacy executor of ``servegate bench``: a server start per mode and repeat (a suite with
``[suite].repeats`` and no in-server ``[design]``), exact fill set at launch. Alone in this
module so that retiring that design deletes it in one piece."""

from __future__ import annotations

from typing import Any

from rich.progress import Progress

from servegate.commands.bench_blocks import accuracy, measure_point, record
from servegate.commands.bench_context import Context
from servegate.commands.bench_servers import start_server
from servegate.plan import ServerSlot


def run_slot(ctx: Context, slot: ServerSlot, progress: Progress, task: Any,
             with_accuracy: bool) -> None:
    """One server start in the slot's mode: its points, then GSM8K in the first repeat."""
    log_rel = f"server/{slot.label}-r{slot.repeat}.log"
    progress.update(task, description=f"starting server {slot.label} (repeat {slot.repeat})")
    with start_server(ctx, slot, log_rel) as server:
        for planned in slot.points:
            progress.update(task, description=f"{planned.mode} c={planned.concurrency} "
                                              f"r{planned.repeat} ({planned.num_prompts} prompts)")
            record(ctx, planned, measure_point(ctx, server, planned, log_rel), progress, task)
        if with_accuracy and slot.repeat == 0 and ctx.suite.gsm8k:
            accuracy(ctx, server, slot.label)
