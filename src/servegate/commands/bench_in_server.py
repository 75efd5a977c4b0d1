"""The in-server executor of ``servegate bench``: one server start runs every mode, its blocks
in the plan's order, switched in place (``[design]``; head vs base one tree after the other
where a live pair does not fit). ``[design] halves``: two such starts at once, one on each half
of the runner, loaded together and measured together, each in its own thread. ``[design]
min_block_seconds``: the first start measures this machine's wave and sizes the blocks
(:func:`sized_points`)."""

from __future__ import annotations

import contextlib
import dataclasses
import math
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
    switch,
    warm_up,
)
from servegate.commands.bench_context import BenchError, Context
from servegate.commands.bench_looks import run_points
from servegate.commands.bench_profile import profile_modes
from servegate.commands.bench_servers import ServerRequest, start_servers
from servegate.core import runner_classes
from servegate.measure.client import parse_client_jsonl
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
    """One start's work in its server: blocks, GSM8K in ``gsm8k_modes``, profiled blocks;
    ``stop`` (the other half failed) ends it at the next block."""
    def measure(planned: PlannedPoint) -> None:
        if stop is not None and stop.is_set():
            raise BenchError(f"{this.slot.label}: stopped, the other half failed")
        record(ctx, planned, measure_block(ctx, this, planned, progress, task), progress, task)

    run_points(ctx, sized_points(ctx, this), measure)
    if gsm8k_modes:
        accuracy_per_mode(ctx, this, gsm8k_modes)
    profile_modes(ctx, this, this.slot.repeat)     # after everything measured; never a point


def sized_points(ctx: Context, this: LiveServer) -> tuple[PlannedPoint, ...]:
    """This start's blocks; under ``[design] min_block_seconds`` each runs as many waves (of
    ``[load].num_prompts``) as a block needs to last that long on this machine. The first start
    measures it per concurrency, in the mode it opens with: a discarded run pays the server's
    first use (2-4x a wave on CPU), the next one's client duration is the wave and the rest of
    its wall a block's overhead. run.json ``design``: ``waves`` per concurrency, ``sizing``."""
    design, points = ctx.suite.effective_design, this.slot.points
    if design.min_block_seconds is None or not points:
        return points
    record = ctx.run["design"]
    if "waves" not in record:
        first = points[0]
        switch(ctx, this.server, this.control, first.mode, first.arm)
        waves: dict[str, int] = {}
        sizing: dict[str, list[float]] = {"wave_seconds": [], "block_overhead_seconds": []}
        for conc in dict.fromkeys(p.concurrency for p in points):
            planned = next(p for p in points if (p.concurrency, p.mode) == (conc, first.mode))
            measured = warm_up(ctx, this.server, planned, this.host,
                               range(1 if waves else 2), "size")
            assert measured is not None
            wave = float(parse_client_jsonl(measured[1])[0]["duration"])
            overhead = max(measured[0] - wave, 0.0)
            waves[str(conc)] = max(1, math.ceil((design.min_block_seconds - overhead) / wave))
            sizing["wave_seconds"].append(round(wave, 2))
            sizing["block_overhead_seconds"].append(round(overhead, 2))
        record.update(waves=waves, sizing={**record.get("sizing", {}), **sizing,
                                           "measured_in": this.slot.label})
        ctx.console.log(f"blocks of >= {design.min_block_seconds:g} s: {waves} wave(s) a block "
                        f"per concurrency (a wave {sizing['wave_seconds']} s, overhead "
                        f"{sizing['block_overhead_seconds']} s)")
        ctx.session.save()
    return tuple(dataclasses.replace(p, num_prompts=p.num_prompts * int(
        record["waves"].get(str(p.concurrency), 1))) for p in points)


def _gsm8k_modes(ctx: Context, slot: ServerSlot, with_accuracy: bool,
                 halves: bool = False) -> tuple[str, ...]:
    """GSM8K in the first start (a halves design: in each of the first round's two, half the
    modes each, so neither half idles while the other answers)."""
    if not (with_accuracy and ctx.suite.gsm8k) or slot.repeat >= (2 if halves else 1):
        return ()
    return tuple(sorted(slot.modes))[half_of(slot.repeat)::2] if halves else slot.modes


def start_live(ctx: Context, stack: contextlib.ExitStack, slots: tuple[ServerSlot, ...],
               devices: tuple[tuple[int, ...], ...] = ()) -> list[LiveServer]:
    """Start ``slots``' servers at once (slot i on ``devices[i]``: loads overlap, no devices
    idle through loads in series), each with its mode control and client worker (importing
    while the servers load), every scheduler registered; ``stack`` stops them all."""
    cls = runner_classes.get(ctx.detected.runner_class)
    arch = "cpu" if cls.arch == "cpu" or cls.emulated else cls.arch
    schedulers = expected_schedulers(list(ctx.suite.server_for(cls.name).args))
    requests, hosts = [], []
    for index, slot in enumerate(slots):
        hosts.append(stack.enter_context(client_host(ctx, slot)))
        hosts[-1].launch()
        requests.append(ServerRequest(
            slot, f"server/{slot.label}.log",
            ModeControl(ctx.run_dir / "server" / f"{slot.label}.mode.json"),
            device_env(arch, devices[index] if devices else ())))
    servers = [stack.enter_context(server) for server in start_servers(ctx, requests)]
    live = []
    for request, server, host in zip(requests, servers, hosts, strict=True):
        assert request.control is not None
        request.control.register(schedulers, timeout_s=SWITCH_TIMEOUT_S)
        live.append(LiveServer(request.slot, server, request.control, host, request.log_rel))
    return live


def run_in_server(ctx: Context, slot: ServerSlot, progress: Progress, task: Any,
                  with_accuracy: bool) -> None:
    """One server start running every mode: blocks in the plan's order, switched in place."""
    progress.update(task, description=f"starting server {slot.label} (modes "
                                      f"{', '.join(slot.modes)})")
    with contextlib.ExitStack() as stack:
        [this] = start_live(ctx, stack, (slot,))
        _serve(ctx, this, progress, task, _gsm8k_modes(ctx, slot, with_accuracy))


def run_halves(ctx: Context, rnd: HalvesRound, progress: Progress, task: Any,
               with_accuracy: bool) -> None:
    """A round of a halves design: two starts' servers load together on their halves, then
    each runs its own start in its own thread, both busy at once (each block records the other
    half's batches over it); the first failure stops the other half and is raised."""
    progress.update(task, description=f"starting {' + '.join(s.label for s in rnd.slots)} on "
                                      f"the runner's halves")
    stop = threading.Event()
    pool = ThreadPoolExecutor(len(rnd.slots), thread_name_prefix="half")
    try:
        with contextlib.ExitStack() as stack:
            live = start_live(ctx, stack, rnd.slots, rnd.devices)
            for this in live:
                this.siblings = tuple(o.server for o in live if o is not this)
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
