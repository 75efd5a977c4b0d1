"""``servegate compare RUN_DIR [--baseline FILE] [--strict]``: judge a run, write its reports.

Judges the run against its stored baseline (when one exists) and the A/B claims for its runner
class, all intervals Bonferroni-corrected over the checks judged together, then writes
``verdict.json``, the ``## Verdict`` section of ``summary.md`` (and ``$GITHUB_STEP_SUMMARY``),
``junit.xml``, ``plots/`` and ``pytest_benchmark.json`` into the run folder.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servegate.judge.baselines import (
    BaselineError,
    baseline_path,
    ensure_matches,
    load_baseline,
    run_identity,
)
from servegate.judge.checks import EXIT_ERROR, Check, CheckVerdict, exit_code, overall_verdict
from servegate.judge.claims import claim_pendings
from servegate.judge.compare import baseline_pendings
from servegate.judge.config import JudgeConfig, JudgeConfigError, judge_config_for_run
from servegate.judge.stats import per_check_confidence
from servegate.results import Run, RunFolderError, load_run


@dataclass
class Judgement:
    """Everything the report writers need about one judged run."""

    run_dir: Path
    run: Run | None
    config: JudgeConfig
    checks: list[Check]
    baseline_file: Path | None = None
    baseline: dict[str, Any] | None = None
    family_size: int = 0
    per_check_confidence: float = 0.95
    notes: list[str] = field(default_factory=list)
    strict: bool = False

    @property
    def overall(self) -> CheckVerdict:
        return overall_verdict(self.checks)

    @property
    def exit_code(self) -> int:
        return exit_code(self.overall, self.strict)


def _error_judgement(run_dir: Path, message: str, strict: bool,
                     run: Run | None = None) -> Judgement:
    check = Check("integrity", "inputs readable", "inputs", "error", reason=message)
    return Judgement(run_dir, run, JudgeConfig(), [check], strict=strict)


def judge(run_dir: Path, *, baseline_file: Path | None = None, strict: bool = False,
          repo_root: Path | None = None, baselines_root: Path | None = None) -> Judgement:
    """Load run, suite [judge] table and baseline; evaluate every check with one family size."""
    run_dir = Path(run_dir)
    try:
        run = load_run(run_dir)
    except RunFolderError as err:
        return _error_judgement(run_dir, str(err), strict)
    try:
        config = judge_config_for_run(dict(run), repo_root)
    except JudgeConfigError as err:
        return _error_judgement(run_dir, str(err), strict, run)
    notes = [f"judge settings from {config.source}"]
    baseline = None
    explicit = baseline_file is not None
    if baseline_file is None:
        try:
            baseline_file = baseline_path(*run_identity(run), root=baselines_root)
        except BaselineError as err:
            return _error_judgement(run_dir, str(err), strict, run)
    try:
        if explicit or baseline_file.is_file():
            baseline = load_baseline(baseline_file)
            ensure_matches(baseline, baseline_file, run, str(run_dir))
        else:
            notes.append(f"no baseline at {baseline_file}: only in-run A/B claims judged "
                         "(store one with `servegate update-baselines RUN_DIR`)")
    except BaselineError as err:
        return _error_judgement(run_dir, str(err), strict, run)

    pendings = baseline_pendings(run, baseline, config) if baseline else []
    pendings += claim_pendings(run, config)
    family = sum(1 for p in pendings if p.counts)
    confidence = per_check_confidence(config.confidence, family)
    checks = [p.evaluate(confidence) for p in pendings]
    if not run.get("complete", False):
        cause = run.get("error") or "not every planned point finished"
        checks.insert(0, Check("integrity", "run complete", "complete", "error",
                               reason=f"run is incomplete: {cause}"))
    if not run.get("points"):
        checks.insert(0, Check("integrity", "run has points", "points", "error",
                               reason="run.json has no points"))
    notes.append(f"{family} checks judged together: each interval at "
                 f"{100 * confidence:.3f}% (Bonferroni for a family-wise "
                 f"{100 * config.confidence:.0f}%)")
    return Judgement(run_dir, run, config, checks, baseline_file if baseline else None,
                     baseline, family, confidence, notes, strict)


def write_reports(judgement: Judgement, plots: bool = True) -> list[Path]:
    """Write every report into the run folder; returns the written paths."""
    from servegate.report import junit, pytest_benchmark, summary, verdict_json

    run_dir = judgement.run_dir
    if not run_dir.is_dir():
        return []
    written = [verdict_json.write(judgement), summary.write(judgement), junit.write(judgement)]
    if judgement.run is not None and judgement.run.get("points"):
        written.append(pytest_benchmark.write(judgement.run, run_dir))
        if plots:
            from servegate.report import plots as plot_mod

            written += plot_mod.write(judgement.run, run_dir, judgement.baseline,
                                      judgement.config)
    return written


def print_judgement(judgement: Judgement, stream: Any = None) -> None:
    out = stream or sys.stdout
    print(f"servegate compare: {judgement.run_dir}", file=out)
    for note in judgement.notes:
        print(f"  note: {note}", file=out)
    for check in judgement.checks:
        print(f"  {check.describe()}", file=out)
    print(f"verdict: {judgement.overall.upper()} (exit {judgement.exit_code})", file=out)


def compare_run(run_dir: Path, strict: bool = False, *, baseline_file: Path | None = None,
                plots: bool = True) -> int:
    """Judge, print, write reports; returns the servegate exit code (bench calls this)."""
    judgement = judge(Path(run_dir), baseline_file=baseline_file, strict=strict)
    print_judgement(judgement)
    try:
        written = write_reports(judgement, plots=plots)
    except OSError as err:       # read-only folder, full disk: the verdict was not recorded
        print(f"servegate compare: cannot write reports into {run_dir}: {err}", file=sys.stderr)
        return EXIT_ERROR
    for path in written:
        print(f"  wrote {path}")
    return judgement.exit_code


def baseline_exists_for(run_dir: Path) -> bool:
    """True when the run's (runner class, model profile, suite) has a stored baseline file."""
    try:
        run = load_run(Path(run_dir))
        return baseline_path(*run_identity(run)).is_file()
    except (RunFolderError, BaselineError):
        return False


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
