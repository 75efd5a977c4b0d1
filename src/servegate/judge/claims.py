"""A/B claims judged inside one run (same machine, interleaved repeats), by runner class.

- gated classes (architecture gfx95, :mod:`servegate.core.runner_classes`): ``on`` vs ``off`` TTFT at high
  concurrency improves by at least the suite's stated amount (the whole interval must clear
  it), and GSM8K is non-inferior within a margin (paired).
- every other runner: ``on`` is an exact no-op — the prefill-batch token sequence equals ``off``'s,
  exact fill was not effective, and metrics are *equivalent* within a margin (TOST), which is a
  stronger statement than "no significant difference".
- ``forced`` vs ``off`` anywhere: an experiment (effect with interval), never a gate.
"""

from __future__ import annotations

import math
from typing import Any

from scipy import stats as sps

from servegate.config.judge import JudgeConfig
from servegate.core.results import Run
from servegate.core.runner_classes import REGISTRY
from servegate.judge.arms import Arm, NotJudgeable, Pending, arm_from_points, ratio_interval
from servegate.judge.baselines import group_points, run_identity
from servegate.judge.checks import Check
from servegate.judge.stats import (
    Interval,
    direction,
    equivalence,
    improvement,
    newcombe_difference,
    noninferiority,
    paired_difference,
    t_quantile,
    tost_confidence,
    tost_power,
    verdict,
)


def _concurrencies(groups: dict[tuple[str, int], list[dict[str, Any]]], a: str,
                   b: str) -> list[int]:
    return sorted({c for (m, c) in groups if m == a} & {c for (m, c) in groups if m == b})


def _ratio_check(check: Check, current: Arm, reference: Arm, config: JudgeConfig,
                 confidence: float) -> bool:
    """Fill ``check.interval``; on missing data set an inconclusive/error reason, return False."""
    try:
        check.interval = ratio_interval(current, reference, check.metric, config=config,
                                        confidence=confidence, key=check.name, paired=True)
    except NotJudgeable as err:
        check.verdict, check.reason = "inconclusive", str(err)
        return False
    except ValueError as err:
        check.verdict, check.reason = "error", str(err)
        return False
    return True


# ---------------------------------------------------------------------------------------- gfx95

def _ttft_claim(groups: dict[tuple[str, int], list[dict[str, Any]]],
                config: JudgeConfig) -> Pending:
    metric = config.gated_ttft_metric
    required = config.gated_min_ttft_improvement
    concs = _concurrencies(groups, "on", "off")
    conc = config.gated_claim_concurrency or (concs[-1] if concs else None)
    name = f"claim: on vs off {metric} at c{conc} improves >= {100 * required:.1f}%"

    def evaluate(confidence: float) -> Check:
        check = Check("claim", name, metric, "inconclusive", mode="on", concurrency=conc,
                      reference="off", floor=required, boundaries=(1.0 - required,))
        if conc is None or ("on", conc) not in groups or ("off", conc) not in groups:
            check.verdict = "error"
            check.reason = f"run has no on and off points at concurrency {conc}"
            return check
        on = arm_from_points(f"on@c{conc}", groups[("on", conc)])
        off = arm_from_points(f"off@c{conc}", groups[("off", conc)])
        check.current_value, check.reference_value = on.mean(metric), off.mean(metric)
        if not _ratio_check(check, on, off, config, confidence):
            return check
        target = 1.0 - required
        assert check.interval is not None
        check.verdict = improvement(check.interval, target)
        check.reason = {
            "pass": f"whole interval at or below {target:.3f}",
            "regression": f"improvement demonstrably smaller than the stated {100 * required:.1f}%",
        }.get(check.verdict, f"interval straddles the stated ratio {target:.3f}")
        return check

    return Pending(name, True, evaluate)


def _paired_accuracy_interval(paired: dict[str, Any], confidence: float) -> Interval | None:
    """on - off accuracy interval from the accuracy step's paired cell counts."""
    cells = [paired.get(k) for k in ("both_correct", "a_only", "b_only", "both_wrong")]
    if all(isinstance(c, int) for c in cells) and sum(cells) > 0:
        return paired_difference(*cells, confidence=confidence)
    if all(isinstance(paired.get(k), (int, float)) for k in ("diff", "diff_low", "diff_high")):
        # only a recorded interval: its standard error, re-used at the family's level (a 95 %
        # interval would skip Bonferroni)
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


