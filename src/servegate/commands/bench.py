"""``servegate bench``: serve a suite's model per mode and measure it with sglang's own client.

This module is the command line and the run's orchestration (config -> plan -> serve -> measure
-> accuracy -> judge + report; the ``bench_*`` modules' jobs: docs/architecture.md). One run
folder per invocation, owned by :class:`servegate.commands.session.RunSession`; its run.json is
rewritten atomically after every point (docs/guide/run.md). The last line printed is the run
folder's path. Exit 2 on infrastructure or input errors."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import time
import traceback
from collections.abc import Iterator
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

from servegate.commands import bench_timings
from servegate.commands.bench_context import BenchError, Context
from servegate.commands.bench_finish import HISTORY_ENV, add_to_history, judge_run
from servegate.commands.bench_in_server import run_halves, run_in_server
from servegate.commands.bench_live_pair import run_live_pair
from servegate.commands.bench_plan import record_design, select_plan
from servegate.commands.bench_servers import INJECT_PREFIX
from servegate.commands.learned import describe, run_design
from servegate.commands.session import RunSession
from servegate.config import ConfigError, Suite, load_suite, suite_path
from servegate.core import runner_classes
from servegate.core.errors import EXIT_INFRA, EXIT_OK, EXIT_SIGINT, EXIT_SIGTERM, ServegateError
from servegate.core.results import MODES
from servegate.plan.design import HalvesRound, LivePair, total_points
from servegate.serve.detect import Detected, RunnerError, detect, fingerprint
from servegate.serve.gate import on_cell, read_tree
from servegate.serve.modelprep import ensure_gguf_model
from servegate.serve.process import Terminated, terminate_on_sigterm
from servegate.serve.support import UnsupportedSglang, locate_sglang, require_exact_fill
from servegate.serve.trees import SglangTree, TreeError, resolve_tree

# Recorded in run.json as the run's cause, exit 2 (every deliberate error is a ServegateError).
INFRA_ERRORS = (ServegateError, OSError)


def build_parser() -> argparse.ArgumentParser:
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
    parser.add_argument("--profile", action="store_true",
                        help="one more block per mode, tree and server start under sglang's "
                             "profiler: kernel time per forward by family (never a point; "
                             "as a suite's [profile] enabled = true)")
    parser.add_argument("--keep-traces", action="store_true",
                        help="with profiling: keep the raw traces in profile/raw/")
    parser.add_argument("--sglang-src", type=Path, default=None, metavar="PATH",
                        help="the sglang under test: a checkout or an unpacked package, first "
                             "on the import path of every sglang process (nothing installed)")
    parser.add_argument("--base", type=Path, default=None, metavar="PATH",
                        help="head vs base: the base sglang tree (with --head)")
    parser.add_argument("--head", type=Path, default=None, metavar="PATH",
                        help="head vs base: the head sglang tree (with --base)")
    parser.add_argument("--toml-design", action="store_true",
                        help="run the suite's [design] even where $SERVEGATE_HISTORY holds a "
                             "GPU runner's learned profile (default: the design it sizes)")
    return parser


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = build_parser()
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

@contextlib.contextmanager
def _progress(console: Console, total: int) -> Iterator[tuple[Progress, Any]]:
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                        TimeRemainingColumn(), console=console, transient=False)
    with progress:
        yield progress, progress.add_task("points", total=total)


def _select_modes(suite: Suite, modes_arg: str | None) -> list[str]:
    if not modes_arg:
        return list(suite.modes)
    modes = [m.strip() for m in modes_arg.split(",") if m.strip()]
    for mode in modes:
        if mode not in MODES:
            raise ConfigError(f"--modes: {mode!r} is not one of {MODES}")
    return modes


def _learned(args: argparse.Namespace, suite: Suite, runner_class: str, modes: list[str],
             trees: dict[str, SglangTree | None]) -> tuple[Suite, dict[str, Any] | None]:
    """The suite with the design a GPU runner's learned profile sizes (one tree, load points:
    :func:`servegate.commands.learned.run_design`, which says why when it keeps the TOML's)."""
    store = os.environ.get(HISTORY_ENV)
    if args.toml_design or args.accuracy_only or tuple(trees) != ("",) or not store:
        return suite, None
    return run_design(suite, runner_class, tuple(modes), not args.skip_accuracy, Path(store))


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


