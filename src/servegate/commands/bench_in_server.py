"""The in-server executor of ``servegate bench``: one server start runs every mode, its blocks
in the plan's order, switched in place (``[design]``; head vs base one tree after the other
where a live pair does not fit). ``[design] halves``: two such starts at once, one on each half
of the runner, loaded together and measured together, each in its own thread."""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
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
from servegate.commands.bench_context import BenchError, Context
from servegate.commands.bench_looks import run_points
from servegate.commands.bench_profile import profile_modes
from servegate.commands.bench_servers import ServerRequest, start_server, start_servers
from servegate.core import runner_classes
from servegate.plan.design import (
    HalvesRound,
    PlannedPoint,
    ServerSlot,
    device_env,
    expected_schedulers,
    half_of,
)
from servegate.serve.modeswitch import ModeControl


def _serve(ctx: Context, this: LiveServer, progress: Progress, task: Any,
           gsm8k_modes: tuple[str, ...], stop: threading.Event | None = None) -> None:
    """One start's work in its server: the blocks in the plan's order, GSM8K in
    ``gsm8k_modes``, then the profiled blocks; ``stop`` (the other half failed) ends it at the
    next block."""
    def measure(planned: PlannedPoint) -> None:
        if stop is not None and stop.is_set():
            raise BenchError(f"{this.slot.label}: stopped, the other half failed")
        record(ctx, planned, measure_block(ctx, this, planned, progress, task), progress, task)

    run_points(ctx, this.slot.points, measure)
    if gsm8k_modes:
        accuracy_per_mode(ctx, this, gsm8k_modes)
    profile_modes(ctx, this, this.slot.repeat)     # after everything measured; never a point


def _gsm8k_modes(ctx: Context, slot: ServerSlot, with_accuracy: bool,
                 halves: bool = False) -> tuple[str, ...]:
    """GSM8K in the first start (a halves design: in each of the first round's two, half the
    modes each, so neither half idles while the other answers)."""
    if not (with_accuracy and ctx.suite.gsm8k) or slot.repeat >= (2 if halves else 1):
        return ()
    modes = tuple(sorted(slot.modes))
    return modes[half_of(slot.repeat)::2] if halves else slot.modes


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
        _serve(ctx, LiveServer(slot, server, control, host, log_rel), progress, task,
               _gsm8k_modes(ctx, slot, with_accuracy))


def run_halves(ctx: Context, rnd: HalvesRound, progress: Progress, task: Any,
               with_accuracy: bool) -> None:
    """A round of a halves design: its two starts' servers load together on their halves'
    devices, then each runs its own start (every mode, switched in place) in its own thread,
    both busy at once; each block records the other half's batches over it (``other_half``).
    The first failure stops the other half at its next block and is raised."""
    runner_profile = ctx.suite.server_for(ctx.detected.runner_class)
    cls = runner_classes.get(ctx.detected.runner_class)
    arch = "cpu" if cls.arch == "cpu" or cls.emulated else cls.arch
    progress.update(task, description=f"starting {' + '.join(s.label for s in rnd.slots)} on "
                                      f"the runner's halves")
    stop = threading.Event()
    pool = ThreadPoolExecutor(len(rnd.slots), thread_name_prefix="half")
    try:
        with contextlib.ExitStack() as stack:
            requests, hosts = [], []
            for half, slot in enumerate(rnd.slots):
                control = ModeControl(ctx.run_dir / "server" / f"{slot.label}.mode.json")
                hosts.append(stack.enter_context(client_host(ctx, slot)))
                hosts[-1].launch()          # the clients import while the servers load
                devices = rnd.devices[half] if rnd.devices else ()
                requests.append(ServerRequest(slot, f"server/{slot.label}.log", control,
                                              device_env(arch, devices)))
            servers = [stack.enter_context(server) for server in start_servers(ctx, requests)]
            live = []
            for request, server, host in zip(requests, servers, hosts, strict=True):
                assert request.control is not None
                request.control.register(expected_schedulers(list(runner_profile.args)),
                                         timeout_s=SWITCH_TIMEOUT_S)
                live.append(LiveServer(request.slot, server, request.control, host,
                                       request.log_rel,
                                       siblings=tuple(s for s in servers if s is not server)))
            futures = [pool.submit(_serve, ctx, this, progress, task,
                                   _gsm8k_modes(ctx, this.slot, with_accuracy, halves=True),
                                   stop) for this in live]
            try:
                for future in as_completed(futures):
                    future.result()         # the first failure is the run's
            finally:
                stop.set()                  # then the servers stop, ending the other half
    finally:
        pool.shutdown(wait=True)
