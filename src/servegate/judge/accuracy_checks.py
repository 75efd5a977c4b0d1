"""GSM8K checks, all on the difference in accuracy points: ``on`` non-inferior to ``off`` (the
gated claim on a gated runner class), each mode against its baseline, and head against base.
Paired per question wherever both sides recorded per-question outcomes (only discordant
questions carry the difference); the unpaired Newcombe interval otherwise."""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path
from typing import Any

from servegate.accuracy.report import RecordsError, paired_analysis
from servegate.config.judge import JudgeConfig
from servegate.core.results import MODES, Run
from servegate.judge.baselines import decode_outcomes
from servegate.judge.checks import Check
from servegate.judge.pending import Pending
from servegate.judge.stats import (
    Interval,
    newcombe_difference,
    noninferiority,
    paired_difference,
    resolution,
    t_quantile,
    verdict,
)


def paired_accuracy_interval(paired: dict[str, Any], confidence: float) -> Interval | None:
    """on - off accuracy interval from the accuracy step's paired cell counts."""
    cells = [paired.get(k) for k in ("both_correct", "a_only", "b_only", "both_wrong")]
    if all(isinstance(c, int) for c in cells) and sum(cells) > 0:
        return paired_difference(*cells, confidence=confidence)
    if all(isinstance(paired.get(k), (int, float)) for k in ("diff", "diff_low", "diff_high")):
        # only a recorded interval: its standard error, re-used at the family's level (a 95 %
        # interval would skip the family's correction)
        n = int(paired.get("n", 0))
        recorded = float(paired.get("confidence", 0.95))
        se = (float(paired["diff_high"]) - float(paired["diff_low"])) / (
            2 * float(t_quantile(recorded, math.inf)))
        z = float(t_quantile(confidence, math.inf))
        diff = float(paired["diff"])
        return Interval(diff, diff - z * se, diff + z * se, confidence,
                        f"paired (recorded at {100 * recorded:g}%, rescaled)", n, n,
                        scale="difference", se=se)
    return None


def claim_name(config: JudgeConfig) -> str:
    """The accuracy claim's name (listed before its level is known)."""
    return (f"claim: on vs off GSM8K non-inferior within "
            f"{100 * config.accuracy_noninferiority_margin:.1f} pp")


def accuracy_claim(run: Run, config: JudgeConfig, confidence: float) -> Check:
    """``on`` vs ``off`` GSM8K non-inferior within the suite's margin (paired per question)."""
    margin = config.accuracy_noninferiority_margin
    check = Check("claim", claim_name(config), "accuracy", "inconclusive", mode="on", reference="off",
                  floor=margin, claim="accuracy")
    paired = (run.get("paired_accuracy") or {}).get("on_vs_off")
    accuracy = run.get("accuracy") or {}
    interval = paired_accuracy_interval(paired, confidence) if paired else None
    if interval is None and "on" in accuracy and "off" in accuracy:
        on, off = accuracy["on"], accuracy["off"]
        if on.get("n") and off.get("n"):
            interval = newcombe_difference(int(on["correct"]), int(on["n"]),
                                           int(off["correct"]), int(off["n"]), confidence)
            check.reason = "unpaired fallback (no paired_accuracy.on_vs_off)"
    if interval is None:
        check.reason = "no GSM8K results for on and off in this run"
        return check
    check.interval = interval
    for mode, attr in (("on", "current_value"), ("off", "reference_value")):
        if mode in accuracy and accuracy[mode].get("n"):
            setattr(check, attr, accuracy[mode]["correct"] / accuracy[mode]["n"])
    check.resolution = float(resolution(interval.standard_error(), interval.df,
                                        interval.confidence, margin, "difference"))
    check.verdict = noninferiority(interval, margin, check.resolution)
    if check.by_resolution:
        check.reason = f"no loss > {100 * check.resolution:.1f} pp (this design's resolution)" + (
            f"; {check.reason}" if check.reason else "")
    return check