def _read_gates(ctx: Context, modes: list[str]) -> None:
    """Each arm's tree's exact-fill gate on this runner class, before any server starts: it
    decides what ``on`` must show (servegate.serve.gate). Only ``on`` depends on it."""
    if "on" not in modes:
        return
    runner = ctx.detected.runner_class
    cls = runner_classes.get(runner) if runner in runner_classes.REGISTRY else None
    if cls is not None and cls.arch == "cpu" and not cls.emulated:
        # No probe on a plain CPU (10-20 s of sglang imports per tree, every CPU run): sglang's
        # gate tests a GPU architecture, and a tree that opened it on a CPU would fail the
        # servers' own read-back (`on` acknowledged effective where inactive is expected).
        ctx.run["gate_open"] = False
        ctx.run["gate"] = {"runner": runner, "device_arch": "cpu", "gate_open": False,
                           "source": "a CPU: not probed; the servers' read-back checks it"}
        return
    readings = {arm: read_tree(ctx.python, tree, [runner])[runner]
                for arm, tree in ctx.trees.items()}
    ctx.gate_open = {arm: reading.gate_open for arm, reading in readings.items()}
    judged = readings.get("head") or readings[""]
    ctx.run["gate_open"] = judged.gate_open
    ctx.run["gate"] = {**judged.record(), **({"arms": dict(ctx.gate_open)}
                                             if len(readings) > 1 else {})}
    for arm, reading in readings.items():
        ctx.console.log(f"{arm + ': ' if arm else ''}exact-fill gate on {runner} "
                        f"({reading.device_arch}): {'open' if reading.gate_open else 'closed'}"
                        f" -> on is a {on_cell(reading.gate_open)} cell")


def main(argv: list[str], suite: Suite | None = None) -> int:
    """``suite``: one already built (``servegate bisect``'s) instead of ``--suite``'s file."""
    args = _parse(argv)
    console = Console(stderr=True)
    try:
        detected = detect(args.runner)
        suite = suite or load_suite(suite_path(args.suite or _default_suite(detected)),
                                    args.models_dir)
        modes = _select_modes(suite, args.modes)
        trees = _trees(args)
        if tuple(trees) != ("",):           # head vs base: counted, not sized in time
            suite = dataclasses.replace(suite, design=suite.design.counted())
        _require_gate(modes, trees)
    except (ConfigError, RunnerError, UnsupportedSglang, TreeError) as err:
        print(f"servegate bench: {err}", file=sys.stderr)
        return EXIT_INFRA
    if not suite.runs_on(detected.runner_class):
        print(f"servegate bench: suite {suite.name!r} runs on {', '.join(suite.runners)}, "
              f"this runner is {detected.runner_class!r} (use --runner or another --suite)",
              file=sys.stderr)
        return EXIT_INFRA
    suite, learned = _learned(args, suite, detected.runner_class, modes, trees)
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
    profile = suite.profile
    if args.profile or args.keep_traces:
        profile = dataclasses.replace(profile, enabled=True,
                                      keep_traces=profile.keep_traces or args.keep_traces)
    ctx = Context(suite=suite, detected=detected, session=session, python=sys.executable,
                  model_dir=suite.model.path, console=console, trees=trees, profile=profile)
    code = EXIT_OK
    started = time.monotonic()
    run["timings"] = bench_timings.empty()
    try:
        with terminate_on_sigterm():
            run["fingerprint"] = fingerprint(detected, suite.model.path, suite.model.revision,
                                             server_env=server.env)
            if trees.get("") is not None:   # --sglang-src: the tree is the sglang measured
                tree = trees[""]
                run["fingerprint"].update(sglang=tree.version, sglang_commit=tree.commit or "")
            session.save()
            _read_gates(ctx, modes)
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
            slots = select_plan(suite, modes, trees, args.accuracy_only, detected.runner_class,
                                detected.gpu_count)
            record_design(ctx, modes, slots)
            if learned is not None:
                run["design"]["learned"] = learned
                console.log(describe(learned))
            for note in suite.notes:
                console.log(f"note: {note}")
            session.save()
            with _progress(console, total_points(slots)) as (progress, task):
                for slot in slots:
                    executor = (run_live_pair if isinstance(slot, LivePair) else run_halves
                                if isinstance(slot, HalvesRound) else run_in_server)
                    executor(ctx, slot, progress, task,
                             with_accuracy=not args.skip_accuracy)
            run["design"]["start_seconds"] = list(ctx.start_seconds)
            mean_wall = bench_timings.mean_block_wall(run)
            run["design"]["block_seconds"] = None if mean_wall is None else round(mean_wall, 2)
            bench_timings.finish(run, started)
            session.complete()
            console.log(f"all points done in {time.monotonic() - started:.0f} s")
            if args.accuracy_only:
                # No load points: the performance baseline does not apply (accuracy is
                # judged within the run by the paired analysis in summary.md).
                console.log("accuracy-only run: not compared with the performance baseline")
            elif not args.no_compare:
                judged = judge_run(ctx)
                if judged is not None:
                    code = judged
            if not args.accuracy_only:
                add_to_history(ctx)
    except (KeyboardInterrupt, Terminated) as err:
        bench_timings.finish(run, started)
        session.fail(f"interrupted ({type(err).__name__}{': ' + str(err) if str(err) else ''})")
        code = EXIT_SIGINT if isinstance(err, KeyboardInterrupt) else EXIT_SIGTERM
    except INFRA_ERRORS as err:
        bench_timings.finish(run, started)
        session.fail(f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
                     getattr(err, "log_tail", "") or "\n".join(str(err).splitlines()[1:]))
        code = EXIT_INFRA
    except Exception as err:  # a bug, but the run folder must still say what happened
        bench_timings.finish(run, started)
        session.fail(f"{type(err).__name__}: {err}", traceback.format_exc())
        code = EXIT_INFRA
    print(run_dir, flush=True)
    return code