def _accuracy_claim(run: Run, config: JudgeConfig) -> Pending:
    margin = config.accuracy_noninferiority_margin
    name = f"claim: on vs off GSM8K non-inferior within {100 * margin:.1f} pp"

    def evaluate(confidence: float) -> Check:
        check = Check("claim", name, "accuracy", "inconclusive", mode="on", reference="off",
                      floor=margin)
        paired = (run.get("paired_accuracy") or {}).get("on_vs_off")
        accuracy = run.get("accuracy") or {}
        interval = _paired_accuracy_interval(paired, confidence) if paired else None
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
        if "on" in accuracy and accuracy["on"].get("n"):
            check.current_value = accuracy["on"]["correct"] / accuracy["on"]["n"]
        if "off" in accuracy and accuracy["off"].get("n"):
            check.reference_value = accuracy["off"]["correct"] / accuracy["off"]["n"]
        check.verdict = noninferiority(interval, margin)
        return check

    return Pending(name, True, evaluate)


# ------------------------------------------------------------------------------------ non-gfx95

def _first_difference(a: list[int], b: list[int]) -> str:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"batch {i}: off={x} on={y}"
    return f"lengths differ: off has {len(a)} batches, on has {len(b)}"


def _aligned_counts(points: list[dict[str, Any]]) -> tuple[int, int]:
    """(saturated prefill batches exactly at the chunk, saturated batches) over ``points``."""
    aligned = saturated = 0
    for point in points:
        alignment = point.get("alignment") or {}
        n = int(alignment.get("saturated_batches") or 0)
        saturated += n
        aligned += round(float(alignment.get("aligned_fraction") or 0.0) * n)
    return aligned, saturated


def _prefill_distribution(groups: dict[tuple[str, int], list[dict[str, Any]]],
                          conc: int) -> Pending:
    """The no-op at the server level, robust to arrival timing.

    Gating evidence: (1) the gate read back from every server process (``exact_fill_effective``,
    which bench refuses to record when processes disagree) must be off for every ``on`` point;
    (2) ``on``'s saturated prefill batches must not be aligned at the chunk more often than
    ``off``'s (one-sided Fisher exact test at the family level: exact fill leaking would align
    them all). At concurrency > 1 the batch make-up depends on arrival timing, so the batch
    sequences and their size distributions are compared too but only reported; the exact
    admission-level identity is ``servegate preflight``'s and ``admission``'s job."""
    name = f"no-op: on@c{conc} prefill batches not aligned beyond off (exact fill inactive)"

    def evaluate(confidence: float) -> Check:
        check = Check("claim", name, "aligned_fraction", "pass", mode="on", concurrency=conc,
                      reference="off")
        off, on = groups[("off", conc)], groups[("on", conc)]
        effective = [p["repeat"] for p in on if p.get("exact_fill_effective")]
        if effective:
            check.verdict = "regression"
            check.reason = f"exact fill read back effective on this runner (repeats {effective})"
            return check
        return aligned_beyond_off(check, on, off, confidence)

    return Pending(name, True, evaluate)


def aligned_beyond_off(check: Check, on: list[dict[str, Any]], off: list[dict[str, Any]],
                       confidence: float) -> Check:
    """Decide the no-op's prefill test on ``check``: ``on``'s saturated batches aligned at the
    chunk more often than ``off``'s (one-sided Fisher exact test at ``1 - confidence``) is a
    regression; no saturated batch on either side is inconclusive. Sets ``p_value``."""
    (a_on, n_on), (a_off, n_off) = _aligned_counts(on), _aligned_counts(off)
    info = _sequence_note(off, on)
    if n_on == 0 or n_off == 0:
        check.verdict = "inconclusive"
        check.reason = f"no saturated prefill batches to compare (on {n_on}, off {n_off}); {info}"
        check.p_value = 1.0
        return check
    check.current_value, check.reference_value = a_on / n_on, a_off / n_off
    p_value = float(sps.fisher_exact([[a_on, n_on - a_on], [a_off, n_off - a_off]],
                                     alternative="greater").pvalue)
    check.p_value = p_value
    summary = (f"aligned on {a_on}/{n_on} vs off {a_off}/{n_off} saturated batches "
               f"(one-sided Fisher p={p_value:.3g}, alpha {1 - confidence:.3g})")
    if p_value < 1 - confidence:
        check.verdict = "regression"
        check.reason = f"{summary}: on aligns more than off - exact fill leaked?; {info}"
    else:
        check.reason = f"{summary}; {info}"
    return check


