"""Judge one run folder: its suite's [judge] table, its baseline and its A/B claims, on block
values (:mod:`servegate.judge.block_checks`; a run from before ``[design]`` reads each repeat as
one block of its own start). The gated family is decided together: Holm's step-down when the
suite names its ``[judge] family``, else Bonferroni over every counted check. Pure decision:
nothing is written (the report writers and ``servegate compare`` do that)."""

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
from servegate.core import hardware
from servegate.core.paths import SUITES_DIR
from servegate.core.results import Run, RunFolderError, load_run
from servegate.judge import budget, sequential
from servegate.judge.ab import is_ab
from servegate.judge.accuracy_checks import (
    baseline_accuracy_pendings,
    head_vs_base_accuracy_pendings,
)
from servegate.judge.baselines import (
    BaselineError,
    ensure_matches,
    is_cpu_tier,
    load_baseline,
    read_outcomes,
    stored_baseline_path,
    upgrade_baseline,
)
from servegate.judge.block_checks import block_pendings
from servegate.judge.checks import Check
from servegate.judge.evidence import evidence_from_baseline, evidence_from_run
from servegate.judge.family import BONFERRONI, decide
from servegate.judge.judgement import Judgement
from servegate.judge.pending import Pending
from servegate.judge.priors import PriorSource
from servegate.judge.stats import run_seed
from servegate.measure.interference import interference_note


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


def error_judgement(run_dir: Path, message: str, strict: bool,
                     run: Run | None = None) -> Judgement:
    check = Check("integrity", "inputs readable", "inputs", "error", reason=message)
    return Judgement(run_dir, run, JudgeConfig(), [check], strict=strict)


def judge(run_dir: Path, *, run: Run | None = None, baseline_file: Path | None = None,
          strict: bool = False,
          suites_dir: Path = SUITES_DIR, baselines_root: Path | None = None,
          baseline_doc: dict[str, Any] | None = None,
          measured_run_spread: bool = False, at_blocks: int | None = None,
          priors: PriorSource | None = None) -> Judgement:
    """Load run (unless given), suite [judge] table and baseline; evaluate every check with one
    family size. ``priors``: the runner's learned noise profile (servegate.history.profile),
    used level by level in place of the suite's figures once worth more dof. A design with
    ``looks`` is judged at a look (:mod:`servegate.judge.sequential`): ``at_blocks`` per start
    (bench's interim looks), else where the run stopped, else the final one, at its level."""
    run_dir = Path(run_dir)
    try:
        run = load_run(run_dir) if run is None else run
    except RunFolderError as err:
        return error_judgement(run_dir, str(err), strict)
    try:
        config = judge_config_for_run(dict(run), suites_dir)
    except JudgeConfigError as err:
        return error_judgement(run_dir, str(err), strict, run)
    # The suite's seed mixed with this run's identity, recorded in verdict.json (the block
    # judge draws nothing at random: re-judging a run reproduces its verdict).
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
    design = run.get("design") or {}
    try:
        look = sequential.look_at(dict(design), 1.0 - config.confidence,
                                  at_blocks if at_blocks is not None
                                  else sequential.stopped_at(dict(run)))
    except ValueError as err:
        return error_judgement(run_dir, f"run.json design: {err}", strict, run)
    late_notes = []                     # after the notes a reader needs first
    if look is not None:
        run = sequential.at_look(run, look)
        config = replace(config, confidence=1.0 - look.level)
        late_notes.append(look.note())
    interference = interference_note(run.get("points") or [])
    if interference:
        notes.append(interference)
    notes.append(design_note(design))
    evidence = evidence_from_run(dict(run))
    if is_ab(run):
        notes.append(head_vs_base_note(run))
        notes.extend(late_notes)
        pendings = block_pendings(
            run, evidence, config,
            extra=head_vs_base_accuracy_pendings(run, run_dir, config,
                                                 primary=not config.family), priors=priors)
        return _decide(run_dir, run, config, pendings, notes, strict, None, None, priors)
    try:
        baseline, baseline_file, refused = _baseline(run, run_dir, notes, baseline_file,
                                                     baseline_doc, baselines_root)
    except BaselineError as err:
        return error_judgement(run_dir, str(err), strict, run)
    extra: list[Pending] = []
    if baseline:
        outcomes = {mode: read_outcomes(run_dir, mode)
                    for mode, entry in (baseline.get("accuracy") or {}).items()
                    if "outcomes" in entry}
        extra = baseline_accuracy_pendings(run, baseline, config, outcomes,
                                           primary=not config.family)
    notes.extend(late_notes)
    pendings = block_pendings(
        run, evidence, config,
        baseline=evidence_from_baseline(baseline) if baseline else None, extra=extra,
        priors=priors)
    judgement = _decide(run_dir, run, config, pendings, notes, strict,
                        baseline_file if baseline else None, baseline, priors)
    judgement.reference = refused
    return judgement


