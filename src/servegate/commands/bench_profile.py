"""The profiled blocks of ``servegate bench --profile`` (or a suite's ``[profile]``): after a
server start's measured blocks (and its GSM8K), one more client run per mode under sglang's own
profiler for a bounded number of forward steps. They are never points: nothing they measure
enters the timing evidence (run.json ``points``, ``timings.blocks``); their reduced traces go to
run.json ``profile`` (``servegate.attribution.record``) and their wall to ``timings.profiles``.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from servegate.attribution.record import block_record, label, table
from servegate.attribution.trace import TraceError, reduce_trace
from servegate.commands import bench_timings
from servegate.commands.bench_blocks import LiveServer, client_point, run_client, switch
from servegate.commands.bench_context import BenchError, Context
from servegate.core import runner_classes
from servegate.measure.interference import BlockMonitor, contention_pct, is_busy
from servegate.plan.design import PlannedPoint
from servegate.serve import profiler

PROFILE_DIR = "profile"
RAW_DIR = "profile/raw"
# A busy CPU block is run again this many times (a CPU trace's op time is wall time on shared
# cores; a GPU trace is never re-run): docs/serve.md, Profiled blocks.
CPU_BUSY_RETRIES = 1


def _record(ctx: Context) -> dict[str, Any]:
    settings = ctx.profile
    load = ctx.suite.load
    concurrency = max(load.concurrency)
    chunk = ctx.suite.server_for(ctx.detected.runner_class).chunked_prefill_size
    arch = runner_classes.get(ctx.detected.runner_class).arch
    return ctx.run.setdefault("profile", {  # type: ignore[typeddict-item]
        "concurrency": concurrency,
        "num_steps": settings.num_steps(concurrency, load.input_len, chunk),
        "activities": list(profiler.activities_for(arch)),
        "floor": settings.floor, "block_cv": settings.block_cv,
        "keep_traces": settings.keep_traces,
        "blocks": [], "table": {}})


def _shape(this: LiveServer, mode: str, concurrency: int) -> PlannedPoint:
    """The profiled block's client run: one wave at the claim concurrency with the prompts of
    this start's first block round (every mode profiles the same prompts)."""
    first = next((p for p in this.slot.points if p.concurrency == concurrency), None)
    if first is None:
        first = this.slot.points[0]
    return dataclasses.replace(first, mode=mode, concurrency=concurrency,
                               num_prompts=concurrency, arm=this.slot.arm)


def profile_modes(ctx: Context, this: LiveServer, start: int) -> None:
    """One profiled block per mode of this server (switched in place like a measured block).
    A profile sglang refuses or a trace that does not reduce is recorded in ``profile.errors``
    and the run goes on: the measured evidence does not depend on it (a dead server still
    stops the run)."""
    if not ctx.profile.enabled or not this.slot.points:
        return
    record = _record(ctx)
    for mode in this.slot.modes:
        try:
            busy: list[dict[str, Any]] = []
            while True:
                block = _profile_one(ctx, this, start, mode, record, attempt=len(busy))
                if not (block["device"] == "cpu" and is_busy(block["machine"])
                        and len(busy) < CPU_BUSY_RETRIES):
                    break
                busy.append(block["machine"])
                ctx.console.log(f"profiled block {mode} s{start} ran on a busy machine "
                                f"({contention_pct(block['machine']):.0f} % of the CPU was "
                                f"others'): run again")
            if busy:
                block["busy_runs"] = busy       # the discarded busy runs' interference
            record["blocks"].append(block)
            record["table"] = table(record["blocks"])
            ctx.session.save()
        except (profiler.ProfileError, BenchError) as err:
            record.setdefault("errors", []).append(
                {"arm": this.slot.arm, "mode": mode, "start": start, "error": str(err)})
            ctx.session.save()
            ctx.console.log(f"[bold red]profiled block {mode} s{start} failed: {err}")
    raw = ctx.run_dir / RAW_DIR
    if raw.is_dir() and not any(raw.iterdir()):
        raw.rmdir()


def _profile_one(ctx: Context, this: LiveServer, start: int, mode: str,
                 record: dict[str, Any], attempt: int = 0) -> dict[str, Any]:
    """One profiled block: switch, start the profiler, run the wave, reduce its trace; returns
    its record (the caller keeps it or runs it again: ``attempt`` names the files apart)."""
    switch(ctx, this.server, this.control, mode, this.slot.arm)
    planned = _shape(this, mode, int(record["concurrency"]))
    name = f"{label(this.slot.arm, mode)}-s{start}" + (f"-again{attempt}" if attempt else "")
    request = profiler.ProfileRequest(ctx.run_dir / RAW_DIR, name, int(record["num_steps"]),
                                      tuple(record["activities"]))
    jsonl = ctx.run_dir / "client" / f"profile-{name}.jsonl"
    jsonl.unlink(missing_ok=True)
    monitor = BlockMonitor(this.server.proc.pid if this.server.proc else None)
    ctx.console.log(f"profiled block {name}: {request.num_steps} forward steps under "
                    f"sglang's profiler ({', '.join(request.activities)}), not a point")
    began = time.monotonic()
    profiler.start(this.server.base_url, request)
    run_client(ctx, this.host, this.server,
               client_point(ctx, this.server, planned, jsonl, planned.seed),
               ctx.run_dir / "client" / f"profile-{name}.log")
    files = profiler.finish(this.server.base_url, request, this.server.check_alive)
    seconds = time.monotonic() - began
    machine = monitor.finish()
    try:
        reduced = reduce_trace(files[0])
    except TraceError as err:
        raise BenchError(f"profiled block {name}: {err}") from err
    kept = str(files[0].relative_to(ctx.run_dir)) if ctx.profile.keep_traces else None
    if not ctx.profile.keep_traces:
        for path in files:
            path.unlink(missing_ok=True)
    block = block_record(reduced, arm=this.slot.arm, mode=mode, start=start,
                         seconds=seconds, trace=kept)
    block["machine"] = machine
    bench_timings.add(ctx.run, "profiles", seconds, arm=this.slot.arm, mode=mode,
                      start=start)
    ctx.console.log(f"profiled block {name}: {len(reduced.forwards)} forwards reduced "
                    f"in {seconds:.0f} s")
    return block