def _versus_baseline(mode: str, current: dict[str, Any], reference: dict[str, Any],
                     config: JudgeConfig, outcomes: dict[int, bool] | None,
                     confidence: float) -> Check:
    check = Check("accuracy", f"{mode} GSM8K accuracy vs baseline", "accuracy", "inconclusive",
                  mode=mode, floor=config.accuracy_floor)
    n_cur, c_cur = current.get("n"), current.get("correct")
    if not isinstance(n_cur, int) or not isinstance(c_cur, int) or n_cur <= 0:
        check.verdict = "error"
        check.reason = f"run.json accuracy.{mode}: needs integer n > 0 and correct"
        return check
    check.current_value = c_cur / n_cur
    check.reference_value = reference["correct"] / reference["n"]
    base = decode_outcomes(reference["outcomes"]) if "outcomes" in reference else None
    common = sorted(set(base) & set(outcomes)) if base and outcomes else []
    if base is not None and outcomes and common:
        pairs = [(outcomes[i], base[i]) for i in common]
        both, cur_only = pairs.count((True, True)), pairs.count((True, False))
        base_only = pairs.count((False, True))
        cells = (both, cur_only, base_only, len(pairs) - both - cur_only - base_only)
        check.interval = paired_difference(*cells, confidence=confidence)
        check.current_value = (both + cur_only) / len(common)
        check.reference_value = (both + base_only) / len(common)
        check.reason = (f"paired on {len(common)} common questions "
                        f"({cur_only + base_only} discordant); accuracy points")
        if len(common) < max(n_cur, reference["n"]):
            check.reason += f" (of {n_cur} in the run, {reference['n']} in the baseline)"
    else:
        check.interval = newcombe_difference(c_cur, n_cur, reference["correct"],
                                             reference["n"], confidence)
        why = ("the baseline stores no per-question outcomes" if base is None else
               "the run has no gsm8k records to pair" if not outcomes else
               "no question ids in common")
        check.reason = f"unpaired ({why}); difference in accuracy points"
    check.verdict = verdict(check.interval, "higher", config.accuracy_floor)
    return check


def baseline_accuracy_pendings(run: Run, baseline: dict[str, Any], config: JudgeConfig,
                               outcomes: dict[str, dict[int, bool] | None] | None = None,
                               primary: bool = True) -> list[Pending]:
    """GSM8K accuracy per mode against the baseline (paired per question where both sides
    stored outcomes: ``outcomes`` is the run's per-question correctness per mode)."""
    pendings: list[Pending] = []
    run_accuracy = run.get("accuracy") or {}
    for mode, reference in sorted((baseline.get("accuracy") or {}).items()):
        if mode in run_accuracy and reference.get("n"):
            evaluate = partial(_versus_baseline, mode, dict(run_accuracy[mode]), reference,
                               config, (outcomes or {}).get(mode))
            pendings.append(Pending(f"{mode} GSM8K accuracy vs baseline", True, evaluate,
                                    primary=primary))
    return pendings


def _head_vs_base_name(mode: str, config: JudgeConfig) -> str:
    return (f"{mode} GSM8K head vs base (paired, non-inferior within "
            f"{100 * config.accuracy_floor:.1f} pp)")


def _head_vs_base(run_dir: Path, mode: str, config: JudgeConfig, confidence: float) -> Check:
    margin = config.accuracy_floor
    check = partial(Check, "accuracy", _head_vs_base_name(mode, config), "accuracy", mode=mode,
                    reference="base", floor=margin)
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


def head_vs_base_accuracy_pendings(run: Run, run_dir: Path, config: JudgeConfig,
                                   primary: bool = True) -> list[Pending]:
    """Per mode GSM8K of head against base, paired per question."""
    labels = set(run.get("accuracy") or {})
    return [Pending(_head_vs_base_name(mode, config), True,
                    partial(_head_vs_base, run_dir, mode, config), primary=primary)
            for mode in MODES if f"head-{mode}" in labels and f"base-{mode}" in labels]