def design_note(design: dict[str, Any]) -> str:
    """How the run's blocks sit (runs from before ``[design]``: a server start per mode and
    repeat, read as one block per start)."""
    if design.get("in_server"):
        return (f"design: {design.get('starts')} server start(s) x {design.get('blocks')} "
                "block(s) per mode and concurrency, every mode inside each start; judged on "
                "block values (20 % trimmed means, Yuen), modes paired within starts")
    return ("design: a server start per mode and repeat (a run from before [design]): each "
            "repeat read as one block of its own start; modes compared across their own starts "
            "(two start levels, run_to_run_cv)")


def head_vs_base_note(run: Run) -> str:
    design = run.get("design") or {}
    head, base = run["ab"]["head"], run["ab"]["base"]
    if design.get("live_pair"):
        how = f"blocks paired between the two live servers ({design.get('pair_note', '')})"
    elif design.get("in_server"):
        how = (f"each tree in its own server start(s), one after the other "
               f"({design.get('pair_note') or 'no live pair'})")
    else:
        how = "each tree and mode in its own server start (a run from before [design])"
    return (f"head vs base: head {head.get('path')} ({head.get('version')}) against base "
            f"{base.get('path')} ({base.get('version')}), {how}")


def _baseline(run: Run, run_dir: Path, notes: list[str], baseline_file: Path | None,
              baseline_doc: dict[str, Any] | None, baselines_root: Path | None
              ) -> tuple[dict[str, Any] | None, Path | None, str | None]:
    """(the baseline judged against, its label, the one line naming one not judged against):
    a document (e.g. the rolling ``history:N``), a file, or the stored one (on the CPU tier
    this machine's own first); None when none is stored or it is of other hardware (then only
    the in-run claims are judged). Unknown hardware is judged, noted, unless a stored file on
    the CPU tier: there it must be known to be this machine's. Raises BaselineError."""
    if baseline_doc is not None:
        label = Path(str(baseline_doc.get("provenance", {}).get("source_run", "<given>")))
        baseline = upgrade_baseline(baseline_doc, label)
        notes.append(f"baseline {label}: {len(baseline.get('points', []))} points")
    else:
        label = baseline_file or stored_baseline_path(run, root=baselines_root)
        if baseline_file is None and not label.is_file():
            notes.append(f"no baseline at {label}: only in-run A/B claims judged "
                         "(store one with `servegate update-baselines RUN_DIR`)")
            return None, label, None
        baseline = load_baseline(label)
    ensure_matches(baseline, label, run, str(run_dir))
    current = run.get("fingerprint") or {}
    status, text = hardware.compare(baseline["provenance"].get("fingerprint"), current)
    if status == "other" or (status == "unknown" and baseline_doc is None
                             and is_cpu_tier(run) and hardware.of(current) is not None):
        notes.append(f"baseline {label} not judged against, {text}")
        return None, label, notes[-1]
    if status == "unknown":
        notes.append(f"baseline {label}: {text}; judged as comparable")
    return baseline, label, None


def prior_notes(checks: list[Check]) -> list[str]:
    """Gated claims and head vs base checks whose interval rests on a prior, or whose run refuted
    it, say so first, naming the prior (a runner's first nights: the typed figure); one a prior."""
    rests: dict[str, list[str]] = {}
    notes = []
    for check in checks:
        prior = (check.noise or {}).get("prior")
        if not (check.primary and check.gate and check.kind in ("claim", "ab") and prior):
            continue
        if prior["refuted"]:
            notes.append(f"{check.name}: this run's starts refute its prior {prior['text']}; "
                         "the interval is the run's own measurement")
        elif prior["rests_on_it"]:
            where = "" if prior["learned"] else (
                " (a typed figure: a history store's nights would replace it)")
            rests.setdefault(f"{prior['text']}{where}", []).append(check.name)
    return [f"{'; '.join(names)}: rests on the prior {text}" for text, names in rests.items()
            ] + notes


def _decide(run_dir: Path, run: Run, config: JudgeConfig, pendings: list[Pending],
            notes: list[str], strict: bool, baseline_file: Path | None,
            baseline: dict[str, Any] | None, priors: PriorSource | None = None) -> Judgement:
    """Evaluate every pending check (the primary family at its family level, the rest
    reported at the plain level); integrity checks first."""
    method = config.family_method if config.family else BONFERRONI
    checks, family_record = decide(pendings, config.confidence, method)
    notes[:0] = prior_notes(checks)
    if priors is not None:          # the levels the checks consulted, and nights left out
        notes.extend(priors.notes())
    family = int(family_record["size"])  # type: ignore[call-overload]
    # the level actually used: Bonferroni's one level, or Holm's strictest step
    levels = list(family_record["levels"].values())  # type: ignore[attr-defined]
    confidence = max(levels) if levels else config.confidence
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
