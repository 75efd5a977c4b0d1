"""Head vs base inside one run: the code under test (an sglang tree, ``head``) against its base,
measured on the same machine in the same hour, servers interleaved, the same prompts per point.

One check per (mode, concurrency, gated metric): the ratio head/base, paired by repeat when both
arms have enough repeats, with the suite's floors, as the baseline checks do; and per mode GSM8K
non-inferiority of head against base, paired per question. The A/B claims (exact fill on vs off)
are judged on the head arm alone. A point one arm lacks is an error, never a silent skip.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from servegate.accuracy.report import RecordsError, paired_analysis
from servegate.config.judge import JudgeConfig
from servegate.core.results import MODES, Run
from servegate.judge.arms import NotJudgeable, Pending, arm_from_points, ratio_interval
from servegate.judge.baselines import group_points, point_sort_key
from servegate.judge.checks import Check
from servegate.judge.stats import direction, noninferiority, paired_difference, verdict

ARMS = ("base", "head")


def is_ab(run: Run) -> bool:
    return bool(run.get("ab"))


def arm_view(run: Run, arm: str) -> Run:
    """The run as if only ``arm``'s servers had run (accuracy keyed by plain mode again)."""
    view = dict(run)
    view["points"] = [p for p in run.get("points", []) if p.get("arm") == arm]
    accuracy = run.get("accuracy") or {}
    view["accuracy"] = {label[len(arm) + 1:]: result for label, result in accuracy.items()
                        if label.startswith(f"{arm}-")}
    paired = run.get("paired_accuracy") or {}
    view["paired_accuracy"] = {
        key.replace(f"{arm}-", ""): value for key, value in paired.items()
        if key.count(f"{arm}-") == 2}
    return view  # type: ignore[return-value]


def _metric_pending(head: list[dict[str, Any]], base: list[dict[str, Any]], mode: str,
                    concurrency: int, metric: str, config: JudgeConfig) -> Pending:
    name = f"{mode}@c{concurrency} {metric} head vs base"
    current = arm_from_points(f"head {mode}@c{concurrency}", head)
    reference = arm_from_points(f"base {mode}@c{concurrency}", base)
    floor = config.floor(metric)

    def evaluate(confidence: float) -> Check:
        check = Check("ab", name, metric, "inconclusive", mode=mode, concurrency=concurrency,
                      reference="base", floor=floor, current_value=current.mean(metric),
                      reference_value=reference.mean(metric))
        try:
            check.interval = ratio_interval(current, reference, metric, config=config,
                                            confidence=confidence, key=name, paired=True)
        except NotJudgeable as err:
            check.reason = str(err)
            return check
        check.verdict = verdict(check.interval, direction(metric), floor)
        return check

    return Pending(name, True, evaluate)


def _accuracy_pending(run_dir: Path, mode: str, config: JudgeConfig) -> Pending:
    margin = config.accuracy_floor
    name = f"{mode} GSM8K head vs base (paired, non-inferior within {100 * margin:.1f} pp)"

    def evaluate(confidence: float) -> Check:
        check = partial(Check, "accuracy", name, "accuracy", mode=mode, reference="base",
                        floor=margin)
        try:
            paired = paired_analysis(run_dir, f"head-{mode}", f"base-{mode}")
        except RecordsError as err:
            return check("error", reason=str(err))
        cells = [paired[k] for k in ("both_correct", "a_only", "b_only", "both_wrong")]
        n = sum(cells)
        interval = paired_difference(*cells, confidence=confidence)
        return check(noninferiority(interval, margin), interval=interval,
                     current_value=(cells[0] + cells[1]) / n,
                     reference_value=(cells[0] + cells[2]) / n)

    return Pending(name, True, evaluate)


def ab_pendings(run: Run, run_dir: Path, config: JudgeConfig) -> list[Pending]:
    """Every head-vs-base check of a head-vs-base run, waiting for the family size."""
    head, base = group_points(arm_view(run, "head")), group_points(arm_view(run, "base"))
    pendings: list[Pending] = []
    for key in sorted(set(head) | set(base), key=point_sort_key):
        mode, conc = key
        if key not in head or key not in base:
            missing = "head" if key not in head else "base"
            check = Check("integrity", f"{mode}@c{conc} measured on both trees", "points",
                          "error", mode=mode, concurrency=conc,
                          reason=f"point missing from the {missing} arm")
            pendings.append(Pending(check.name, False, lambda _c, check=check: check))
            continue
        for metric in config.metrics:
            pendings.append(_metric_pending(head[key], base[key], mode, conc, metric, config))
    return pendings + ab_accuracy_pendings(run, run_dir, config)


def ab_accuracy_pendings(run: Run, run_dir: Path, config: JudgeConfig,
                         primary: bool = True) -> list[Pending]:
    """Per mode GSM8K of head against base, paired per question."""
    labels = set(run.get("accuracy") or {})
    pendings = [_accuracy_pending(run_dir, mode, config) for mode in MODES
                if f"head-{mode}" in labels and f"base-{mode}" in labels]
    for pending in pendings:
        pending.primary = primary
    return pendings
