"""The in-server executor of ``servegate bench``: one server start runs every mode, its blocks
in the plan's order, switched in place (``[design]``; head vs base one tree after the other
where a live pair does not fit)."""

from __future__ import annotations

from typing import Any

from rich.progress import Progress

from servegate.commands.bench_blocks import (
    SWITCH_TIMEOUT_S,
    LiveServer,
    accuracy_per_mode,
    client_host,
    measure_block,
    record,
)
from servegate.commands.bench_context import Context
from servegate.commands.bench_looks import run_points
from servegate.commands.bench_profile import profile_modes
from servegate.commands.bench_servers import start_server
from servegate.plan.design import ServerSlot, expected_schedulers
from servegate.serve.modeswitch import ModeControl


def run_in_server(ctx: Context, slot: ServerSlot, progress: Progress, task: Any,
                  with_accuracy: bool) -> None:
    """One server start running every mode: blocks in the plan's order, switched in place."""
    log_rel = f"server/{slot.label}.log"
    control = ModeControl(ctx.run_dir / "server" / f"{slot.label}.mode.json")
    progress.update(task, description=f"starting server {slot.label} (modes "
                                      f"{', '.join(slot.modes)})")
    runner_profile = ctx.suite.server_for(ctx.detected.runner_class)
    host = client_host(ctx, slot)
    host.launch()                       # the client imports while the server loads
    with host, start_server(ctx, slot, log_rel, control) as server:
        control.register(expected_schedulers(list(runner_profile.args)),
                         timeout_s=SWITCH_TIMEOUT_S)
        this = LiveServer(slot, server, control, host, log_rel)
        run_points(ctx, slot.points, lambda planned: record(
            ctx, planned, measure_block(ctx, this, planned, progress, task), progress, task))
        if with_accuracy and slot.repeat == 0 and ctx.suite.gsm8k:
            accuracy_per_mode(ctx, this)
        profile_modes(ctx, this, slot.repeat)     # after everything measured; never a point
