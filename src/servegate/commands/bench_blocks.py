"""Block measurement for ``servegate bench``: one point (sglang's client against a live server,
then the log's alignment and exact-fill read-back), the in-place mode switch and warm-up of the
in-server design, recording a point, and GSM8K per mode."""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.progress import Progress

from servegate.accuracy.runner import run_gsm8k
from servegate.commands import bench_timings
from servegate.commands.bench_context import BenchError, Context
from servegate.core.results import Point, point_slot
from servegate.measure import logparse
from servegate.measure.client import ClientError, ClientPoint, client_argv, parse_client_jsonl
from servegate.measure.client_host import ClientHost
from servegate.measure.exactfill import check_block_effective, check_effective, device_double
from servegate.measure.interference import BlockMonitor
from servegate.plan.design import PlannedPoint, ServerSlot
from servegate.serve.modeswitch import ModeControl
from servegate.serve.process import Server

SWITCH_TIMEOUT_S = 120.0                 # every scheduler acknowledges a mode switch by then
WARMUP_SEED_OFFSET = 7_919               # a warm-up run's prompts differ from every block's
DYING_SERVER_S = 5.0                     # after a client failure: time for a killed server's exit
# Warm-up blocks after a switch: a GPU GEMM picked by M may be tuned or compiled at its first use
# (why the client's own warm-up is not enough: docs/serve.md, Modes inside one server).
WARMUP_NOTE = ("[design] warmup_blocks discarded client runs (distinct prompts, the measured "
               "shape) per mode at its first switch in each start absorb first-use kernel "
               "selection/JIT for the mode's prefill M; each block also starts with the "
               "client's own warm-up requests")


@dataclass
class LiveServer:
    """A server that switches its modes in place (an in-server start, or one arm of a live
    pair), with its mode control, client worker, log and the modes already warmed up."""

    slot: ServerSlot
    server: Server
    control: ModeControl
    host: ClientHost
    log_rel: str
    warmed: set[str] = dataclasses.field(default_factory=set)
    siblings: tuple[Server, ...] = ()       # a halves design's other half (busy at once)


def client_host(ctx: Context, slot: ServerSlot) -> ClientHost:
    """The client worker of one in-server start: imported once, it runs every block's client."""
    return ClientHost(ctx.python, worker_env(ctx.client_env(slot.arm)),
                      ctx.run_dir / "client" / f"{slot.label}.worker.log")


def worker_env(env: dict[str, str] | None) -> dict[str, str]:
    """The client worker imports servegate too: this checkout's package goes on its path
    (after an arm's sglang tree, which stays first)."""
    base = dict(os.environ if env is None else env)
    here = str(Path(__file__).resolve().parents[2])
    parts = [p for p in base.get("PYTHONPATH", "").split(os.pathsep) if p]
    if here not in parts:
        parts.append(here)
    return {**base, "PYTHONPATH": os.pathsep.join(parts)}


def client_point(ctx: Context, server: Server, planned: PlannedPoint, output_file: Path,
                 seed: int) -> ClientPoint:
    """The client's arguments for one run of the planned point's shape against ``server``."""
    load = ctx.suite.load
    return ClientPoint(base_url=server.base_url, model=ctx.model_dir, tokenizer=ctx.model_dir,
                       input_len=load.input_len,
                       output_len=load.output_len_at(planned.concurrency),
                       num_prompts=planned.num_prompts, concurrency=planned.concurrency,
                       seed=seed, warmup_requests=load.warmup_requests,
                       range_ratio=load.range_ratio, output_file=output_file)


def run_client(ctx: Context, host: ClientHost, server: Server, point: ClientPoint,
               log_path: Path) -> None:
    """One client run against ``server`` (sglang's own client and argv, imported once in the
    start's worker), watching the server; a client failure is blamed on the server when the
    server is dying (its socket can close before the launcher's exit is visible)."""
    try:
        host.run(client_argv(ctx.python, point)[3:], log_path, ctx.suite.load.point_timeout_s,
                 watch=server.check_alive)
    except ClientError:
        server.check_alive(DYING_SERVER_S)
        raise


