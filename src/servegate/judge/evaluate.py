"""Judge one run folder: its suite's [judge] table, its baseline and its A/B claims, every
interval Bonferroni-corrected over the checks judged together. Pure decision: nothing is written
(the report writers and ``servegate compare`` do that)."""

from __future__ import annotations

from pathlib import Path

from servegate.judge.baselines import (
    BaselineError,
    baseline_path,
    ensure_matches,
    load_baseline,
    run_identity,
)
from servegate.judge.checks import Check
from servegate.judge.claims import claim_pendings
from servegate.judge.compare import baseline_pendings
from servegate.judge.config import JudgeConfig, JudgeConfigError, judge_config_for_run
from servegate.judge.judgement import Judgement
from servegate.judge.stats import per_check_confidence
from servegate.results import Run, RunFolderError, load_run


def error_judgement(run_dir: Path, message: str, strict: bool,
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
        return error_judgement(run_dir, str(err), strict)
    try:
        config = judge_config_for_run(dict(run), repo_root)
    except JudgeConfigError as err:
        return error_judgement(run_dir, str(err), strict, run)
    notes = [f"judge settings from {config.source}"]
    baseline = None
    explicit = baseline_file is not None
    if baseline_file is None:
        try:
            baseline_file = baseline_path(*run_identity(run), root=baselines_root)
        except BaselineError as err:
            return error_judgement(run_dir, str(err), strict, run)
    try:
        if explicit or baseline_file.is_file():
            baseline = load_baseline(baseline_file)
            ensure_matches(baseline, baseline_file, run, str(run_dir))
        else:
            notes.append(f"no baseline at {baseline_file}: only in-run A/B claims judged "
                         "(store one with `servegate update-baselines RUN_DIR`)")
    except BaselineError as err:
        return error_judgement(run_dir, str(err), strict, run)

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
