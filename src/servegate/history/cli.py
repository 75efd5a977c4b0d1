"""``servegate history``: keep every accepted run and read the nights back (the subcommands, the
default store and the exit codes: docs/history.md)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, TextIO

from servegate.core.errors import EXIT_INFRA, EXIT_OK, ServegateError
from servegate.history.store import HistoryError, RunRefusedError, add_run, read_store

ENV_STORE = "SERVEGATE_HISTORY"


def default_store() -> Path:
    """``$SERVEGATE_HISTORY`` or ``<repo>/results/history``."""
    if os.environ.get(ENV_STORE):
        return Path(os.environ[ENV_STORE])
    from servegate.core.paths import RESULTS_DIR

    return RESULTS_DIR / "history"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="servegate history", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add", help="add a complete run folder to the store")
    add.add_argument("run_dir", type=Path)
    add.add_argument("--store", type=Path, default=None)
    report = sub.add_parser("report", help="change points, commit ranges and noise budget")
    report.add_argument("--store", type=Path, default=None)
    report.add_argument("--json", action="store_true", help="print the JSON document")
    report.add_argument("--plots", type=Path, default=None, help="write PNGs into this folder")
    report.add_argument("--metric", action="append", default=None,
                        help="only this metric (repeatable; default: every metric)")
    report.add_argument("--alpha", type=float, default=0.05,
                        help="two-sided significance for the noise budget (default 0.05)")
    report.add_argument("--skip-malformed", action="store_true",
                        help="list unreadable lines and analyse the rest instead of exiting 2")
    base = sub.add_parser("baseline", help="the rolling baseline (history:N) for a run")
    base.add_argument("run_dir", type=Path)
    base.add_argument("--nights", type=int, default=5)
    base.add_argument("--store", type=Path, default=None)
    base.add_argument("--out", type=Path, default=None, help="write it here (else stdout)")
    health = sub.add_parser("health", help="learned noise profile and sustained shifts")
    health.add_argument("--store", type=Path, default=None)
    health.add_argument("--nights", type=int, default=30,
                        help="nights the profile learns from (default 30), after the "
                             "sustained-shift rule's 14 reference nights")
    health.add_argument("--metric", action="append", default=None,
                        help="aggregate metric (repeatable; default mean_ttft_ms, "
                             "median_tpot_ms)")
    health.add_argument("--json", action="store_true", help="print the JSON document")
    health.add_argument("--skip-malformed", action="store_true",
                        help="list unreadable lines and analyse the rest instead of exiting 2")
    pub = sub.add_parser("publish", help="write a static HTML site of the history")
    pub.add_argument("--store", type=Path, default=None)
    pub.add_argument("--out", type=Path, required=True,
                     help="site folder (created; index.html, style.css, series/*.html)")
    pub.add_argument("--artifacts-base", default=None, metavar="URL",
                     help="link each night to URL/<run_id>/, or to URL with {run_id} replaced "
                          "(http(s) or a path relative to the site; the store records none)")
    pub.add_argument("--skip-malformed", action="store_true",
                     help="list unreadable lines (stderr and index) and publish the rest")
    alerts = sub.add_parser("alerts", help="open, update or close one GitHub issue per "
                            "regressed series of tonight's runs (gh)")
    alerts.add_argument("--run", type=Path, action="append", required=True, dest="runs",
                        help="a run folder judged tonight (repeatable; its runner x model x "
                             "suite is decided, no other)")
    alerts.add_argument("--store", type=Path, default=None)
    alerts.add_argument("--repo", default=None, help="owner/name (default: gh's own)")
    alerts.add_argument("--run-url", default=None, help="the workflow run, linked in the issue")
    alerts.add_argument("--history-url", default=None,
                        help="the history site's root (history publish), linked in the issue")
    alerts.add_argument("--dry-run", action="store_true",
                        help="print what would be done and the bodies; change nothing")
    bisect = sub.add_parser("bisect-range", help="the range an alert issue's body carries")
    bisect.add_argument("--body-file", required=True, help="the issue body ('-': stdin)")
    return parser


def _alerts(args: argparse.Namespace, out: TextIO) -> int:
    from servegate.history.alert_issues import Gh, apply, list_issues, plan
    from servegate.history.alerts import Links, night_alerts

    alerts, judged, notes = night_alerts(args.store or default_store(), args.runs)
    for note in notes:
        print(f"history alerts: {note}", file=sys.stderr)
    gh = Gh(args.repo)
    try:
        issues = list_issues(gh)
    except HistoryError as err:
        if not args.dry_run:
            raise
        print(f"history alerts: {err}; planned as if there were no alert issues", file=sys.stderr)
        issues = []
    actions = plan(alerts, judged, issues, Links(args.run_url, args.history_url))
    if not actions:
        print(f"history alerts: nothing to open, update or close ({len(judged)} runner x model x "
              "suite judged tonight)", file=out)
    if args.dry_run:
        for action in actions:
            target = f"#{action.number}" if action.number else "a new issue"
            print(f"history alerts: would {action.verb} {target} for {action.key}\n"
                  f"{action.body}", file=out)
        return EXIT_OK
    for line in apply(actions, gh):
        print(f"history alerts: {line}", file=out)
    return EXIT_OK


def _bisect_range(args: argparse.Namespace, out: TextIO) -> int:
    from servegate.history.alerts import bisect_request

    body = sys.stdin.read() if args.body_file == "-" else \
        Path(args.body_file).read_text(encoding="utf-8")
    for name, value in bisect_request(body).items():
        print(f"{name}={value}", file=out)
    return EXIT_OK


def _add(args: argparse.Namespace, out: TextIO) -> int:
    store = args.store or default_store()
    result = add_run(args.run_dir, store)
    verb = {"added": "added", "unchanged": "already in the store (unchanged)",
            "upgraded": "already in the store at an older schema: rewritten with its levels"
            }[result.status]
    print(f"history: {args.run_dir} {verb}: {result.path} ({result.lines} lines)", file=out)
    return EXIT_OK


def _report(args: argparse.Namespace, out: TextIO) -> int:
    from servegate.history.report import analyse, render_text, to_json

    if not 0 < args.alpha < 1:
        raise HistoryError(f"--alpha must be in (0, 1), got {args.alpha}")
    store = args.store or default_store()
    contents = read_store(store, strict=not args.skip_malformed)
    for problem in contents.problems:
        print(f"history report: skipped {problem}", file=sys.stderr)
    reports = analyse(contents.records, alpha=args.alpha, metrics=args.metric)
    if args.json:
        print(json.dumps(to_json(reports, contents.problems, args.alpha), indent=2), file=out)
    else:
        out.write(render_text(reports, contents.problems, args.alpha))
    if args.plots is not None:
        from servegate.history.plots import write_plots

        if args.plots.exists() and not args.plots.is_dir():
            raise HistoryError(f"{args.plots}: --plots must be a folder, it is a file")
        written = write_plots(reports, args.plots)
        print(f"history report: {len(written)} plot(s) in {args.plots}",
              file=sys.stderr if args.json else out)
    return EXIT_OK


def _baseline(args: argparse.Namespace, out: TextIO) -> int:
    from servegate.core.atomic import write_text
    from servegate.core.results import load_run
    from servegate.history.rolling import as_baseline, rolling_for_run
    from servegate.judge.baselines import dumps_baseline, validate_baseline

    rolling = rolling_for_run(args.store or default_store(), load_run(args.run_dir),
                              args.run_dir, nights=args.nights)
    for problem in rolling.problems:
        print(f"history baseline: skipped {problem}", file=sys.stderr)
    document: dict[str, Any] = as_baseline(rolling)
    target = args.out or Path("<stdout>")
    validate_baseline(document, target)
    text = dumps_baseline(document)
    if args.out is None:
        out.write(text)
    else:
        write_text(args.out, text)
        print(f"history baseline: history:{args.nights} from {len(rolling.run_ids)} run(s) "
              f"-> {args.out}", file=out)
    return EXIT_OK


def _health(args: argparse.Namespace, out: TextIO) -> int:
    from servegate.history.health import AGGREGATE_METRICS, health, render

    if args.nights < 1:
        raise HistoryError(f"--nights must be >= 1, got {args.nights}")
    contents = read_store(args.store or default_store(), strict=not args.skip_malformed)
    for problem in contents.problems:
        print(f"history health: skipped {problem}", file=sys.stderr)
    entries = health(contents.records, nights=args.nights,
                     metrics=args.metric or AGGREGATE_METRICS)
    if args.json:
        print(json.dumps({"identities": entries,
                          "problems": [str(p) for p in contents.problems]}, indent=2), file=out)
    else:
        out.write(render(entries))
    return EXIT_OK


def _publish(args: argparse.Namespace, out: TextIO) -> int:
    from servegate.history.site import publish

    result = publish(args.store or default_store(), args.out, artifacts_base=args.artifacts_base,
                     skip_malformed=args.skip_malformed)
    for problem in result.problems:
        print(f"history publish: skipped {problem}", file=sys.stderr)
    stale = f", {len(result.removed)} stale page(s) removed" if result.removed else ""
    print(f"history publish: {result.runs} run(s), {result.series} series page(s){stale} -> "
          f"{result.index}", file=out)
    return EXIT_OK


def main(argv: list[str], out: TextIO | None = None) -> int:
    """Entry point for ``servegate history``; 0 ok, 2 bad input (message on stderr)."""
    out = out or sys.stdout
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:          # argparse: --help is 0, a usage error is 2
        return EXIT_OK if stop.code == 0 else EXIT_INFRA
    handlers = {"add": _add, "report": _report, "baseline": _baseline, "health": _health,
                "publish": _publish, "alerts": _alerts, "bisect-range": _bisect_range}
    try:
        return handlers[args.command](args, out)
    except RunRefusedError as err:
        print(f"history {args.command}: refusing to add {args.run_dir}:", file=sys.stderr)
        for reason in err.reasons:
            print(f"  - {reason}", file=sys.stderr)
        return EXIT_INFRA
    except (ServegateError, ValueError, OSError) as err:
        print(f"history {args.command}: {err}", file=sys.stderr)
        return getattr(err, "exit_code", EXIT_INFRA)