def measure_point(ctx: Context, server: Server, planned: PlannedPoint, log_rel: str,
                  control: ModeControl | None, host: ClientHost,
                  siblings: tuple[Server, ...] = ()) -> Point:
    """One block: the client against ``server``; with ``control`` (in-server design) the
    exact-fill read-back is the mode switch's acknowledgements in this block's log slice.
    ``siblings`` (the other half, busy at once): its batches over the block (``other_half``)."""
    run_dir = ctx.run_dir
    label = f"{planned.arm}-{planned.mode}" if planned.arm else planned.mode
    name = f"{label}-c{planned.concurrency}-r{planned.repeat}"
    jsonl = run_dir / "client" / f"{name}.jsonl"
    client_log = run_dir / "client" / f"{name}.log"
    jsonl.unlink(missing_ok=True)       # the client appends; one record per file
    start = server.log_offset()         # after any switch: its acks precede the block
    monitor = BlockMonitor(server.proc.pid if server.proc else None,
                           tuple(s.proc.pid for s in siblings if s.proc))
    others = {s.log_path.stem: s.log_offset() for s in siblings}
    client = client_point(ctx, server, planned, jsonl, planned.seed)
    run_client(ctx, host, server, client, client_log)
    server.check_alive()
    server.wait_log_quiet()             # the scheduler's last lines of the block are in
    machine = monitor.finish()
    end = server.log_offset()
    metrics, requests = parse_client_jsonl(jsonl, expect_prompts=planned.num_prompts)
    measured = logparse.measured_text(server.log_path, start, end)
    alignment = logparse.alignment(logparse.parse_prefill_lines(measured),
                                   server.spec.chunk_size, server.spec.dp_attention_size)
    full_log = logparse.read_slice(server.log_path, 0, end)
    if control is None:
        effective = check_effective(planned.mode, ctx.detected.runner_class, full_log,
                                    alignment, ctx.gate_open.get(planned.arm))
    else:
        effective = check_block_effective(planned.mode, ctx.detected.runner_class,
                                          list(control.acks().values()), alignment,
                                          ctx.gate_open.get(planned.arm))
    point = Point(mode=planned.mode, concurrency=planned.concurrency,  # type: ignore[typeddict-item]
                  repeat=planned.repeat, order=planned.order, metrics=metrics,
                  requests=requests, alignment=alignment, exact_fill_effective=effective,
                  files={"client_jsonl": str(jsonl.relative_to(run_dir)),
                         "client_log": str(client_log.relative_to(run_dir)),
                         "server_log": log_rel, "server_log_bytes": f"{start}-{end}"})
    if planned.arm:
        point["arm"] = planned.arm  # type: ignore[typeddict-item]
    point["machine"] = machine
    point["wall_s"] = machine["wall_s"]
    if siblings:                        # the halves' interference, as a live pair records it
        point["other_half"] = {s.log_path.stem: batches_since(s, others[s.log_path.stem])
                               for s in siblings}
    if control is not None and planned.start is not None:
        point["start"], point["block"] = planned.start, planned.block
        point["mode_ack"] = {"seq": control.seq,
                             "gates": {str(pid): ack.gate for pid, ack in
                                       sorted(control.acks().items())}}
    double = device_double(ctx.detected.runner_class, full_log)
    if double:                          # emulated runner classes: the read-back, per server
        point["device_double"] = double
    return point


def switch(ctx: Context, server: Server, control: ModeControl, mode: str,
           arm: str = "") -> None:
    """Switch the idle server to ``mode``; every scheduler process acknowledges first."""
    if control.mode == mode:
        return
    server.check_alive()
    with bench_timings.timed(ctx.run, "switches", arm=arm, mode=mode):
        acks = control.switch(mode, timeout_s=SWITCH_TIMEOUT_S)
    ctx.console.log(f"mode {mode} (seq {control.seq}) acknowledged by pids {sorted(acks)}")


def measure_block(ctx: Context, this: LiveServer, planned: PlannedPoint, progress: Progress,
                  task: Any) -> Point:
    """One block in a server that switches its modes in place: the acknowledged switch, the
    mode's warm-up at its first switch in this start, then the measured point."""
    switch(ctx, this.server, this.control, planned.mode, planned.arm)
    if planned.mode not in this.warmed:
        this.warmed.add(planned.mode)
        warm_up(ctx, this.server, planned, this.host)
    arm = f"{planned.arm} " if planned.arm else ""
    progress.update(task, description=f"{arm}{planned.mode} c={planned.concurrency} "
                                      f"s{planned.start} b{planned.block}")
    return measure_point(ctx, this.server, planned, this.log_rel, this.control, this.host,
                         this.siblings)


