"""What ``servegate bench`` does once every point is in: judge the run (against its stored
baseline, its in-run claims, or head against base; or say why it is not judged), keep it as
this machine's local baseline on the CPU tier when none of this hardware exists, and keep it in
the nightly history store when ``$SERVEGATE_HISTORY`` names one."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from servegate.commands.bench_context import Context
from servegate.commands.compare import compare_run
from servegate.core import hardware
from servegate.core.errors import EXIT_OK
from servegate.core.results import unusable_reasons
from servegate.history.cli import ENV_STORE as HISTORY_ENV
from servegate.history.store import HistoryError, add_run
from servegate.judge.baselines import (
    BaselineError,
    baseline_from_run,
    baseline_path,
    load_baseline,
    local_baseline_path,
    run_identity,
    stored_baseline_path,
    write_baseline,
)
from servegate.measure.interference import is_busy


def judge_run(ctx: Context) -> int | None:
    """The judge's exit code for the finished run, or None when there is nothing to judge by;
    then, without a regression or an error, :func:`keep_local_baseline`."""
    if ctx.run.get("ab"):           # head vs base: judged inside the run, not vs a baseline
        return int(compare_run(ctx.run_dir, strict=False))
    # Judged when there is something to judge by: a stored baseline (the judge's rule for where
    # it lives), or in-run A/B claims (the suite has a [judge.claims] table; claims need no
    # baseline). The judge's exit code (0 pass or inconclusive, 1 regression, 2 error; never
    # 3: not strict) becomes bench's.
    has_claims = isinstance((ctx.suite.judge_table or {}).get("claims"), dict)
    has_baseline, code = stored_baseline_path(ctx.run).is_file(), None
    if not has_baseline and not has_claims:
        ctx.console.log("no baseline for this suite and runner and no in-run claims "
                        "(the suite has no judge.claims table); not judged")
    else:
        if not has_baseline:
            ctx.console.log("no baseline for this suite and runner: judging its in-run claims "
                            "only")
        code = int(compare_run(ctx.run_dir, strict=False))
    if code in (None, EXIT_OK):
        keep_local_baseline(ctx)
    return code


def keep_local_baseline(ctx: Context) -> Path | None:
    """On the CPU tier, with no baseline of this hardware (none kept here, the stored one from
    another or an unknown machine), keep the run (complete, not fault-injected) as this
    machine's baseline in the user's cache, never in the repository: the next run on this
    hardware is judged against it. GPU classes keep their reviewed baselines."""
    path = local_baseline_path(ctx.run)
    stored = baseline_path(*run_identity(ctx.run))
    if path is None or path.is_file() or unusable_reasons(ctx.run):
        return None
    points = ctx.run.get("points") or []
    busy = sum(1 for p in points if is_busy(p.get("machine") or {}))
    if busy * 4 > len(points):      # a contended sitting would set every later verdict's level
        ctx.console.log(f"not kept as this machine's local baseline: {busy} of {len(points)} "
                        "blocks busy with other work (more than a quarter)")
        return None
    with contextlib.suppress(BaselineError):
        if stored.is_file() and hardware.compare(load_baseline(stored)["provenance"].get(
                "fingerprint"), ctx.run.get("fingerprint"))[0] == "same":
            return None
    write_baseline(path, baseline_from_run(
        ctx.run, ctx.run_dir, created_by="servegate bench (this machine's local baseline)"))
    ctx.console.log(f"kept as this machine's local baseline (hardware "
                    f"{hardware.of(ctx.run.get('fingerprint'))}): {path}; the next run on "
                    "this hardware is judged against it")
    return path


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