def _sequence_note(off: list[dict[str, Any]], on: list[dict[str, Any]]) -> str:
    """Reported only: identical batch sequences per repeat, and a KS test of the batch sizes."""
    off_by, on_by = {p["repeat"]: p for p in off}, {p["repeat"]: p for p in on}
    same, compared, first = 0, 0, ""
    sizes_off: list[int] = []
    sizes_on: list[int] = []
    for repeat in sorted(set(off_by) & set(on_by)):
        a = (off_by[repeat].get("alignment") or {}).get("prefill_tokens")
        b = (on_by[repeat].get("alignment") or {}).get("prefill_tokens")
        if not isinstance(a, list) or not isinstance(b, list):
            continue
        compared += 1
        sizes_off += a
        sizes_on += b
        if a == b:
            same += 1
        elif not first:
            first = f" (repeat {repeat}: {_first_difference(a, b)})"
    if compared == 0:
        return "no prefill-batch sequences recorded"
    note = f"batch sequences identical in {same}/{compared} repeat(s){first}"
    if sizes_off and sizes_on and sizes_off != sizes_on:
        note += f"; size distributions KS p={float(sps.ks_2samp(sizes_on, sizes_off).pvalue):.3g}"
    return note


def _noop_equivalence(groups: dict[tuple[str, int], list[dict[str, Any]]], conc: int,
                      metric: str, config: JudgeConfig) -> Pending:
    name = f"no-op: on@c{conc} {metric} equivalent to off within ±{100 * config.noop_margin:.1f}%"

    def evaluate(confidence: float) -> Check:
        margin = config.noop_margin
        check = Check("claim", name, metric, "inconclusive", mode="on", concurrency=conc,
                      reference="off", floor=margin, boundaries=(1.0 - margin, 1.0 + margin))
        on = arm_from_points(f"on@c{conc}", groups[("on", conc)])
        off = arm_from_points(f"off@c{conc}", groups[("off", conc)])
        check.current_value, check.reference_value = on.mean(metric), off.mean(metric)
        level = tost_confidence(confidence)
        if _ratio_check(check, on, off, config, level):
            iv = check.interval
            assert iv is not None
            check.verdict = equivalence(iv, margin)
            check.reason = "TOST equivalence" + (
                ": demonstrably outside the margin" if check.verdict == "regression" else "")
            # The rule: the TOST gates only when it could show equivalence of identical arms
            # with adequate power at this margin; an underpowered TOST only reports.
            power = float(tost_power(iv.standard_error(), iv.df, level, margin))
            if power < config.noop_min_power:
                check.gate = False
                check.reason += (f"; reported, not gating: TOST power {100 * power:.0f}% < "
                                 f"{100 * config.noop_min_power:.0f}% at +-{100 * margin:.1f}%")
        return check

    return Pending(name, True, evaluate)


def _experiment(groups: dict[tuple[str, int], list[dict[str, Any]]], conc: int, metric: str,
                config: JudgeConfig) -> Pending:
    name = f"experiment: forced@c{conc} {metric} vs off"

    def evaluate(_confidence: float) -> Check:
        check = Check("experiment", name, metric, "inconclusive", gate=False, mode="forced",
                      concurrency=conc, reference="off", floor=config.floor(metric))
        forced = arm_from_points(f"forced@c{conc}", groups[("forced", conc)])
        off = arm_from_points(f"off@c{conc}", groups[("off", conc)])
        check.current_value, check.reference_value = forced.mean(metric), off.mean(metric)
        if _ratio_check(check, forced, off, config, config.confidence):
            assert check.interval is not None
            check.verdict = verdict(check.interval, direction(metric), config.floor(metric))
        return check

    return Pending(name, False, evaluate)


def claim_pendings(run: Run, config: JudgeConfig) -> list[Pending]:
    """The A/B claims that apply to this run's runner class (plus forced experiments)."""
    groups = group_points(run)
    runner = run_identity(run)[0]
    pendings: list[Pending] = []
    # Where the architecture has sglang's gate on (gfx95), `on` must show the improvement;
    # elsewhere (an unregistered class included) it must be a no-op.
    if runner in REGISTRY and REGISTRY[runner].gated:
        if _concurrencies(groups, "on", "off"):
            pendings.append(_ttft_claim(groups, config))
            pendings.append(_accuracy_claim(run, config))   # inconclusive when GSM8K was skipped
    else:
        for conc in _concurrencies(groups, "on", "off"):
            pendings.append(_prefill_distribution(groups, conc))
            for metric in config.noop_metrics or config.metrics:
                pendings.append(_noop_equivalence(groups, conc, metric, config))
    for conc in _concurrencies(groups, "forced", "off"):
        for metric in config.experiment_metrics or config.metrics:
            pendings.append(_experiment(groups, conc, metric, config))
    return pendings