def batches_since(server: Server, since: int) -> int:
    """Prefill and decode batches ``server`` ran since ``since`` (its log offset)."""
    server.check_alive()
    return logparse.batch_lines(logparse.read_slice(server.log_path, since))


def warm_up(ctx: Context, server: Server, planned: PlannedPoint, host: ClientHost,
            runs: range | None = None, tag: str = "w") -> tuple[float, Path] | None:
    """``[design] warmup_blocks`` discarded client runs in a mode at its first switch in a start,
    with the first block's shape and fresh prompts (they fill chunk-sized prefill batches; the
    client's own warm-up repeats one prompt, which the radix cache shares), so a GPU kernel
    picked by the batch's M is tuned before anything is measured; kept in client/ as warmup-*,
    never a point. ``runs`` (``tag`` in their names): other discarded runs; returns the last
    one's wall and client record (a block sized in time reads the machine's rate from them)."""
    suite = ctx.suite
    last = None
    for index in range(suite.effective_design.warmup_blocks) if runs is None else runs:
        label = f"{planned.arm}-{planned.mode}" if planned.arm else planned.mode
        name = f"warmup-{label}-c{planned.concurrency}-s{planned.start}-{tag}{index}"
        jsonl = ctx.run_dir / "client" / f"{name}.jsonl"
        jsonl.unlink(missing_ok=True)
        point = client_point(ctx, server, planned, jsonl,
                             seed=planned.seed + WARMUP_SEED_OFFSET + index)
        ctx.console.log(f"warm-up block {index + 1} in mode {planned.mode} (discarded)")
        began = time.monotonic()
        with bench_timings.timed(ctx.run, "warmups", arm=planned.arm, mode=planned.mode,
                                 start=planned.start, concurrency=planned.concurrency):
            run_client(ctx, host, server, point, ctx.run_dir / "client" / f"{name}.log")
        last = (time.monotonic() - began, jsonl)
    return last


def record(ctx: Context, planned: PlannedPoint, point: Point, progress: Progress,
           task: Any) -> None:
    """Add the measured point and its wall to run.json (rewritten at once), log it and advance
    the bar."""
    start, block = point_slot(point)
    bench_timings.add(ctx.run, "blocks", float(point.get("wall_s", 0.0)), arm=planned.arm,
                      mode=planned.mode, start=start, block=block,
                      concurrency=planned.concurrency)
    ctx.session.add_point(point)
    _log_point(ctx, planned, point)
    progress.advance(task)


def _log_point(ctx: Context, planned: PlannedPoint, point: Point) -> None:
    a = point["alignment"]
    where = (f"s{planned.start} b{planned.block}" if planned.start is not None
             else f"r{planned.repeat}")
    ctx.console.log(
        f"{planned.mode} c={planned.concurrency} {where}: mean TTFT "
        f"{point['metrics']['mean_ttft_ms']:.1f} ms, median TPOT "
        f"{point['metrics']['median_tpot_ms']:.2f} ms, aligned "
        f"{a['aligned_fraction']:.0%} of {a['saturated_batches']} saturated batches")


def accuracy(ctx: Context, server: Server, mode: str, arm: str = "") -> None:
    """GSM8K on this server in ``mode``, recorded as ``arm-mode`` (``head-off``) in a
    head-vs-base run."""
    assert ctx.suite.gsm8k is not None
    label = f"{arm}-{mode}" if arm else mode
    ctx.console.log(f"GSM8K ({label}): {ctx.suite.gsm8k_table}")
    began = time.monotonic()
    try:
        result = run_gsm8k(server.base_url, label, ctx.run_dir, ctx.suite.gsm8k)
    except Exception as err:
        raise BenchError(f"GSM8K ({label}) failed: {type(err).__name__}: {err}") from err
    questions = result.get("n", ctx.suite.gsm8k.questions)
    bench_timings.add(ctx.run, "gsm8k", time.monotonic() - began, arm=arm, mode=mode,
                      questions=questions)
    ctx.session.add_accuracy(label, result)  # type: ignore[arg-type]


def accuracy_per_mode(ctx: Context, this: LiveServer,
                      modes: tuple[str, ...] | None = None) -> None:
    """GSM8K in every mode of one server (or ``modes``: a halves design splits them between
    its two servers), switched in place: paired per question."""
    for mode in this.slot.modes if modes is None else modes:
        switch(ctx, this.server, this.control, mode, this.slot.arm)
        accuracy(ctx, this.server, mode, this.slot.arm)
