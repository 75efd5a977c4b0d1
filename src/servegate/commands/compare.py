"""``servegate compare RUN_DIR [--baseline FILE] [--strict] [--verbose]``: judge a run against its
baseline and its runner class's A/B claims (:func:`servegate.judge.evaluate.judge`), run every
report writer (:data:`servegate.report.WRITERS`) and print the verdict block. docs/guide/verdict.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from servegate.core.errors import EXIT_INFRA, ServegateError
from servegate.core.results import Run, RunFolderError, load_run
from servegate.history.profile import DEFAULT_PROFILE_NIGHTS
from servegate.history.store import HistoryError
from servegate.judge.baselines import run_identity
from servegate.judge.evaluate import error_judgement, judge
from servegate.report import print_judgement, write_reports
from servegate.report.headline import files_lines

HISTORY_PREFIX = "history"


def history_baseline(run: Run, run_dir: Path, spec: str, store: Path | None = None
                     ) -> dict[str, Any]:
    """``history[:N]``: the last N accepted nights of this run's series on its load and
    hardware (rolling baseline)."""
    from servegate.history.cli import default_store
    from servegate.history.rolling import DEFAULT_NIGHTS, as_baseline, rolling_for_run

    _, _, count = spec.partition(":")
    if count and not (count.isdigit() and int(count) >= 2):
        raise HistoryError(f"--baseline {spec!r}: expected history or history:N with N >= 2")
    rolling = rolling_for_run(store or default_store(), run, Path(run_dir),
                              nights=int(count) if count else DEFAULT_NIGHTS)
    return as_baseline(rolling)


def noise_profile(run: Run, run_dir: Path, store: Path | None, nights: int) -> Any:
    """The runner's learned noise profile (servegate.history.profile) from ``store``, else
    ``$SERVEGATE_HISTORY`` when set; None without a store, nights, or with ``nights`` 0.
    The run itself is left out (bench judges before it adds the run)."""
    import os

    from servegate.history.cli import ENV_STORE
    from servegate.history.load import judged_run_filters
    from servegate.history.profile import profile_from_store

    store = store or (Path(os.environ[ENV_STORE]) if os.environ.get(ENV_STORE) else None)
    if store is None or nights <= 0:
        return None
    excluded, loads, hardware = judged_run_filters(run, Path(run_dir))
    return profile_from_store(store, *run_identity(run), nights=nights,
                              exclude_run_ids=excluded, loads=loads, hardware=hardware)


def compare_run(run_dir: Path, strict: bool = False, *, baseline_file: Path | None = None,
                plots: bool = True, baseline_spec: str | None = None,
                history_store: Path | None = None, verbose: bool = False,
                profile_nights: int = DEFAULT_PROFILE_NIGHTS) -> int:
    """Judge, print, write reports; returns the servegate exit code (bench calls this). run.json
    is read once here for every reader. ``baseline_spec`` ``history[:N]``: the history store's
    rolling baseline instead of the stored file. With a history store (given, or
    ``$SERVEGATE_HISTORY``) the judge's priors come from the runner's last ``profile_nights``
    nights where they are worth more than the suite's figures."""
    run_dir, baseline_doc = Path(run_dir), None
    try:
        run = load_run(run_dir)
    except RunFolderError as err:
        judgement = error_judgement(run_dir, str(err), strict)
    else:
        try:
            if baseline_spec is not None:
                baseline_doc = history_baseline(run, run_dir, baseline_spec, history_store)
            priors = noise_profile(run, run_dir, history_store, profile_nights)
        except ServegateError as err:
            print(f"servegate compare: {err}", file=sys.stderr)
            return EXIT_INFRA
        judgement = judge(run_dir, run=run, baseline_file=baseline_file, strict=strict,
                          baseline_doc=baseline_doc,
                          measured_run_spread=baseline_doc is not None, priors=priors)
    print_judgement(judgement, verbose=verbose)
    try:
        written = write_reports(judgement, skip=frozenset() if plots else frozenset({"plots"}))
    except OSError as err:       # read-only folder, full disk: the verdict was not recorded
        print(f"servegate compare: cannot write reports into {run_dir}: {err}", file=sys.stderr)
        return EXIT_INFRA
    for line in files_lines(written, Path(run_dir)):
        print(f"  {line}")
    return judgement.exit_code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="servegate compare", description=__doc__)
    parser.add_argument("run_dir", type=Path, help="run folder (results/<suite>-<runner>-...)")
    parser.add_argument("--baseline", default=None,
                        help="baseline file (default: baselines/<runner>/<model>/<suite>.json), "
                             "or history[:N]: the last N accepted nights in the history store")
    parser.add_argument("--history-store", type=Path, default=None,
                        help="history store for --baseline history[:N] (default: "
                             "$SERVEGATE_HISTORY or results/history)")
    parser.add_argument("--profile-nights", type=int, default=DEFAULT_PROFILE_NIGHTS,
                        help="learn the runner's noise priors from its last N nights in the "
                             "history store (--history-store or $SERVEGATE_HISTORY; 0: the "
                             f"suite's figures only; default {DEFAULT_PROFILE_NIGHTS})")
    parser.add_argument("--strict", action="store_true",
                        help="exit 3 when the verdict is inconclusive")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument("--verbose", action="store_true",
                        help="print every check (interval, MDE, what would decide) and every "
                             "note, not just the gated checks and one line for the rest")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    spec = args.baseline if args.baseline and args.baseline.split(":")[0] == HISTORY_PREFIX \
        else None
    return compare_run(args.run_dir, args.strict, plots=not args.no_plots,
                       baseline_file=Path(args.baseline) if args.baseline and not spec else None,
                       baseline_spec=spec, history_store=args.history_store,
                       verbose=args.verbose, profile_nights=args.profile_nights)
