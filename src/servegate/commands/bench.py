"""``servegate bench``: serve a suite's model per mode and measure it with sglang's own client.

config -> plan -> serve -> measure -> accuracy -> judge + report (``servegate.commands.compare``).
The run folder, run.json and summary.md belong to :class:`servegate.commands.session.RunSession`.
One run folder per invocation (``results/<suite>-<runner>-<UTC stamp>/``); run.json is rewritten
atomically after every point and says ``complete: true`` only when every planned point finished.
The last line printed is the run folder's path. Exit 2 on infrastructure or input errors.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from servegate.accuracy.runner import run_gsm8k
from servegate.commands.compare import compare_run
from servegate.commands.session import RunSession
from servegate.config import ConfigError, Suite, load_suite, suite_path
from servegate.core import runner_classes
from servegate.core.errors import EXIT_INFRA, EXIT_OK, EXIT_SIGINT, EXIT_SIGTERM, ServegateError
from servegate.core.results import MODES, Point, Run
from servegate.history.cli import ENV_STORE as HISTORY_ENV
from servegate.history.store import HistoryError, add_run
from servegate.judge.baselines import baseline_path, run_identity
from servegate.measure import logparse
from servegate.measure.client import ClientError, ClientPoint, client_argv, parse_client_jsonl, run_client
from servegate.measure.client_host import ClientHost
from servegate.measure.exactfill import check_block_effective, check_effective, device_double
from servegate.measure.interference import BlockMonitor
from servegate.plan import (
    LivePair,
    PlannedPoint,
    ServerSlot,
    build_block_plan,
    build_live_pair_plan,
    build_plan,
    device_env,
    expected_schedulers,
    live_pair_layout,
    total_points,
)
from servegate.serve.detect import Detected, RunnerError, detect, fingerprint
from servegate.serve.launch import build_launch
from servegate.serve.modelprep import ensure_gguf_model
from servegate.serve.modeswitch import ModeControl
from servegate.serve.process import (
    PortInUse,
    Server,
    Terminated,
    free_port,
    terminate_on_sigterm,
)
from servegate.serve.support import UnsupportedSglang, locate_sglang, require_exact_fill
from servegate.serve.trees import SglangTree, TreeError, resolve_tree

INJECT_PREFIX = "SERVEGATE_INJECT_"     # the hook's controlled-slowdown variables
INJECT_ARMS = "SERVEGATE_INJECT_ARMS"   # head vs base: the arms whose servers get them
PORT_ATTEMPTS = 3                        # fresh ports to try when the chosen one is taken
SWITCH_TIMEOUT_S = 120.0                 # every scheduler acknowledges a mode switch by then
# Warm-up after a switch: a GPU GEMM picked by M (16384 with exact fill, 16280-16350 without)
# may be tuned or compiled at its first use. The client's own warm-up requests are copies of
# one prompt, which the radix cache shares, so they need not form a chunk-sized batch; GPU
# suites therefore set [design] warmup_blocks: discarded client runs with distinct prompts in
# each mode at its first switch in a start (the measured blocks' shape). CPU kernels do not
# depend on M this way: the cpu suite runs none.
WARMUP_NOTE = ("[design] warmup_blocks discarded client runs (distinct prompts, the measured "
               "shape) per mode at its first switch in each start absorb first-use kernel "
               "selection/JIT for the mode's prefill M; each block also starts with the "
               "client's own warm-up requests")


class BenchError(ServegateError, RuntimeError):
    """A failure in a stage bench calls (e.g. GSM8K), reported as an infrastructure error."""


# Recorded in run.json as the run's cause, exit 2 (every deliberate error is a ServegateError).
INFRA_ERRORS = (ServegateError, OSError)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="servegate bench", description=__doc__.splitlines()[0])
    parser.add_argument("--suite", help="suite name (suites/<name>.toml) or path; default: "
                                        "cpu without a GPU, premerge with one")
    parser.add_argument("--runner", help="override runner detection (a registered class: "
                                         f"{', '.join(runner_classes.names())})")
    parser.add_argument("--modes", help="comma-separated subset of the suite's modes")
    parser.add_argument("--results-dir", type=Path, default=Path("results"))
    parser.add_argument("--models-dir", type=Path, default=None,
                        help="where the suite's model profile lives (default: models/)")
    parser.add_argument("--skip-accuracy", action="store_true",
                        help="do not run the suite's [gsm8k] step")
    parser.add_argument("--accuracy-only", action="store_true",
                        help="run only the suite's [gsm8k] step per mode (no load points)")
    parser.add_argument("--no-compare", action="store_true",
                        help="do not judge against a stored baseline at the end")
    parser.add_argument("--sglang-src", type=Path, default=None, metavar="PATH",
                        help="the sglang under test: a checkout or an unpacked package, first "
                             "on the import path of every sglang process (nothing installed)")
    parser.add_argument("--base", type=Path, default=None, metavar="PATH",
                        help="head vs base: the base sglang tree (with --head)")
    parser.add_argument("--head", type=Path, default=None, metavar="PATH",
                        help="head vs base: the head sglang tree (with --base)")
    args = parser.parse_args(argv)
    if (args.base is None) != (args.head is None):
        parser.error("--base and --head go together")
    if args.base is not None and args.sglang_src is not None:
        parser.error("--sglang-src is for one tree; head vs base takes --base and --head")
    return args


def _trees(args: argparse.Namespace) -> dict[str, SglangTree | None]:
    """Arm -> the sglang tree its servers import ("" with no tree: the environment's sglang)."""
    if args.base is not None:
        return {"base": resolve_tree(args.base, "--base"), "head": resolve_tree(args.head, "--head")}
    return {"": resolve_tree(args.sglang_src) if args.sglang_src is not None else None}


@dataclass
class Context:
    suite: Suite
    detected: Detected
    session: RunSession
    python: str
    model_dir: str
    console: Console
    trees: dict[str, SglangTree | None] = dataclasses.field(default_factory=lambda: {"": None})
    start_seconds: list[float] = dataclasses.field(default_factory=list)

    def client_env(self, arm: str) -> dict[str, str] | None:
        """The client imports sglang too: the arm's tree goes first on its import path."""
        tree = self.trees.get(arm)
        return None if tree is None else {**os.environ, "PYTHONPATH": tree.pythonpath()}

    @property
    def run_dir(self) -> Path:
        return self.session.run_dir

    @property
    def run(self) -> Run:
        return self.session.run


@contextlib.contextmanager
def _progress(console: Console, total: int) -> Iterator[tuple[Progress, Any]]:
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                        TimeRemainingColumn(), console=console, transient=False)
    with progress:
        yield progress, progress.add_task("points", total=total)


