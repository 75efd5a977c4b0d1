"""Run vs stored baseline: one check per (mode, concurrency, metric) plus accuracy per mode."""

from __future__ import annotations

from typing import Any

from servegate.config.judge import JudgeConfig
from servegate.core.results import Run
from servegate.judge.arms import (
    NotJudgeable,
    Pending,
    arm_from_baseline,
    arm_from_points,
    ratio_interval,
)
from servegate.judge.baselines import (
    baseline_point,
    decode_outcomes,
    group_points,
    point_sort_key,
)
from servegate.judge.checks import Check
from servegate.judge.stats import direction, newcombe_difference, paired_difference, verdict


def _metric_pending(run_points: list[dict[str, Any]], base_point: dict[str, Any],
                    mode: str, concurrency: int, metric: str,
                    config: JudgeConfig) -> Pending:
    name = f"{mode}@c{concurrency} {metric} vs baseline"
    current = arm_from_points(f"run {mode}@c{concurrency}", run_points)
    reference = arm_from_baseline(base_point)
    floor = config.floor(metric)

    def evaluate(confidence: float) -> Check:
        check = Check("baseline", name, metric, "inconclusive", mode=mode,
                      concurrency=concurrency, floor=floor,
                      current_value=current.mean(metric), reference_value=reference.mean(metric))
        if not current.values(metric):
            check.verdict, check.reason = "error", f"{metric} missing from the run's points"
            return check
        try:
            check.interval = ratio_interval(current, reference, metric, config=config,
                                            confidence=confidence, key=name)
        except NotJudgeable as err:
            check.reason = str(err)
            return check
        except ValueError as err:
            check.verdict, check.reason = "error", str(err)
            return check
        check.verdict = verdict(check.interval, direction(metric), floor)
        return check

    return Pending(name, True, evaluate)


def _accuracy_pending(mode: str, current: dict[str, Any], reference: dict[str, Any],
                      config: JudgeConfig, outcomes: dict[int, bool] | None) -> Pending:
    name = f"{mode} GSM8K accuracy vs baseline"

    def evaluate(confidence: float) -> Check:
        check = Check("accuracy", name, "accuracy", "inconclusive", mode=mode,
                      floor=config.accuracy_floor)
        n_cur, c_cur = current.get("n"), current.get("correct")
        if not isinstance(n_cur, int) or not isinstance(c_cur, int) or n_cur <= 0:
            check.verdict = "error"
            check.reason = f"run.json accuracy.{mode}: needs integer n > 0 and correct"
            return check
        check.current_value = c_cur / n_cur
        check.reference_value = reference["correct"] / reference["n"]
        base = decode_outcomes(reference["outcomes"]) if "outcomes" in reference else None
        common = sorted(set(base) & set(outcomes)) if base and outcomes else []
        if base is not None and common:
            # same questions in both sittings: only the discordant ones carry the difference
            pairs = [(outcomes[i], base[i]) for i in common]     # type: ignore[index]
            both, cur_only = pairs.count((True, True)), pairs.count((True, False))
            base_only = pairs.count((False, True))
            cells = (both, cur_only, base_only, len(pairs) - both - cur_only - base_only)
            check.interval = paired_difference(*cells, confidence=confidence)
            check.current_value = (both + cur_only) / len(common)
            check.reference_value = (both + base_only) / len(common)
            check.reason = (f"paired on {len(common)} common questions "
                            f"({cur_only + base_only} discordant); accuracy points")
            if len(common) < max(n_cur, reference["n"]):
                check.reason += (f" (of {n_cur} in the run, {reference['n']} in the "
                                 "baseline)")
        else:
            check.interval = newcombe_difference(c_cur, n_cur, reference["correct"],
                                                 reference["n"], confidence)
            why = ("the baseline stores no per-question outcomes" if base is None else
                   "the run has no gsm8k records to pair" if not outcomes else
                   "no question ids in common")
            check.reason = f"unpaired ({why}); difference in accuracy points"
        check.verdict = verdict(check.interval, "higher", config.accuracy_floor)
        return check

    return Pending(name, True, evaluate)


def baseline_pendings(run: Run, baseline: dict[str, Any], config: JudgeConfig,
                      outcomes: dict[str, dict[int, bool] | None] | None = None
                      ) -> list[Pending]:
    """Every check of the run against its baseline, waiting for the family size.

    ``outcomes``: the run's per-question GSM8K correctness per mode (from ``gsm8k/<mode>.jsonl``),
    paired with the baseline's stored outcomes on the same question ids."""
    pendings: list[Pending] = []
    groups = group_points(run)
    base_keys = {(p["mode"], p["concurrency"]) for p in baseline.get("points", [])}
    for key in sorted(set(groups) | base_keys, key=point_sort_key):
        mode, concurrency = key
        base_point = baseline_point(baseline, mode, concurrency)
        if key not in groups:
            check = Check("integrity", f"{mode}@c{concurrency} present in run", "points",
                          "error", mode=mode, concurrency=concurrency,
                          reason="point is in the baseline but missing from the run")
            pendings.append(Pending(check.name, False, lambda _c, check=check: check))
            continue
        if base_point is None:
            check = Check("baseline", f"{mode}@c{concurrency} vs baseline", "points",
                          "inconclusive", gate=False, mode=mode, concurrency=concurrency,
                          reason="new point: not in the baseline (update baselines to gate it)")
            pendings.append(Pending(check.name, False, lambda _c, check=check: check))
            continue
        for metric in config.metrics:
            if metric not in base_point["metrics"]:
                check = Check("baseline", f"{mode}@c{concurrency} {metric} vs baseline", metric,
                              "inconclusive", gate=False, mode=mode, concurrency=concurrency,
                              reason="metric not in the baseline (update baselines to gate it)")
                pendings.append(Pending(check.name, False, lambda _c, check=check: check))
                continue
            pendings.append(_metric_pending(groups[key], base_point, mode, concurrency, metric,
                                            config))
    return pendings + accuracy_pendings(run, baseline, config, outcomes)


def accuracy_pendings(run: Run, baseline: dict[str, Any], config: JudgeConfig,
                      outcomes: dict[str, dict[int, bool] | None] | None = None,
                      primary: bool = True) -> list[Pending]:
    """GSM8K accuracy per mode against the baseline (paired per question where both sides
    stored outcomes)."""
    pendings: list[Pending] = []
    run_accuracy = run.get("accuracy") or {}
    for mode, reference in sorted((baseline.get("accuracy") or {}).items()):
        if mode in run_accuracy and reference.get("n"):
            pending = _accuracy_pending(mode, dict(run_accuracy[mode]), reference, config,
                                        (outcomes or {}).get(mode))
            pending.primary = primary
            pendings.append(pending)
    return pendings
