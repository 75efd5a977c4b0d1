"""Judge one run folder: its suite's [judge] table, its baseline and its A/B claims. With a
``[judge] family`` only that family's checks gate, decided together by Holm's step-down
(``family_method``, default ``holm``; ``servegate.judge.family``), while every other check is
reported at the plain confidence level; without one every counted check gates,
Bonferroni-corrected over the checks judged together. Pure decision: nothing is written (the
report writers and ``servegate compare`` do that)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from servegate.config.judge import (
    JudgeConfig,
    JudgeConfigError,
    load_judge_table,
    parse_judge_table,
)
from servegate.core.paths import SUITES_DIR
from servegate.core.results import Run, RunFolderError, load_run
from servegate.judge import budget
from servegate.judge.ab import ab_accuracy_pendings, ab_pendings, arm_view, is_ab
from servegate.judge.arms import Pending
from servegate.judge.baselines import (
    BaselineError,
    baseline_path,
    ensure_matches,
    load_baseline,
    read_outcomes,
    run_identity,
    validate_baseline,
)
from servegate.judge.block_checks import block_pendings
from servegate.judge.checks import Check
from servegate.judge.claims import claim_pendings
from servegate.judge.compare import accuracy_pendings, baseline_pendings
from servegate.judge.evidence import evidence_from_baseline, evidence_from_run
from servegate.judge.family import BONFERRONI, decide
from servegate.judge.judgement import Judgement
from servegate.judge.stats import run_seed


def judge_config_for_run(run: dict[str, Any], suites_dir: Path = SUITES_DIR) -> JudgeConfig:
    """The ``[judge]`` table of the suite file that was run (recorded in run.json by bench);
    runs from before that was recorded fall back to ``suites/<suite>.toml``."""
    if "judge_table" not in run:
        if not run.get("suite"):
            return JudgeConfig()
        return load_judge_table(Path(suites_dir) / f"{run['suite']}.toml")
    source = run.get("suite_source", {}).get("path", "<unknown suite file>")
    table = run["judge_table"]
    if table is None:
        return JudgeConfig(source=f"<defaults: {source} has no [judge] table>")
    if not isinstance(table, dict):
        raise JudgeConfigError(f"run.json: judge_table must be a table (from {source})")
    return parse_judge_table(table, f"{source} (as recorded in run.json)")


BUSY_PCT = 5.0          # another process's CPU share that makes a block's timing suspect


def interference_note(points: list[dict[str, Any]]) -> str | None:
    """What else used the machine during the blocks (run.json ``machine``), beside the verdict:
    a share of the CPU taken by other processes or stolen by the hypervisor slows a server
    start by up to 4x on 2 cores."""
    busy = []
    for point in points:
        machine = point.get("machine") or {}
        other = float(machine.get("other_cpu_pct") or 0.0)
        steal = float(machine.get("cpu_steal_pct") or 0.0)
        gpu = int(machine.get("other_gpu_processes") or 0)
        if other + steal >= BUSY_PCT or gpu:
            where = f"{point.get('mode')}@c{point.get('concurrency')}"
            if "block" in point:
                where += f" s{point.get('start')} b{point.get('block')}"
            busy.append((other + steal, gpu, where))
    if not busy:
        return None
    worst = max(busy)
    gpu_text = f", other GPU processes in {sum(1 for b in busy if b[1])}" if \
        any(b[1] for b in busy) else ""
    return (f"interference: other processes or CPU steal took >= {BUSY_PCT:g} % of the CPU "
            f"during {len(busy)} of {len(points)} blocks (worst {worst[0]:.0f} % in "
            f"{worst[2]}){gpu_text}: their timings are suspect (points[*].machine)")


def error_judgement(run_dir: Path, message: str, strict: bool,
                     run: Run | None = None) -> Judgement:
    check = Check("integrity", "inputs readable", "inputs", "error", reason=message)
    return Judgement(run_dir, run, JudgeConfig(), [check], strict=strict)


def judge(run_dir: Path, *, baseline_file: Path | None = None, strict: bool = False,
          suites_dir: Path = SUITES_DIR, baselines_root: Path | None = None,
          baseline_doc: dict[str, Any] | None = None,
          measured_run_spread: bool = False) -> Judgement:
    """Load run, suite [judge] table and baseline; evaluate every check with one family size."""
    run_dir = Path(run_dir)
    try:
        run = load_run(run_dir)
    except RunFolderError as err:
        return error_judgement(run_dir, str(err), strict)
    try:
        config = judge_config_for_run(dict(run), suites_dir)
    except JudgeConfigError as err:
        return error_judgement(run_dir, str(err), strict, run)
    # The suite's seed mixed with this run's identity: resamples differ from night to night,
    # and re-judging the same run reproduces its verdict (the seed is in verdict.json).
    run_key = str(run.get("run_id") or run.get("started_at") or run_dir.name)
    config = replace(config, seed=run_seed(config.seed, run_key))
    notes = [f"judge settings from {config.source}", *config.deprecations,
             f"judge seed {config.seed} (suite seed mixed with run {run_key})"]
    if measured_run_spread:
        # a rolling baseline's nights measure the run-to-run spread (N - 1 degrees of freedom):
        # it replaces the suite's assumed run_to_run_cv instead of being pooled with it
        config = replace(config, run_to_run_cv_dof=0.0)
        notes.append("run-to-run spread measured from the baseline's nights replaces the "
                     "suite's assumed run_to_run_cv")
    in_server = bool((run.get("design") or {}).get("in_server"))
    interference = interference_note(run.get("points") or [])
    if interference:
        notes.append(interference)
    if in_server:
        design = run["design"]
        notes.append(f"design: {design.get('starts')} server start(s) x {design.get('blocks')} "
                     "block(s) per mode and concurrency, every mode inside each start; judged "
                     "on block values (20 % trimmed means, Yuen), modes paired within starts")
    if is_ab(run) and in_server:
        design = run["design"]
        how = (f"blocks paired between the two live servers ({design.get('pair_note', '')})"
               if design.get("live_pair") else
               f"each tree in its own server start(s), one after the other "
               f"({design.get('pair_note') or 'no live pair'})")
        notes.append(f"head vs base: head {run['ab']['head'].get('path')} against base "
                     f"{run['ab']['base'].get('path')}, {how}")
        pendings = block_pendings(run, evidence_from_run(dict(run)), config,
                                  extra=ab_accuracy_pendings(run, run_dir, config,
                                                             primary=not config.family))
        return _decide(run_dir, run, config, pendings, notes, strict, None, None)
    if is_ab(run):
        # head vs base, measured together: the stored baseline is not the reference; the A/B
        # claims (exact fill on vs off) are the head tree's
        notes.append(f"head vs base: head {run['ab']['head'].get('path')} "
                     f"({run['ab']['head'].get('version')}) against base "
                     f"{run['ab']['base'].get('path')} ({run['ab']['base'].get('version')})")
        pendings = ab_pendings(run, run_dir, config) + claim_pendings(arm_view(run, "head"),
                                                                      config)
        return _decide(run_dir, run, config, pendings, notes, strict, None, None)
    baseline = None
    explicit = baseline_file is not None
    if baseline_doc is not None:   # e.g. the rolling history:N baseline, built by the caller
        label = Path(str(baseline_doc.get("provenance", {}).get("source_run", "<given>")))
        try:
            baseline = validate_baseline(baseline_doc, label)
            ensure_matches(baseline, label, run, str(run_dir))
        except BaselineError as err:
            return error_judgement(run_dir, str(err), strict, run)
        notes.append(f"baseline {label}: {len(baseline.get('points', []))} points")
        baseline_file = label
    elif baseline_file is None:
        try:
            baseline_file = baseline_path(*run_identity(run), root=baselines_root)
        except BaselineError as err:
            return error_judgement(run_dir, str(err), strict, run)
    try:
        if baseline is not None:
            pass
        elif explicit or baseline_file.is_file():
            baseline = load_baseline(baseline_file)
            ensure_matches(baseline, baseline_file, run, str(run_dir))
        else:
            notes.append(f"no baseline at {baseline_file}: only in-run A/B claims judged "
                         "(store one with `servegate update-baselines RUN_DIR`)")
    except BaselineError as err:
        return error_judgement(run_dir, str(err), strict, run)

    outcomes = {mode: read_outcomes(run_dir, mode)
                for mode, entry in ((baseline or {}).get("accuracy") or {}).items()
                if "outcomes" in entry}
    if in_server:
        pendings = block_pendings(
            run, evidence_from_run(dict(run)), config,
            baseline=evidence_from_baseline(baseline) if baseline else None,
            extra=accuracy_pendings(run, baseline, config, outcomes,
                                     primary=not config.family) if baseline else [])
        return _decide(run_dir, run, config, pendings, notes, strict,
                       baseline_file if baseline else None, baseline)
    pendings = baseline_pendings(run, baseline, config, outcomes) if baseline else []
    pendings += claim_pendings(run, config)
    return _decide(run_dir, run, config, pendings, notes, strict,
                   baseline_file if baseline else None, baseline)


def _decide(run_dir: Path, run: Run, config: JudgeConfig, pendings: list[Pending],
            notes: list[str], strict: bool, baseline_file: Path | None,
            baseline: dict[str, Any] | None) -> Judgement:
    """Evaluate every pending check (the primary family at its family level, the rest
    reported at the plain level); integrity checks first."""
    method = config.family_method if config.family else BONFERRONI
    checks, family_record = decide(pendings, config.confidence, method)
    family = int(family_record["size"])  # type: ignore[call-overload]
    confidence = 1.0 - (1.0 - config.confidence) / max(1, family)
    if run.get("complete") is not True:
        cause = run.get("error") or "not every planned point finished"
        checks.insert(0, Check("integrity", "run complete", "complete", "error",
                               reason=f"run is incomplete: {cause}"))
    if not run.get("points"):
        checks.insert(0, Check("integrity", "run has points", "points", "error",
                               reason="run.json has no points"))
    if method == BONFERRONI:
        notes.append(f"{family} checks judged together: each interval at "
                     f"{100 * confidence:.3f}% (Bonferroni for a family-wise "
                     f"{100 * config.confidence:.0f}%)")
    else:
        reported = sum(1 for c in checks if not c.primary and c.kind != "integrity")
        notes.append(f"gated family of {family} checks (Holm step-down, family-wise "
                     f"{100 * config.confidence:.0f}%, suite [judge] family = "
                     f"{list(config.family)}); {reported} more reported at "
                     f"{100 * config.confidence:.0f}%, not gating")
    plans = [plan for plan in (budget.plan_for(c, dict(run))
                               for c in checks if c.primary and c.gate
                               and c.verdict == "inconclusive") if plan is not None]
    return Judgement(run_dir, run, config, checks, baseline_file, baseline, family, confidence,
                     notes, strict, family=family_record, budget=plans,
                     budget_text=budget.budget_text(plans))
