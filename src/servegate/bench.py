"""``servegate bench``: serve a suite's model per mode and measure it with sglang's own client.

config -> plan -> serve -> measure -> accuracy -> judge + report (``servegate.compare``).
The run folder, run.json and summary.md belong to :class:`servegate.session.RunSession`.
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

from servegate import runners
from servegate.accuracy.runner import run_gsm8k
from servegate.compare import compare_run
from servegate.config import ConfigError, Suite, load_suite, suite_path
from servegate.errors import EXIT_INFRA, EXIT_OK, EXIT_SIGINT, EXIT_SIGTERM, ServegateError
from servegate.history.cli import ENV_STORE as HISTORY_ENV
from servegate.history.store import HistoryError, add_run
from servegate.judge.baselines import baseline_path, run_identity
from servegate.measure import logparse
from servegate.measure.client import ClientError, ClientPoint, client_argv, parse_client_jsonl, run_client
from servegate.measure.exactfill import check_effective, device_double
from servegate.plan import PlannedPoint, ServerSlot, build_plan, total_points
from servegate.results import MODES, Point, Run
from servegate.runner import Detected, RunnerError, detect, fingerprint
from servegate.serve.launch import build_launch
from servegate.serve.modelprep import ensure_gguf_model
from servegate.serve.process import (
    PortInUse,
    Server,
    Terminated,
    free_port,
    terminate_on_sigterm,
)
from servegate.serve.support import UnsupportedSglang, locate_sglang, require_exact_fill
from servegate.serve.trees import SglangTree, TreeError, resolve_tree
from servegate.session import RunSession

INJECT_PREFIX = "SERVEGATE_INJECT_"     # the hook's controlled-slowdown variables
PORT_ATTEMPTS = 3                        # fresh ports to try when the chosen one is taken


class BenchError(ServegateError, RuntimeError):
    """A failure in a stage bench calls (e.g. GSM8K), reported as an infrastructure error."""


# Recorded in run.json as the run's cause, exit 2 (every deliberate error is a ServegateError).
INFRA_ERRORS = (ServegateError, OSError)


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="servegate bench", description=__doc__.splitlines()[0])
    parser.add_argument("--suite", help="suite name (suites/<name>.toml) or path; default: "
                                        "cpu without a GPU, premerge with one")
    parser.add_argument("--runner", help="override runner detection (a registered class: "
                                         f"{', '.join(runners.names())})")
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
        return {"base": resolve_tree(args.base), "head": resolve_tree(args.head)}
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


def _measure_point(ctx: Context, server: Server, planned: PlannedPoint, log_rel: str) -> Point:
    suite, run_dir = ctx.suite, ctx.run_dir
    label = f"{planned.arm}-{planned.mode}" if planned.arm else planned.mode
    name = f"{label}-c{planned.concurrency}-r{planned.repeat}"
    jsonl = run_dir / "client" / f"{name}.jsonl"
    client_log = run_dir / "client" / f"{name}.log"
    jsonl.unlink(missing_ok=True)       # the client appends; one record per file
    start = server.log_offset()
    point = ClientPoint(base_url=server.base_url, model=ctx.model_dir, tokenizer=ctx.model_dir,
                        input_len=suite.load.input_len, output_len=suite.load.output_len,
                        num_prompts=planned.num_prompts, concurrency=planned.concurrency,
                        seed=planned.seed, warmup_requests=suite.load.warmup_requests,
                        range_ratio=suite.load.range_ratio, output_file=jsonl)
    try:
        run_client(client_argv(ctx.python, point), client_log, suite.load.point_timeout_s,
                   env=ctx.client_env(planned.arm), watch=server.check_alive)
    except ClientError:
        server.check_alive()            # a dead server is the cause, not the client's failure
        raise
    server.check_alive()
    time.sleep(0.5)                     # let the scheduler flush its last log lines
    end = server.log_offset()
    metrics, requests = parse_client_jsonl(jsonl, expect_prompts=planned.num_prompts)
    measured = logparse.measured_text(server.log_path, start, end)
    alignment = logparse.alignment(logparse.parse_prefill_lines(measured),
                                   server.spec.chunk_size, server.spec.dp_attention_size)
    full_log = logparse.read_slice(server.log_path, 0, end)
    effective = check_effective(planned.mode, ctx.detected.runner_class, full_log, alignment)
    point = Point(mode=planned.mode, concurrency=planned.concurrency,  # type: ignore[typeddict-item]
                  repeat=planned.repeat, order=planned.order, metrics=metrics,
                  requests=requests, alignment=alignment, exact_fill_effective=effective,
                  files={"client_jsonl": str(jsonl.relative_to(run_dir)),
                         "client_log": str(client_log.relative_to(run_dir)),
                         "server_log": log_rel, "server_log_bytes": f"{start}-{end}"})
    if planned.arm:
        point["arm"] = planned.arm  # type: ignore[typeddict-item]
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


def _start_server(ctx: Context, slot: ServerSlot, log_rel: str) -> Server:
    """Start and wait for the slot's server; a taken port is retried on a fresh one."""
    runner_profile = ctx.suite.server_for(ctx.detected.runner_class)
    for attempt in range(1, PORT_ATTEMPTS + 1):
        tree = ctx.trees.get(slot.arm)
        spec = build_launch(
            python=ctx.python, model_path=ctx.model_dir, runner=runner_profile, mode=slot.mode,
            port=free_port(), revision=ctx.suite.model.revision,
            sglang_src=tree.import_root if tree else None)
        server = Server(spec, ctx.run_dir / log_rel)
        ctx.console.log(f"server {slot.index + 1}: {slot.label}, repeat {slot.repeat}: "
                        f"starting ({spec.display()})")
        try:
            server.start()
            waited = server.wait_ready()
        except PortInUse as err:
            server.stop()
            if server.log_path.is_file():   # keep the failed attempt's log for the post-mortem
                server.log_path.replace(server.log_path.with_suffix(f".attempt{attempt}.log"))
            if attempt == PORT_ATTEMPTS:
                raise PortInUse(f"{err} ({PORT_ATTEMPTS} ports tried)", err.log_tail) from err
            ctx.console.log(f"{err}; retrying on another port")
            continue
        except BaseException:
            server.stop()
            raise
        ctx.console.log(f"server ready after {waited:.0f} s at {server.base_url}")
        return server
    raise AssertionError("unreachable")


