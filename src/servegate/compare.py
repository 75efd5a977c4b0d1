"""``servegate compare RUN_DIR [--baseline FILE] [--strict]``: judge a run, write its reports.

Judges the run against its stored baseline (when one exists) and the A/B claims for its runner
class (:func:`servegate.judge.evaluate.judge`), all intervals Bonferroni-corrected over the
checks judged together, then runs every report writer (:data:`servegate.report.WRITERS`):
``verdict.json``, the ``## Verdict`` section of ``summary.md`` (and ``$GITHUB_STEP_SUMMARY``),
``junit.xml``, ``pytest_benchmark.json`` and ``plots/``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from servegate.errors import EXIT_INFRA
from servegate.judge.evaluate import judge
from servegate.report import print_judgement, write_reports


def compare_run(run_dir: Path, strict: bool = False, *, baseline_file: Path | None = None,
                plots: bool = True) -> int:
    """Judge, print, write reports; returns the servegate exit code (bench calls this)."""
    judgement = judge(Path(run_dir), baseline_file=baseline_file, strict=strict)
    print_judgement(judgement)
    try:
        written = write_reports(judgement, skip=frozenset() if plots else frozenset({"plots"}))
    except OSError as err:       # read-only folder, full disk: the verdict was not recorded
        print(f"servegate compare: cannot write reports into {run_dir}: {err}", file=sys.stderr)
        return EXIT_INFRA
    for path in written:
        print(f"  wrote {path}")
    return judgement.exit_code


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="servegate compare", description=__doc__)
    parser.add_argument("run_dir", type=Path, help="run folder (results/<suite>-<runner>-...)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="baseline file (default: baselines/<runner>/<model>/<suite>.json)")
    parser.add_argument("--strict", action="store_true",
                        help="exit 3 when the verdict is inconclusive")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    args = parser.parse_args(argv)
    return compare_run(args.run_dir, args.strict, baseline_file=args.baseline,
                       plots=not args.no_plots)