def _measure_point(ctx: Context, server: Server, planned: PlannedPoint, log_rel: str,
                   control: ModeControl | None = None, host: ClientHost | None = None) -> Point:
    """One block: the client against ``server``; with ``control`` (in-server design) the
    exact-fill read-back is the mode switch's acknowledgements in this block's log slice."""
    suite, run_dir = ctx.suite, ctx.run_dir
    label = f"{planned.arm}-{planned.mode}" if planned.arm else planned.mode
    name = f"{label}-c{planned.concurrency}-r{planned.repeat}"
    jsonl = run_dir / "client" / f"{name}.jsonl"
    client_log = run_dir / "client" / f"{name}.log"
    jsonl.unlink(missing_ok=True)       # the client appends; one record per file
    start = server.log_offset()         # after any switch: its acks precede the block
    monitor = BlockMonitor(server.proc.pid if server.proc else None)
    point = ClientPoint(base_url=server.base_url, model=ctx.model_dir, tokenizer=ctx.model_dir,
                        input_len=suite.load.input_len, output_len=suite.load.output_len,
                        num_prompts=planned.num_prompts, concurrency=planned.concurrency,
                        seed=planned.seed, warmup_requests=suite.load.warmup_requests,
                        range_ratio=suite.load.range_ratio, output_file=jsonl)
    try:
        argv = client_argv(ctx.python, point)
        if host is None:
            run_client(argv, client_log, suite.load.point_timeout_s,
                       env=ctx.client_env(planned.arm), watch=server.check_alive)
        else:           # the same client and argv, imported once for all blocks of a start
            host.run(argv[3:], client_log, suite.load.point_timeout_s, watch=server.check_alive)
    except ClientError:
        server.check_alive()            # a dead server is the cause, not the client's failure
        raise
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
                                    alignment)
    else:
        effective = check_block_effective(planned.mode, ctx.detected.runner_class,
                                          list(control.acks().values()), alignment)
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
    if control is not None and planned.start is not None:
        point["start"], point["block"] = planned.start, planned.block
        point["mode_ack"] = {"seq": control.seq,
                             "gates": {str(pid): ack.gate for pid, ack in
                                       sorted(control.acks().items())}}
        point["files"]["server_log_bytes"] = f"{start}-{end}"
    double = device_double(ctx.detected.runner_class, full_log)
    if double:                          # emulated runner classes: the read-back, per server
        point["device_double"] = double
    return point