def _run_slot(ctx: Context, slot: ServerSlot, progress: Progress, task: Any,
              with_accuracy: bool) -> None:
    log_rel = f"server/{slot.label}-r{slot.repeat}.log"
    progress.update(task, description=f"starting server {slot.label} (repeat {slot.repeat})")
    with _start_server(ctx, slot, log_rel) as server:
        for planned in slot.points:
            progress.update(task, description=f"{planned.mode} c={planned.concurrency} "
                                              f"r{planned.repeat} ({planned.num_prompts} prompts)")
            point = _measure_point(ctx, server, planned, log_rel)
            ctx.session.add_point(point)
            a = point["alignment"]
            ctx.console.log(
                f"{planned.mode} c={planned.concurrency} r{planned.repeat}: median TTFT "
                f"{point['metrics']['median_ttft_ms']:.1f} ms, median TPOT "
                f"{point['metrics']['median_tpot_ms']:.2f} ms, aligned "
                f"{a['aligned_fraction']:.0%} of {a['saturated_batches']} saturated batches")
            progress.advance(task)
        if with_accuracy and slot.repeat == 0 and ctx.suite.gsm8k:
            _accuracy(ctx, server, slot.label)


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
            slots = build_plan(modes, suite.load.concurrency, suite.load.num_prompts,
                               1 if args.accuracy_only else suite.repeats, suite.seed,
                               arms=tuple(trees))
            if args.accuracy_only:
                slots = [dataclasses.replace(slot, points=()) for slot in slots]
            with _progress(console, total_points(slots)) as (progress, task):
                for slot in slots:
                    _run_slot(ctx, slot, progress, task, with_accuracy=not args.skip_accuracy)
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
