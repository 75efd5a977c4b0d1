"""What ``servegate bench`` does once every point is in: judge the run (against its stored
baseline, its in-run claims, or head against base; or say why it is not judged) and keep it in
the nightly history store when ``$SERVEGATE_HISTORY`` names one."""

from __future__ import annotations

import os
from pathlib import Path

from servegate.commands.bench_context import Context
from servegate.commands.compare import compare_run
from servegate.core.results import Run
from servegate.history.cli import ENV_STORE as HISTORY_ENV
from servegate.history.store import HistoryError, add_run
from servegate.judge.baselines import baseline_path, run_identity


def _baseline_exists(run: Run) -> bool:
    """The judge's own rule for where a run's baseline lives."""
    return baseline_path(*run_identity(run)).is_file()


def judge_run(ctx: Context) -> int | None:
    """The judge's exit code for the finished run, or None when there is nothing to judge by."""
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


def add_to_history(ctx: Context) -> None:
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