def _accuracy(ctx: Context, server: Server, mode: str) -> None:
    """GSM8K on this server; ``mode`` is the slot's label (``head-off`` in head-vs-base runs)."""
    assert ctx.suite.gsm8k is not None
    ctx.console.log(f"GSM8K ({mode}): {ctx.suite.gsm8k_table}")
    try:
        result = run_gsm8k(server.base_url, mode, ctx.run_dir, ctx.suite.gsm8k)
    except Exception as err:
        raise BenchError(f"GSM8K ({mode}) failed: {type(err).__name__}: {err}") from err
    ctx.session.add_accuracy(mode, result)  # type: ignore[arg-type]


def server_base_env(arm: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a server inherits: ``SERVEGATE_INJECT_ARMS`` (comma-separated arms)
    scopes the injected slowdowns (``SERVEGATE_INJECT_*``) to those trees' servers."""
    env = dict(os.environ if environ is None else environ)
    scope = {a.strip() for a in env.get(INJECT_ARMS, "").split(",") if a.strip()}
    if scope and arm not in scope:
        env = {k: v for k, v in env.items() if not k.startswith(INJECT_PREFIX)}
    return env


@dataclass(frozen=True)
class ServerRequest:
    """One server to start: its slot, log, mode control (in-server) and device variables."""

    slot: ServerSlot
    log_rel: str
    control: ModeControl | None = None
    devices: dict[str, str] | None = None


def _start_server(ctx: Context, slot: ServerSlot, log_rel: str,
                  control: ModeControl | None = None) -> Server:
    """Start and wait for the slot's server; a taken port is retried on a fresh one.

    With ``control`` (in-server design) the server launches with exact fill off in its
    environment and the hook's mode switch in charge (the control file names the first mode)."""
    return _start_servers(ctx, [ServerRequest(slot, log_rel, control)])[0]


def _launch(ctx: Context, request: ServerRequest) -> Server:
    slot, control = request.slot, request.control
    runner_profile = ctx.suite.server_for(ctx.detected.runner_class)
    extra = {} if control is None else {**control.env(), "SERVEGATE_REPORT_EXACT_FILL": ""}
    extra.update(request.devices or {})
    tree = ctx.trees.get(slot.arm)
    spec = build_launch(
        python=ctx.python, model_path=ctx.model_dir, runner=runner_profile,
        mode=slot.mode if control is None else "off", port=free_port(),
        revision=ctx.suite.model.revision, base_env=server_base_env(slot.arm),
        sglang_src=tree.import_root if tree else None, extra_env=extra)
    server = Server(spec, ctx.run_dir / request.log_rel)
    ctx.console.log(f"server {slot.index + 1}: {slot.label}, repeat {slot.repeat}: "
                    f"starting ({spec.display()})")
    server.start()
    return server


def _start_servers(ctx: Context, requests: list[ServerRequest]) -> list[Server]:
    """Start every requested server at once, then wait until each is ready (a live pair loads
    both trees together: the devices do not idle through two loads in series). A taken port is
    retried on a fresh one, up to PORT_ATTEMPTS per server; on any failure every server
    started here is stopped before the error propagates."""
    ready: dict[int, Server] = {}
    attempts = dict.fromkeys(range(len(requests)), 0)
    launched: dict[int, Server] = {}
    try:
        while len(ready) < len(requests):
            for index, request in enumerate(requests):
                if index in ready or index in launched:
                    continue
                attempts[index] += 1
                try:
                    server = _launch(ctx, request)
                except PortInUse as err:
                    _port_retry(ctx, err, attempts[index])
                    continue
                launched[index] = server
            for index in sorted(launched):
                server = launched.pop(index)
                try:
                    waited = server.wait_ready()
                except PortInUse as err:
                    server.stop()
                    if server.log_path.is_file():   # keep the failed attempt's log
                        server.log_path.replace(
                            server.log_path.with_suffix(f".attempt{attempts[index]}.log"))
                    _port_retry(ctx, err, attempts[index])
                    continue
                except BaseException:
                    server.stop()
                    raise
                ctx.console.log(f"server ready after {waited:.0f} s at {server.base_url}")
                ctx.start_seconds.append(round(waited, 1))
                ready[index] = server
    except BaseException:
        for server in [*launched.values(), *ready.values()]:
            server.stop()
        raise
    return [ready[i] for i in range(len(requests))]


def _port_retry(ctx: Context, err: PortInUse, attempt: int) -> None:
    """Log a taken port and go on, or give up after PORT_ATTEMPTS fresh ports."""
    if attempt >= PORT_ATTEMPTS:
        raise PortInUse(f"{err} ({PORT_ATTEMPTS} ports tried)", err.log_tail) from err
    ctx.console.log(f"{err}; retrying on another port")


def _run_slot(ctx: Context, slot: ServerSlot, progress: Progress, task: Any,
              with_accuracy: bool) -> None:
    log_rel = f"server/{slot.label}-r{slot.repeat}.log"
    progress.update(task, description=f"starting server {slot.label} (repeat {slot.repeat})")
    with _start_server(ctx, slot, log_rel) as server:
        for planned in slot.points:
            progress.update(task, description=f"{planned.mode} c={planned.concurrency} "
                                              f"r{planned.repeat} ({planned.num_prompts} prompts)")
            _record(ctx, planned, _measure_point(ctx, server, planned, log_rel), progress, task)
        if with_accuracy and slot.repeat == 0 and ctx.suite.gsm8k:
            _accuracy(ctx, server, slot.label)


def _switch(ctx: Context, server: Server, control: ModeControl, mode: str) -> None:
    """Switch the idle server to ``mode``; every scheduler process acknowledges first."""
    if control.mode == mode:
        return
    server.check_alive()
    acks = control.switch(mode, timeout_s=SWITCH_TIMEOUT_S)
    ctx.console.log(f"mode {mode} (seq {control.seq}) acknowledged by pids {sorted(acks)}")


def _run_in_server(ctx: Context, slot: ServerSlot, progress: Progress, task: Any,
                   with_accuracy: bool) -> None:
    """One server start running every mode: blocks in the plan's order, switched in place."""
    log_rel = f"server/{slot.label}.log"
    control = ModeControl(ctx.run_dir / "server" / f"{slot.label}.mode.json")
    control.write(slot.mode, 0)
    progress.update(task, description=f"starting server {slot.label} (modes "
                                      f"{', '.join(slot.modes)})")
    runner_profile = ctx.suite.server_for(ctx.detected.runner_class)
    host = ClientHost(ctx.python, _worker_env(ctx.client_env(slot.arm)),
                      ctx.run_dir / "client" / f"{slot.label}.worker.log")
    host.launch()                       # the client imports while the server loads
    with host, _start_server(ctx, slot, log_rel, control) as server:
        control.register(expected_schedulers(list(runner_profile.args)),
                         timeout_s=SWITCH_TIMEOUT_S)
        this = LiveServer(slot, server, control, host, log_rel)
        for planned in slot.points:
            _record(ctx, planned, _measure_block(ctx, this, planned, progress, task), progress,
                    task)
        if with_accuracy and slot.repeat == 0 and ctx.suite.gsm8k:
            _accuracy_per_mode(ctx, this)


@dataclass
class LiveServer:
    """One arm's server of a live pair, with its mode control, client worker and log."""

    slot: ServerSlot
    server: Server
    control: ModeControl
    host: ClientHost
    log_rel: str
    warmed: set[str] = dataclasses.field(default_factory=set)


def _run_live_pair(ctx: Context, pair: LivePair, progress: Progress, task: Any,
                   with_accuracy: bool) -> None:
    """Head vs base with both trees' servers alive for one start: they load together, then
    the blocks alternate between them (same prompts per block pair), each server switching its
    modes in place; while a block runs on one server the other must stay idle (no prefill or
    decode batch in its log over the block), else the run stops with that named."""
    runner_profile = ctx.suite.server_for(ctx.detected.runner_class)
    arch = runner_classes.get(ctx.detected.runner_class).arch
    progress.update(task, description=f"starting the live pair "
                                      f"{' + '.join(s.label for s in pair.slots)}")
    with contextlib.ExitStack() as stack:
        requests, hosts, controls = [], [], []
        for index, slot in enumerate(pair.slots):
            control = ModeControl(ctx.run_dir / "server" / f"{slot.label}.mode.json")
            control.write(slot.mode, 0)
            host = ClientHost(ctx.python, _worker_env(ctx.client_env(slot.arm)),
                              ctx.run_dir / "client" / f"{slot.label}.worker.log")
            host.launch()                   # the clients import while the servers load
            stack.enter_context(host)
            devices = pair.devices[index] if pair.devices else ()
            requests.append(ServerRequest(slot, f"server/{slot.label}.log", control,
                                          device_env(arch, devices)))
            hosts.append(host)
            controls.append(control)
        # GPU runners load both trees at once (disjoint devices, no idle GPUs through two loads
        # in series); a 2-core CPU loads them one after the other (measured: both at once took
        # 78 s, one alone 31 s)
        servers: list[Server] = []
        for group in ([requests] if arch != "cpu" else [[r] for r in requests]):
            for server in _start_servers(ctx, group):
                servers.append(stack.enter_context(server))
        live: dict[str, LiveServer] = {}
        for request, server, host, control in zip(requests, servers, hosts, controls,
                                                  strict=True):
            control.register(expected_schedulers(list(runner_profile.args)),
                             timeout_s=SWITCH_TIMEOUT_S)
            live[request.slot.arm] = LiveServer(request.slot, server, control, host,
                                                request.log_rel)
        for planned in pair.points:
            others = [o for arm, o in live.items() if arm != planned.arm]
            before = {o.slot.arm: o.server.log_offset() for o in others}
            point = _measure_block(ctx, live[planned.arm], planned, progress, task)
            point["idle_check"] = {o.slot.label: _idle_batches(o, before[o.slot.arm])
                                   for o in others}
            busy = {label: n for label, n in point["idle_check"].items() if n}
            if busy:
                raise BenchError(f"live pair: server(s) {busy} ran batches while block "
                                 f"{planned.arm} {planned.mode} s{planned.start} "
                                 f"b{planned.block} ran on the other (something else is "
                                 f"using them): the pair's blocks are not comparable")
            _record(ctx, planned, point, progress, task)
        if with_accuracy and pair.start == 0 and ctx.suite.gsm8k:
            for this in live.values():      # GSM8K per tree and mode, each in its own server
                _accuracy_per_mode(ctx, this)


def _measure_block(ctx: Context, this: LiveServer, planned: PlannedPoint, progress: Progress,
                   task: Any) -> Point:
    """One block in a server that switches its modes in place: the acknowledged switch, the
    mode's warm-up at its first switch in this start, then the measured point."""
    _switch(ctx, this.server, this.control, planned.mode)
    if planned.mode not in this.warmed:
        this.warmed.add(planned.mode)
        _warm_up(ctx, this.server, planned, this.host)
    arm = f"{planned.arm} " if planned.arm else ""
    progress.update(task, description=f"{arm}{planned.mode} c={planned.concurrency} "
                                      f"s{planned.start} b{planned.block}")
    return _measure_point(ctx, this.server, planned, this.log_rel, this.control, this.host)


def _record(ctx: Context, planned: PlannedPoint, point: Point, progress: Progress,
            task: Any) -> None:
    ctx.session.add_point(point)
    _log_point(ctx, planned, point)
    progress.advance(task)


def _accuracy_per_mode(ctx: Context, this: LiveServer) -> None:
    """GSM8K in every mode of one server, switched in place: paired per question."""
    for mode in this.slot.modes:
        _switch(ctx, this.server, this.control, mode)
        _accuracy(ctx, this.server, f"{this.slot.arm}-{mode}" if this.slot.arm else mode)


def _idle_batches(other: LiveServer, since: int) -> int:
    """Batches the other server of a live pair ran since ``since`` (its log offset)."""
    other.server.check_alive()
    return logparse.batch_lines(logparse.read_slice(other.server.log_path, since))


def _warm_up(ctx: Context, server: Server, planned: PlannedPoint, host: ClientHost) -> None:
    """``[design] warmup_blocks`` discarded client runs in a mode at its first switch in a
    start, with the first measured block's shape and fresh prompts (distinct prompts make
    chunk-sized prefill batches; the client's own warm-up copies one prompt, which the radix
    cache shares): a GPU kernel picked by the batch's M is tuned or compiled before anything is
    measured. Kept in client/ as warmup-*, never a point."""
    suite = ctx.suite
    for index in range(suite.effective_design.warmup_blocks):
        label = f"{planned.arm}-{planned.mode}" if planned.arm else planned.mode
        name = f"warmup-{label}-c{planned.concurrency}-s{planned.start}-w{index}"
        jsonl = ctx.run_dir / "client" / f"{name}.jsonl"
        jsonl.unlink(missing_ok=True)
        point = ClientPoint(base_url=server.base_url, model=ctx.model_dir,
                            tokenizer=ctx.model_dir, input_len=suite.load.input_len,
                            output_len=suite.load.output_len, num_prompts=planned.num_prompts,
                            concurrency=planned.concurrency, seed=planned.seed + 7_919 + index,
                            warmup_requests=suite.load.warmup_requests,
                            range_ratio=suite.load.range_ratio, output_file=jsonl)
        ctx.console.log(f"warm-up block {index + 1} in mode {planned.mode} (discarded)")
        host.run(client_argv(ctx.python, point)[3:], ctx.run_dir / "client" / f"{name}.log",
                 suite.load.point_timeout_s, watch=server.check_alive)


def _worker_env(env: dict[str, str] | None) -> dict[str, str]:
    """The client worker imports servegate too: this checkout's package goes on its path
    (after an arm's sglang tree, which stays first)."""
    base = dict(os.environ if env is None else env)
    here = str(Path(__file__).resolve().parents[2])
    parts = [p for p in base.get("PYTHONPATH", "").split(os.pathsep) if p]
    if here not in parts:
        parts.append(here)
    return {**base, "PYTHONPATH": os.pathsep.join(parts)}


def _log_point(ctx: Context, planned: PlannedPoint, point: Point) -> None:
    a = point["alignment"]
    where = (f"s{planned.start} b{planned.block}" if planned.start is not None
             else f"r{planned.repeat}")
    ctx.console.log(
        f"{planned.mode} c={planned.concurrency} {where}: mean TTFT "
        f"{point['metrics']['mean_ttft_ms']:.1f} ms, median TPOT "
        f"{point['metrics']['median_tpot_ms']:.2f} ms, aligned "
        f"{a['aligned_fraction']:.0%} of {a['saturated_batches']} saturated batches")


def _baseline_exists(run: Run) -> bool:
    """The judge's own rule for where a run's baseline lives."""
    return baseline_path(*run_identity(run)).is_file()


def _compare(ctx: Context) -> int | None:
    if ctx.run.get("ab"):           # head vs base: judged inside the run, not vs a baseline
        return int(compare_run(ctx.run_dir, strict=False))
    # Judged when there is something to judge by: a stored baseline, or in-run A/B claims
    # (the suite has a [judge.claims] table; claims need no baseline). The judge's exit code
    # (0 pass or inconclusive, 1 regression, 2 error; never 3: not strict) becomes bench's.
    has_claims = isinstance((ctx.suite.judge_table or {}).get("claims"), dict)
    if not _baseline_exists(ctx.run):
        if not has_claims:
            ctx.console.log("no baseline for this suite and runner and no in-run claims "
                            "(the suite has no judge.claims table); not judged")
            return None
        ctx.console.log("no baseline for this suite and runner: judging its in-run claims only")
    return int(compare_run(ctx.run_dir, strict=False))


def _add_to_history(ctx: Context) -> None:
    """With ``$SERVEGATE_HISTORY`` set, keep every complete run in the nightly history store
    (a refused run, e.g. fault-injected, is logged and left out; it never fails the run)."""
    store = os.environ.get(HISTORY_ENV)
    if not store:
        return
    try:
        result = add_run(ctx.run_dir, Path(store))
    except HistoryError as err:
        ctx.console.log(f"history: not added: {err}")
        return
    ctx.console.log(f"history: {result.status} {result.path} ({result.lines} lines)")


def _plan(suite: Suite, modes: list[str], trees: dict[str, SglangTree | None],
          accuracy_only: bool, runner_class: str = "cpu",
          gpus: int = 0) -> list[ServerSlot | LivePair]:
    """The suite's design as server slots (accuracy-only runs: one start, no load points).
    Head vs base in an in-server design runs as live pairs where the runner holds two servers
    (:func:`live_pair_layout`), else one start per tree after the other."""
    design = suite.effective_design
    arms = tuple(trees)
    starts = 1 if accuracy_only else design.starts
    if design.in_server:
        layout = (live_pair_layout(suite, runner_class, gpus) if arms == ("base", "head")
                  else None)
        if layout is not None and layout.live:
            pairs = build_live_pair_plan(modes, suite.load.concurrency, suite.load.num_prompts,
                                         starts, design.blocks, suite.seed,
                                         gpus=layout.gpus, per_server=layout.per_server)
            if accuracy_only:
                pairs = [dataclasses.replace(pair, points=()) for pair in pairs]
            return list(pairs)
        slots = build_block_plan(modes, suite.load.concurrency, suite.load.num_prompts,
                                 starts, design.blocks, suite.seed, arms=arms)
        if accuracy_only:
            slots = [dataclasses.replace(slot, points=()) for slot in slots]
        return list(slots)
    slots = build_plan(modes, suite.load.concurrency, suite.load.num_prompts,
                       1 if accuracy_only else suite.repeats, suite.seed, arms=arms)
    if accuracy_only:
        slots = [dataclasses.replace(slot, points=()) for slot in slots]
    return list(slots)


def _order_label(point: PlannedPoint) -> str:
    """A block in run.json's design order: ``off@c2`` (``head:off@c2`` in a live pair)."""
    where = f"{point.mode}@c{point.concurrency}"
    return f"{point.arm}:{where}" if point.arm else where


def _select_modes(suite: Suite, modes_arg: str | None) -> list[str]:
    if not modes_arg:
        return list(suite.modes)
    modes = [m.strip() for m in modes_arg.split(",") if m.strip()]
    for mode in modes:
        if mode not in MODES:
            raise ConfigError(f"--modes: {mode!r} is not one of {MODES}")
    return modes


def _default_suite(detected: Detected) -> str:
    return "cpu" if detected.runner_class == "cpu" else "premerge"


def _require_gate(modes: list[str], trees: dict[str, SglangTree | None]) -> None:
    """on/forced on an sglang without PR #32888 fail now, not after a server start."""
    for tree in trees.values():
        try:
            info = locate_sglang([str(tree.import_root)] if tree else None)
        except UnsupportedSglang:
            continue  # no sglang on this path at all: the server start reports it with its log
        require_exact_fill(modes, info)


def main(argv: list[str]) -> int:
    args = _parse(argv)
    console = Console(stderr=True)
    try:
        detected = detect(args.runner)
        suite = load_suite(suite_path(args.suite or _default_suite(detected)), args.models_dir)
        modes = _select_modes(suite, args.modes)
        trees = _trees(args)
        _require_gate(modes, trees)
    except (ConfigError, RunnerError, UnsupportedSglang, TreeError) as err:
        print(f"servegate bench: {err}", file=sys.stderr)
        return EXIT_INFRA
    if not suite.runs_on(detected.runner_class):
        print(f"servegate bench: suite {suite.name!r} runs on {', '.join(suite.runners)}, "
              f"this runner is {detected.runner_class!r} (use --runner or another --suite)",
              file=sys.stderr)
        return EXIT_INFRA
    server = suite.server_for(detected.runner_class)
    try:
        session = RunSession.create(
            args.results_dir, suite, detected.runner_class, argv,
            chunk_size=server.chunked_prefill_size, page_size=server.page_size,
            trees={arm: tree.record() for arm, tree in trees.items() if tree})
    except OSError as err:
        print(f"servegate bench: cannot create the run folder: {err}", file=sys.stderr)
        return EXIT_INFRA
    run, run_dir = session.run, session.run_dir
    injected = {k: v for k, v in os.environ.items() if k.startswith(INJECT_PREFIX)}
    if injected:  # a deliberate slowdown (judge validation): never a baseline, always visible
        run["injected"] = injected
        console.log(f"[bold red]fault injection enabled: {injected}")
    ctx = Context(suite=suite, detected=detected, session=session, python=sys.executable,
                  model_dir=suite.model.path, console=console, trees=trees)
    code = EXIT_OK
    started = time.monotonic()
    try:
        with terminate_on_sigterm():
            run["fingerprint"] = fingerprint(detected, suite.model.path, suite.model.revision)
            if trees.get("") is not None:   # --sglang-src: the tree is the sglang measured
                tree = trees[""]
                run["fingerprint"].update(sglang=tree.version, sglang_commit=tree.commit or "")
            session.save()
            if suite.model.prepare is not None:
                console.log(f"preparing model {suite.model.name} (first time: ~30 s)")
                prepared = ensure_gguf_model(suite.model.name, suite.model.prepare.package_file)
                ctx.model_dir = str(prepared)
                # The folder name carries the GGUF's digest: that is the weights' revision.
                run["fingerprint"]["model_revision"] = (
                    f"{suite.model.prepare.package_file} sha256:{prepared.name.rsplit('-', 1)[-1]}")
                session.save()
            if args.accuracy_only and not suite.gsm8k:
                raise BenchError(f"--accuracy-only: suite {suite.name!r} has no [gsm8k] table")
            slots = _plan(suite, modes, trees, args.accuracy_only, detected.runner_class,
                          detected.gpu_count)
            design = suite.effective_design
            run["design"] = {**design.record(), "modes": list(modes),
                             "order": [[_order_label(p) for p in slot.points]
                                       for slot in slots
                                       if isinstance(slot, LivePair) or slot.in_server],
                             "warmup": WARMUP_NOTE if design.in_server else "",
                             "note": "; ".join(suite.notes)}
            if set(trees) == {"base", "head"} and design.in_server:
                layout = live_pair_layout(suite, detected.runner_class, detected.gpu_count)
                run["design"]["live_pair"] = layout.live
                run["design"]["pair_note"] = layout.note
                run["design"]["devices"] = [
                    {s.label: list(d) for s, d in zip(pair.slots, pair.devices, strict=True)}
                    for pair in slots if isinstance(pair, LivePair) and pair.devices]
                console.log(layout.note)
            for note in suite.notes:
                console.log(f"note: {note}")
            session.save()
            with _progress(console, total_points(slots)) as (progress, task):
                for slot in slots:
                    if isinstance(slot, LivePair):
                        _run_live_pair(ctx, slot, progress, task,
                                       with_accuracy=not args.skip_accuracy)
                    elif slot.in_server:
                        _run_in_server(ctx, slot, progress, task,
                                       with_accuracy=not args.skip_accuracy)
                    else:
                        _run_slot(ctx, slot, progress, task,
                                  with_accuracy=not args.skip_accuracy)
            run["design"]["start_seconds"] = list(ctx.start_seconds)
            walls = [float(p["wall_s"]) for p in run["points"] if "wall_s" in p]
            run["design"]["block_seconds"] = round(sum(walls) / len(walls), 2) if walls else None
            session.complete()
            console.log(f"all points done in {time.monotonic() - started:.0f} s")
            if args.accuracy_only:
                # No load points: the performance baseline does not apply (accuracy is
                # judged within the run by the paired analysis in summary.md).
                console.log("accuracy-only run: not compared with the performance baseline")
            elif not args.no_compare:
                judged = _compare(ctx)
                if judged is not None:
                    code = judged
            if not args.accuracy_only:
                _add_to_history(ctx)
    except (KeyboardInterrupt, Terminated) as err:
        session.fail(f"interrupted ({type(err).__name__}{': ' + str(err) if str(err) else ''})")
        code = EXIT_SIGINT if isinstance(err, KeyboardInterrupt) else EXIT_SIGTERM
    except INFRA_ERRORS as err:
        session.fail(f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
                     getattr(err, "log_tail", "") or "\n".join(str(err).splitlines()[1:]))
        code = EXIT_INFRA
    except Exception as err:  # a bug, but the run folder must still say what happened
        session.fail(f"{type(err).__name__}: {err}", traceback.format_exc())
        code = EXIT_INFRA
    print(run_dir, flush=True)
    return code
