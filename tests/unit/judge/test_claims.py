"""The claims of servegate.judge.claims beyond GSM8K: the gfx95 TTFT improvement, the no-op's
prefill-batch evidence (gate read-back, Fisher test on aligned counts, reported sequences) and
the forced-mode experiment. Every field of each check is pinned against values worked out here
(by hand, or by scipy as the reference implementation), not by the formulas under test (issue 15).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from judge_runs import make_run, point_mean
from scipy import stats as sps
from statsmodels.stats.proportion import confint_proportions_2indep

from servegate.config.judge import JudgeConfig
from servegate.core.results import load_run
from servegate.judge import claims, stats
from servegate.judge.baselines import group_points
from servegate.judge.claims import _paired_accuracy_interval, claim_pendings
from servegate.judge.stats import Interval, improvement, per_check_confidence


def _interval(low: float, high: float) -> Interval:
    return Interval((low + high) / 2, low, high, 0.95, "test", 10, 10)


# ------------------------------------------------------------------ the stated-improvement rule

@pytest.mark.parametrize(("low", "high", "expected"), [
    (0.80, 0.96, "pass"),               # high exactly at the target: "at or below"
    (0.80, 0.9599, "pass"),
    (0.90, 0.9601, "inconclusive"),     # straddles
    (0.96, 1.02, "inconclusive"),       # low exactly at the target is not "wholly above"
    (0.9601, 1.02, "regression"),       # improvement demonstrably smaller than 4 %
])
def test_improvement_verdict_at_its_boundaries(low: float, high: float, expected: str) -> None:
    assert improvement(_interval(low, high), 0.96) == expected


# ------------------------------------------------------------------------- gfx95 TTFT claim

def _gfx95_run(tmp_path: Path, factor: float, concurrencies: tuple[int, ...] = (4, 64),
               repeats: int = 1) -> Path:
    return make_run(tmp_path / f"gfx95-{factor}-{len(concurrencies)}", runner_class="mi355x",
                    model_profile="glm-5.2-mxfp4", concurrencies=concurrencies,
                    repeats=repeats, n_requests=200, request_cv=0.03,
                    effect=lambda m, c: factor if m == "on" else 1.0)


def test_ttft_claim_check_fields_at_the_highest_concurrency(tmp_path: Path) -> None:
    run_dir = _gfx95_run(tmp_path, 0.90, repeats=2)
    config = JudgeConfig(gated_min_ttft_improvement=0.04, run_to_run_cv=0.0)
    pending = claims._ttft_claim(group_points(load_run(run_dir)), config)
    assert pending.name == "claim: on vs off mean_ttft_ms at c64 improves >= 4.0%"
    assert pending.counts is True
    check = pending.evaluate(0.99)
    assert (check.kind, check.name, check.metric, check.mode, check.concurrency,
            check.reference, check.floor, check.boundaries, check.gate) == (
        "claim", pending.name, "mean_ttft_ms", "on", 64, "off", 0.04, (0.96,), True)
    assert check.verdict == "pass" and check.reason == "whole interval at or below 0.960"
    assert check.current_value == pytest.approx(point_mean(run_dir, "on", 64, "mean_ttft_ms"))
    assert check.reference_value == pytest.approx(
        point_mean(run_dir, "off", 64, "mean_ttft_ms"))
    assert check.interval is not None and check.interval.confidence == 0.99
    assert check.interval.high <= 0.96 and check.interval.estimate == pytest.approx(0.9, abs=0.02)


def test_ttft_claim_too_small_an_improvement_is_a_regression_saying_so(tmp_path: Path) -> None:
    run_dir = _gfx95_run(tmp_path, 0.995)
    config = JudgeConfig(gated_min_ttft_improvement=0.125, run_to_run_cv=0.0)
    check = claims._ttft_claim(group_points(load_run(run_dir)), config).evaluate(0.95)
    assert check.name == "claim: on vs off mean_ttft_ms at c64 improves >= 12.5%"
    assert check.verdict == "regression" and check.interval.low > 0.875
    assert check.reason == "improvement demonstrably smaller than the stated 12.5%"
    assert check.boundaries == (0.875,)


def test_ttft_claim_straddling_is_inconclusive_with_the_target(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "noisy", runner_class="mi355x", concurrencies=(8,),
                       n_requests=10, request_cv=0.3, seed=3,
                       effect=lambda m, c: 0.95 if m == "on" else 1.0)
    config = JudgeConfig(gated_min_ttft_improvement=0.05, run_to_run_cv=0.0)
    check = claims._ttft_claim(group_points(load_run(run_dir)), config).evaluate(0.95)
    assert check.verdict == "inconclusive"
    assert check.interval.low <= 0.95 < check.interval.high
    assert check.reason == "interval straddles the stated ratio 0.950"


def test_ttft_claim_uses_the_configured_concurrency_and_metric(tmp_path: Path) -> None:
    run_dir = _gfx95_run(tmp_path, 0.90)
    config = JudgeConfig(gated_claim_concurrency=4, gated_ttft_metric="median_ttft_ms",
                         run_to_run_cv=0.0)
    check = claims._ttft_claim(group_points(load_run(run_dir)), config).evaluate(0.95)
    assert (check.concurrency, check.metric) == (4, "median_ttft_ms")
    assert check.name == "claim: on vs off median_ttft_ms at c4 improves >= 4.0%"
    assert check.current_value == pytest.approx(point_mean(run_dir, "on", 4, "median_ttft_ms"))


@pytest.mark.parametrize("missing", ["on", "off"])
def test_ttft_claim_without_one_arm_at_the_concurrency_is_an_error(
        tmp_path: Path, missing: str) -> None:
    groups = group_points(load_run(_gfx95_run(tmp_path, 0.9)))
    del groups[(missing, 64)]
    config = JudgeConfig(gated_claim_concurrency=64)
    check = claims._ttft_claim(groups, config).evaluate(0.95)
    assert check.verdict == "error" and check.interval is None
    assert check.reason == "run has no on and off points at concurrency 64"


def test_ttft_claim_on_a_run_without_on_and_off_is_an_error_not_a_crash() -> None:
    pending = claims._ttft_claim({}, JudgeConfig())
    assert pending.name == "claim: on vs off mean_ttft_ms at cNone improves >= 4.0%"
    check = pending.evaluate(0.95)
    assert check.verdict == "error" and check.concurrency is None
    assert check.reason == "run has no on and off points at concurrency None"


# --------------------------------------------------------------- no-op: prefill batches


def _point(mode: str, repeat: int, aligned: float, saturated: int,
           tokens: list[int] | None = None, effective: bool = False) -> dict[str, Any]:
    alignment: dict[str, Any] = {"aligned_fraction": aligned, "saturated_batches": saturated}
    if tokens is not None:
        alignment["prefill_tokens"] = tokens
    return {"mode": mode, "concurrency": 4, "repeat": repeat, "alignment": alignment,
            "exact_fill_effective": effective}


def _noop(off: list[dict[str, Any]], on: list[dict[str, Any]], confidence: float) -> Any:
    pending = claims._prefill_distribution({("off", 4): off, ("on", 4): on}, 4)
    assert pending.counts is True
    assert pending.name == ("no-op: on@c4 prefill batches not aligned beyond off "
                            "(exact fill inactive)")
    return pending.evaluate(confidence)


def test_noop_check_fields() -> None:
    check = _noop([_point("off", 0, 0.0, 3)], [_point("on", 0, 0.0, 3)], 0.95)
    assert (check.kind, check.metric, check.mode, check.concurrency, check.reference,
            check.gate, check.floor, check.interval) == (
        "claim", "aligned_fraction", "on", 4, "off", True, None, None)
    assert check.verdict == "pass"
    assert (check.current_value, check.reference_value) == (0.0, 0.0)


def test_on_aligned_beyond_off_is_a_regression_at_the_family_level() -> None:
    # on 3/3 aligned, off 0/3: one-sided Fisher p = 1 / C(6, 3) = 0.05 (by hand)
    off, on = [_point("off", 0, 0.0, 3)], [_point("on", 0, 1.0, 3)]
    at_90 = _noop(off, on, 0.90)
    assert at_90.verdict == "regression"
    assert at_90.reason.startswith(
        "aligned on 3/3 vs off 0/3 saturated batches (one-sided Fisher p=0.05, alpha 0.1): "
        "on aligns more than off - exact fill leaked?; ")
    assert (at_90.current_value, at_90.reference_value) == (1.0, 0.0)
    assert at_90.p_value == pytest.approx(0.05)             # Holm's input
    at_96 = _noop(off, on, 0.96)                  # alpha 0.04 < p: not demonstrated
    assert at_96.verdict == "pass"
    assert at_96.reason.startswith(
        "aligned on 3/3 vs off 0/3 saturated batches (one-sided Fisher p=0.05, alpha 0.04); ")


def test_the_fisher_test_is_one_sided_on_aligning_more() -> None:
    # off aligning more than on is no sign of a leak: p = 1 for "on greater" (scipy reference)
    off, on = [_point("off", 0, 1.0, 3)], [_point("on", 0, 0.0, 3)]
    check = _noop(off, on, 0.5)
    reference = sps.fisher_exact([[0, 3], [3, 0]], alternative="greater").pvalue
    assert reference == pytest.approx(1.0)
    assert check.verdict == "pass" and "Fisher p=1," in check.reason


def test_the_fisher_table_counts_each_sides_unaligned_batches() -> None:
    off, on = [_point("off", 0, 1 / 3, 3)], [_point("on", 0, 1.0, 3)]      # 1/3 vs 3/3
    check = _noop(off, on, 0.5)
    reference = sps.fisher_exact([[3, 0], [1, 2]], alternative="greater").pvalue
    assert check.p_value == pytest.approx(reference) and reference < 0.5


def test_aligned_counts_sum_over_repeats_with_rounding_and_missing_fields() -> None:
    # 1/3 of 3 batches -> 1 aligned; missing fraction -> none aligned; missing count -> none
    points = [_point("on", 0, 1 / 3, 3), {"alignment": {"saturated_batches": 4}},
              {"alignment": {"aligned_fraction": 1.0}}, {}]
    assert claims._aligned_counts(points) == (1, 7)


def test_exact_fill_read_back_effective_on_this_runner_is_a_regression() -> None:
    off = [_point("off", 0, 0.0, 3), _point("off", 1, 0.0, 3)]
    on = [_point("on", 0, 0.0, 3), _point("on", 1, 0.0, 3, effective=True)]
    check = _noop(off, on, 0.95)
    assert check.verdict == "regression"
    assert check.reason == "exact fill read back effective on this runner (repeats [1])"


@pytest.mark.parametrize(("n_off", "n_on"), [(0, 3), (3, 0), (0, 0)])
def test_no_saturated_batches_on_either_side_is_inconclusive(n_off: int, n_on: int) -> None:
    check = _noop([_point("off", 0, 0.0, n_off, [10])], [_point("on", 0, 0.0, n_on, [10])],
                  0.95)
    assert check.verdict == "inconclusive" and check.p_value == 1.0    # never decides
    assert check.reason == (f"no saturated prefill batches to compare (on {n_on}, off {n_off}); "
                            "batch sequences identical in 1/1 repeat(s)")


def test_a_single_saturated_batch_per_side_is_judged() -> None:
    check = _noop([_point("off", 0, 0.0, 1)], [_point("on", 0, 0.0, 1)], 0.95)
    assert check.verdict == "pass" and "aligned on 0/1 vs off 0/1" in check.reason


# --------------------------------------------------------------- no-op: reported sequences

def test_sequence_note_identical_sequences() -> None:
    off = [_point("off", r, 0, 2, [256, 44]) for r in (0, 1)]
    on = [_point("on", r, 0, 2, [256, 44]) for r in (1, 0)]
    assert claims._sequence_note(off, on) == "batch sequences identical in 2/2 repeat(s)"


def test_sequence_note_names_the_first_difference_and_tests_the_sizes() -> None:
    off = [_point("off", 0, 0, 0, [256, 44]), _point("off", 1, 0, 0, [256, 236, 64]),
           _point("off", 2, 0, 0, [256, 100])]
    on = [_point("on", 0, 0, 0, [256, 44]), _point("on", 1, 0, 0, [256, 256, 44]),
          _point("on", 2, 0, 0, [256, 90])]
    p_value = sps.ks_2samp([256, 44, 256, 256, 44, 256, 90],
                           [256, 44, 256, 236, 64, 256, 100]).pvalue
    assert claims._sequence_note(off, on) == (
        "batch sequences identical in 1/3 repeat(s) (repeat 1: batch 1: off=236 on=256); "
        f"size distributions KS p={p_value:.3g}")


def test_sequence_note_a_shorter_sequence_differs_by_length() -> None:
    off = [_point("off", 0, 0, 0, [256, 256, 44])]
    on = [_point("on", 0, 0, 0, [256, 256])]
    note = claims._sequence_note(off, on)
    assert note.startswith("batch sequences identical in 0/1 repeat(s) (repeat 0: lengths "
                           "differ: off has 3 batches, on has 2); size distributions KS p=")


def test_sequence_note_only_compares_repeats_with_sequences_on_both_sides() -> None:
    off = [_point("off", 0, 0, 0, [256]), _point("off", 1, 0, 0, [256]),
           _point("off", 2, 0, 0, None)]
    on = [_point("on", 0, 0, 0, [256]), _point("on", 2, 0, 0, [1]), _point("on", 3, 0, 0, [2])]
    assert claims._sequence_note(off, on) == "batch sequences identical in 1/1 repeat(s)"
    assert claims._sequence_note([_point("off", 0, 0, 0, None)], [_point("on", 0, 0, 0, [1])]) \
        == "no prefill-batch sequences recorded"
    assert claims._sequence_note([], []) == "no prefill-batch sequences recorded"


def test_first_difference() -> None:
    assert claims._first_difference([1, 2, 3], [1, 5, 3]) == "batch 1: off=2 on=5"
    assert claims._first_difference([1, 2], [1, 2, 3]) == \
        "lengths differ: off has 2 batches, on has 3"


# ------------------------------------------------------------------ forced: an experiment

def _forced_run(tmp_path: Path, factor: float) -> Path:
    return make_run(tmp_path / f"forced-{factor}", modes=("off", "forced"), concurrencies=(4,),
                    n_requests=400, request_cv=0.03,
                    effect=lambda m, c: factor if m == "forced" else 1.0)


@pytest.mark.parametrize(("factor", "expected"), [
    (1.5, "regression"), (0.6, "improvement"), (1.0, "pass")])
def test_forced_is_an_experiment_judged_at_the_suites_own_level(
        tmp_path: Path, factor: float, expected: str) -> None:
    run_dir = _forced_run(tmp_path, factor)
    config = JudgeConfig(run_to_run_cv=0.0, floors={"mean_ttft_ms": 0.05}, confidence=0.9)
    pending = claims._experiment(group_points(load_run(run_dir)), 4, "mean_ttft_ms", config)
    assert pending.name == "experiment: forced@c4 mean_ttft_ms vs off"
    assert pending.counts is False                  # never joins the gate's family
    check = pending.evaluate(0.999)
    assert (check.kind, check.gate, check.mode, check.concurrency, check.reference,
            check.metric, check.floor) == (
        "experiment", False, "forced", 4, "off", "mean_ttft_ms", 0.05)
    assert check.verdict == expected
    assert check.interval.confidence == 0.9          # config.confidence, not the family's
    assert check.interval.estimate == pytest.approx(factor, rel=0.02)
    assert check.current_value == pytest.approx(
        point_mean(run_dir, "forced", 4, "mean_ttft_ms"))
    assert check.reference_value == pytest.approx(point_mean(run_dir, "off", 4, "mean_ttft_ms"))


def test_forced_experiment_without_samples_is_inconclusive_not_an_error(tmp_path: Path) -> None:
    groups = group_points(load_run(_forced_run(tmp_path, 1.0)))
    for point in groups[("forced", 4)]:
        point["requests"] = {}
    check = claims._experiment(groups, 4, "mean_ttft_ms", JudgeConfig()).evaluate(0.95)
    assert check.verdict == "inconclusive" and check.interval is None
    assert "repeats" in check.reason


# ------------------------------------------------------------ no-op: metric equivalence (TOST)

def _noop_run(tmp_path: Path, factor: float, n_requests: int, name: str) -> Any:
    run_dir = make_run(tmp_path / name, runner_class="mi300x", concurrencies=(4,),
                       n_requests=n_requests, request_cv=0.05,
                       effect=lambda m, c: factor if m == "on" else 1.0)
    return run_dir, group_points(load_run(run_dir))


def _tost(groups: Any, margin: float = 0.05, **config: Any) -> Any:
    pending = claims._noop_equivalence(groups, 4, "mean_ttft_ms",
                                       JudgeConfig(noop_margin=margin, run_to_run_cv=0.0,
                                                   **config))
    assert pending.counts is True
    return pending


def test_noop_equivalence_fields_and_a_gating_pass(tmp_path: Path) -> None:
    run_dir, groups = _noop_run(tmp_path, 1.0, 3000, "same")
    pending = _tost(groups)
    assert pending.name == "no-op: on@c4 mean_ttft_ms equivalent to off within ±5.0%"
    check = pending.evaluate(0.95)
    assert (check.kind, check.name, check.metric, check.mode, check.concurrency,
            check.reference, check.floor, check.boundaries) == (
        "claim", pending.name, "mean_ttft_ms", "on", 4, "off", 0.05, (0.95, 1.05))
    assert check.verdict == "pass" and check.gate is True
    assert check.reason == "TOST equivalence"
    assert check.interval.confidence == pytest.approx(0.90)     # TOST: 1 - 2 alpha
    assert check.current_value == pytest.approx(point_mean(run_dir, "on", 4, "mean_ttft_ms"))
    assert check.reference_value == pytest.approx(
        point_mean(run_dir, "off", 4, "mean_ttft_ms"))


def test_noop_equivalence_demonstrably_outside_the_margin(tmp_path: Path) -> None:
    _, groups = _noop_run(tmp_path, 1.2, 3000, "slower")
    check = _tost(groups).evaluate(0.95)
    assert check.verdict == "regression" and check.gate is True
    assert check.reason == "TOST equivalence: demonstrably outside the margin"


def test_an_underpowered_tost_reports_and_does_not_gate(tmp_path: Path) -> None:
    _, groups = _noop_run(tmp_path, 1.0, 6, "few")
    check = _tost(groups, margin=0.02, noop_min_power=0.8).evaluate(0.95)
    assert check.gate is False and check.verdict == "inconclusive"
    assert check.reason.startswith("TOST equivalence; reported, not gating: TOST power ")
    assert check.reason.endswith("% < 80% at +-2.0%")
    power = int(check.reason.split("TOST power ")[1].split("%")[0])
    assert 0 <= power < 80
    # the power printed is the TOST's at its own interval (level 1 - 2 alpha) and margin
    wide = _tost(groups, margin=0.05, noop_min_power=0.99).evaluate(0.95)
    iv = wide.interval
    expected = float(stats.tost_power(iv.standard_error(), iv.df, iv.confidence, 0.05))
    assert 0.05 < expected < 0.99 and wide.gate is False
    assert wide.reason.endswith(f"TOST power {round(100 * expected)}% < 99% at +-5.0%")


def test_a_zero_power_requirement_always_gates(tmp_path: Path) -> None:
    _, groups = _noop_run(tmp_path, 1.0, 3000, "same2")
    check = _tost(groups, noop_min_power=0.0).evaluate(0.95)
    assert check.gate is True and "not gating" not in check.reason


def test_noop_equivalence_without_the_metric_is_inconclusive_naming_the_arm(
        tmp_path: Path) -> None:
    _, groups = _noop_run(tmp_path, 1.0, 50, "missing")
    for point in groups[("on", 4)]:
        del point["metrics"]["mean_ttft_ms"]
    check = _tost(groups).evaluate(0.95)
    assert check.verdict == "inconclusive" and check.interval is None
    assert check.reason == "mean_ttft_ms missing from on@c4"
    assert check.current_value is None


def test_non_positive_values_are_an_error_with_the_message(tmp_path: Path) -> None:
    _, groups = _noop_run(tmp_path, 1.0, 50, "zero")
    for point in groups[("off", 4)]:
        point["metrics"]["mean_ttft_ms"] = 0.0
    check = _tost(groups, min_repeats_for_repeat_bootstrap=1).evaluate(0.95)
    assert check.verdict == "error"
    assert check.reason.endswith("values must be positive for a ratio")


def test_concurrencies_are_those_both_modes_have() -> None:
    groups = {("off", 4): [], ("off", 8): [], ("on", 8): [], ("on", 16): [], ("forced", 4): []}
    assert claims._concurrencies(groups, "on", "off") == [8]
    assert claims._concurrencies(groups, "forced", "off") == [4]
    assert claims._concurrencies(groups, "off", "off") == [4, 8]


# A/B claims inside one run: gfx95 improvement + GSM8K non-inferiority; no-op elsewhere.


def _checks(run_dir, config=None, confidence=0.95):
    pendings = claim_pendings(load_run(run_dir), config or JudgeConfig())
    return {c.name: c for c in (p.evaluate(confidence) for p in pendings)}


def _by_prefix(checks, prefix):
    return [c for name, c in checks.items() if name.startswith(prefix)]


def _gfx95(tmp_path, factor, **kw):
    return make_run(tmp_path / f"gfx95-{factor}", runner_class="mi355x",
                    model_profile="glm-5.2-mxfp4", concurrencies=(4, 64), n_requests=200,
                    request_cv=0.03, effect=lambda m, c: factor if m == "on" else 1.0, **kw)


def test_gfx95_ttft_claim_pass_fail_inconclusive(tmp_path):
    config = JudgeConfig(gated_min_ttft_improvement=0.04, run_to_run_cv=0.0)
    good = _checks(_gfx95(tmp_path, 0.90), config)
    ttft = _by_prefix(good, "claim: on vs off mean_ttft_ms at c64")[0]
    assert ttft.verdict == "pass" and ttft.concurrency == 64 and ttft.gate
    weak = _by_prefix(_checks(_gfx95(tmp_path, 0.995), config), "claim: on vs off")[0]
    assert weak.verdict == "regression"                      # demonstrably < 4 % better
    # a true effect right at the stated 4 % with noisy data: the interval straddles 0.96
    verdicts = []
    for seed in range(5):
        noisy = make_run(tmp_path / f"noisy{seed}", runner_class="mi355x", concurrencies=(64,),
                         n_requests=20, request_cv=0.1, seed=seed,
                         effect=lambda m, c: 0.96 if m == "on" else 1)
        verdicts.append(_by_prefix(_checks(noisy, config), "claim: on vs off")[0].verdict)
    assert verdicts.count("inconclusive") >= 4, verdicts


def test_gfx95_gsm8k_noninferiority_paired(tmp_path):
    config = JudgeConfig(accuracy_noninferiority_margin=0.02)

    def paired(both, a_only, b_only, neither):
        n = both + a_only + b_only + neither
        return {"on_vs_off": {"a": "on", "b": "off", "n": n, "both_correct": both,
                              "a_only": a_only, "b_only": b_only, "both_wrong": neither}}

    fine = _gfx95(tmp_path, 0.9, paired_accuracy=paired(1200, 5, 6, 108))
    check = _by_prefix(_checks(fine, config), "claim: on vs off GSM8K")[0]
    assert check.verdict == "pass" and check.interval.method.startswith("paired")
    worse = _gfx95(tmp_path, 0.91, paired_accuracy=paired(1100, 2, 110, 107))
    assert _by_prefix(_checks(worse, config), "claim: on vs off GSM8K")[0].verdict == \
        "regression"
    small = _gfx95(tmp_path, 0.92, paired_accuracy=paired(12, 1, 2, 1))
    assert _by_prefix(_checks(small, config), "claim: on vs off GSM8K")[0].verdict == \
        "inconclusive"
    none = _gfx95(tmp_path, 0.93)
    missing = _by_prefix(_checks(none, config), "claim: on vs off GSM8K")[0]
    assert missing.verdict == "inconclusive" and "no GSM8K" in missing.reason


def test_gfx95_gsm8k_unpaired_fallback(tmp_path):
    run = _gfx95(tmp_path, 0.9, accuracy={"on": {"n": 1319, "correct": 1223},
                                          "off": {"n": 1319, "correct": 1231}})
    check = _by_prefix(_checks(run), "claim: on vs off GSM8K")[0]
    assert check.interval.method == "newcombe" and "unpaired" in check.reason


def test_noop_claims_on_other_runners(tmp_path):
    same = make_run(tmp_path / "same", runner_class="mi300x", n_requests=3000, request_cv=0.05,
                    concurrencies=(8,), modes=("off", "on"))
    checks = _checks(same, JudgeConfig(metrics=("mean_ttft_ms",), noop_margin=0.05,
                                       run_to_run_cv=0.0))
    assert _by_prefix(checks, "no-op: on@c8 prefill")[0].verdict == "pass"
    eq = _by_prefix(checks, "no-op: on@c8 mean_ttft_ms")[0]
    assert eq.verdict == "pass" and eq.interval.confidence < 0.95     # TOST: 1 - 2 alpha
    assert not _by_prefix(checks, "claim:")                           # no gfx95 claims here


def _set_alignment(run_dir, mode: str, aligned: float, saturated: int,
                   effective: bool = False) -> None:
    data = json.loads((run_dir / "run.json").read_text())
    for point in data["points"]:
        if point["mode"] == mode:
            point["alignment"].update(aligned_fraction=aligned, saturated_batches=saturated)
            point["exact_fill_effective"] = effective
    (run_dir / "run.json").write_text(json.dumps(data))


def test_noop_prefill_order_from_timing_is_not_a_failure(tmp_path):
    """At concurrency > 1 arrival timing reorders batches: reported, not a regression."""
    diff = make_run(tmp_path / "diff", runner_class="h200",
                    prefill_tokens={"off": [256, 236, 256], "on": [256, 256, 236]})
    _set_alignment(diff, "off", 0.25, 12)
    _set_alignment(diff, "on", 0.25, 12)
    check = _by_prefix(_checks(diff), "no-op: on@c2 prefill")[0]
    assert check.verdict == "pass"
    assert "aligned on 3/12 vs off 3/12" in check.reason
    assert "batch 1: off=236 on=256" in check.reason         # still reported


def test_noop_exact_fill_leak_is_a_regression(tmp_path):
    """Exact fill leaking off gfx95 aligns every saturated batch at the chunk."""
    leak = make_run(tmp_path / "leak", runner_class="mi325x", concurrencies=(4,), repeats=3)
    _set_alignment(leak, "off", 0.25, 12)
    _set_alignment(leak, "on", 1.0, 12)
    check = _by_prefix(_checks(leak), "no-op: on@c4 prefill")[0]
    assert check.verdict == "regression" and "exact fill leaked" in check.reason
    assert (check.current_value, check.reference_value) == (1.0, 0.25)


def test_noop_read_back_of_the_gate_decides_first(tmp_path):
    run = make_run(tmp_path / "eff", runner_class="mi300x")
    _set_alignment(run, "on", 0.25, 12, effective=True)
    _set_alignment(run, "off", 0.25, 12)
    check = _by_prefix(_checks(run), "no-op: on@c2 prefill")[0]
    assert check.verdict == "regression" and "read back effective" in check.reason


def test_noop_without_saturated_batches_is_inconclusive(tmp_path):
    run = make_run(tmp_path / "none", runner_class="mi300x")
    _set_alignment(run, "on", 0.0, 0)
    _set_alignment(run, "off", 0.0, 0)
    check = _by_prefix(_checks(run), "no-op: on@c2 prefill")[0]
    assert check.verdict == "inconclusive" and "no saturated prefill batches" in check.reason


def test_noop_metrics_not_equivalent(tmp_path):
    slow = make_run(tmp_path / "slow", runner_class="cpu", n_requests=400, request_cv=0.03,
                    effect=lambda m, c: 1.3 if m == "on" else 1.0)
    eq = _by_prefix(_checks(slow, JudgeConfig(metrics=("mean_ttft_ms",))),
                    "no-op: on@c2 mean_ttft_ms")[0]
    assert eq.verdict == "regression"
    few = make_run(tmp_path / "few", runner_class="cpu", n_requests=4, request_cv=0.2)
    eq = _by_prefix(_checks(few, JudgeConfig(metrics=("mean_ttft_ms",))),
                    "no-op: on@c2 mean_ttft_ms")[0]
    assert eq.verdict == "inconclusive"          # not "no significant difference, so equal"


def test_forced_is_an_experiment_never_a_gate(tmp_path):
    run = make_run(tmp_path / "forced", runner_class="cpu", modes=("off", "on", "forced"),
                   n_requests=300, request_cv=0.03,
                   effect=lambda m, c: 0.8 if m == "forced" else 1.0)
    experiments = _by_prefix(_checks(run, JudgeConfig(metrics=("mean_ttft_ms",))),
                             "experiment: forced")
    assert experiments and all(not c.gate for c in experiments)
    assert {c.verdict for c in experiments} == {"improvement"}
    assert all(c.interval is not None for c in experiments)


def test_single_repeat_assumes_run_to_run_noise(tmp_path):
    """One repeat per side cannot show run-to-run noise: the suite's assumed CV widens the
    interval, so a 10 % on/off gap that requests alone would call decisive stays undecided."""
    run = _gfx95(tmp_path, 0.90)
    tight = _by_prefix(_checks(run, JudgeConfig(run_to_run_cv=0.0)), "claim: on vs off mean")[0]
    honest = _by_prefix(_checks(run, JudgeConfig(run_to_run_cv=0.05)), "claim: on vs off mean")[0]
    assert tight.verdict == "pass" and honest.verdict == "inconclusive"
    assert honest.interval.method.endswith("+assumed-run-cv")
    assert honest.interval.high - honest.interval.low > tight.interval.high - tight.interval.low


def test_noop_tost_gates_only_with_adequate_power(tmp_path):
    """The rule: a no-op equivalence check gates only when its TOST could show identical arms
    equivalent with >= noop_min_power at the margin; an underpowered one reports (gate false)."""
    noisy = make_run(tmp_path / "noisy", runner_class="mi300x", repeats=3, n_requests=30,
                     request_cv=0.3, run_cv=0.04, concurrencies=(8,))
    config = JudgeConfig(metrics=("mean_ttft_ms",), noop_margin=0.02, run_to_run_cv=0.04)
    check = _by_prefix(_checks(noisy, config, confidence=0.999), "no-op: on@c8 mean_ttft_ms")[0]
    assert not check.gate and "TOST power" in check.reason
    assert check.interval.method == "repeats-paired"
    quiet = make_run(tmp_path / "quiet", runner_class="mi300x", repeats=3, n_requests=3000,
                     request_cv=0.02, concurrencies=(8,))
    config = JudgeConfig(metrics=("mean_ttft_ms",), noop_margin=0.05, run_to_run_cv=0.002,
                         run_to_run_cv_dof=50)
    check = _by_prefix(_checks(quiet, config), "no-op: on@c8 mean_ttft_ms")[0]
    assert check.gate and check.verdict == "pass", check.describe()


def test_three_repeat_noop_on_identical_arms_rarely_fails(tmp_path):
    """Issue 11: the 3-repeat TOST called identical arms 'regression' 4-6 % of the time. With
    t intervals and the power rule, 40 identical nights give no gating no-op failure."""
    config = JudgeConfig(metrics=("mean_ttft_ms", "median_tpot_ms"), noop_margin=0.02,
                         run_to_run_cv=0.02)
    failures = 0
    for seed in range(40):
        run = make_run(tmp_path / f"n{seed}", runner_class="mi300x", repeats=3, n_requests=64,
                       request_cv=0.3, run_cv=0.02, concurrencies=(4, 64), seed=seed)
        checks = _checks(run, config, confidence=per_check_confidence(0.95, 4))
        failures += any(c.gate and c.verdict == "regression" for c in checks.values())
    assert failures == 0


def test_recorded_accuracy_interval_is_rescaled_to_the_family_level(tmp_path):
    """Only a recorded 95 % interval: its standard error is re-used at the gate's level."""
    paired = {"on_vs_off": {"n": 1319, "diff": -0.004, "diff_low": -0.012, "diff_high": 0.004}}
    run = _gfx95(tmp_path, 0.9, paired_accuracy=paired)
    check = _by_prefix(_checks(run, JudgeConfig(), confidence=0.999), "claim: on vs off GSM8K")[0]
    assert check.interval.confidence == 0.999 and "rescaled" in check.interval.method
    assert check.interval.high - check.interval.low > 0.016 * 3.29 / 1.96 * 0.99


# The GSM8K on-vs-off claim (servegate.judge.claims): paired cells, a recorded interval, the
# unpaired fallback, and the verdict at the margin, against references worked out by hand or by
# statsmodels (issue 15).


NAME = "claim: on vs off GSM8K non-inferior within 2.0 pp"


def _claim(run: dict[str, Any], confidence: float = 0.95) -> Any:
    pending = claims._accuracy_claim(run, JudgeConfig())      # type: ignore[arg-type]
    assert pending.name == NAME and pending.counts
    return pending.evaluate(confidence)


def test_paired_cells_give_the_agresti_min_interval() -> None:
    cells = {"both_correct": 12, "a_only": 3, "b_only": 1, "both_wrong": 4}
    interval = claims._paired_accuracy_interval(cells, 0.95)
    assert interval is not None and interval.scale == "difference"
    assert interval.estimate == pytest.approx(0.1)
    assert interval.se == pytest.approx(0.0997744, abs=1e-6)        # by hand (see paired tests)
    assert (interval.n_current, interval.n_reference) == (20, 20)


def test_a_recorded_interval_is_rescaled_to_the_family_level() -> None:
    # recorded at 95 %: diff 0.01 in [-0.0296, 0.0496] -> se 0.0396 / 1.959964 = 0.020204
    recorded = {"diff": 0.01, "diff_low": -0.0296, "diff_high": 0.0496, "n": 500,
                "confidence": 0.95}
    interval = claims._paired_accuracy_interval(recorded, 0.99)
    assert interval is not None
    assert interval.se == pytest.approx(0.0396 / 1.959964, rel=1e-5)
    z99 = 2.5758293
    assert (interval.low, interval.high) == pytest.approx(
        (0.01 - z99 * 0.0396 / 1.959964, 0.01 + z99 * 0.0396 / 1.959964), rel=1e-5)
    assert interval.method == "paired (recorded at 95%, rescaled)"
    assert (interval.n_current, interval.confidence) == (500, 0.99)
    at_90 = claims._paired_accuracy_interval({**recorded, "confidence": 0.9}, 0.9)
    assert at_90 is not None and (at_90.low, at_90.high) == pytest.approx((-0.0296, 0.0496))
    default = claims._paired_accuracy_interval({k: v for k, v in recorded.items()
                                                if k not in ("n", "confidence")}, 0.95)
    assert default is not None and default.n_current == 0
    assert (default.low, default.high) == pytest.approx((-0.0296, 0.0496))


@pytest.mark.parametrize("paired", [
    {},
    {"both_correct": 0, "a_only": 0, "b_only": 0, "both_wrong": 0},
    {"both_correct": 1.5, "a_only": 0, "b_only": 0, "both_wrong": 0},
    {"diff": 0.1, "diff_low": 0.0},
    {"diff": "0.1", "diff_low": 0.0, "diff_high": 0.2},
])
def test_nothing_usable_gives_no_interval(paired: dict[str, Any]) -> None:
    assert claims._paired_accuracy_interval(paired, 0.95) is None


def test_claim_passes_when_the_whole_interval_is_above_minus_margin() -> None:
    run = {"paired_accuracy": {"on_vs_off": {"both_correct": 900, "a_only": 0, "b_only": 0,
                                             "both_wrong": 100}},
           "accuracy": {"on": {"n": 1000, "correct": 900}, "off": {"n": 1000, "correct": 900}}}
    check = _claim(run)
    assert (check.kind, check.metric, check.mode, check.reference, check.floor) == (
        "claim", "accuracy", "on", "off", 0.02)
    assert check.verdict == "pass" and check.reason == ""
    assert (check.current_value, check.reference_value) == (0.9, 0.9)
    assert check.interval.low >= -0.02


def test_claim_regression_when_the_whole_interval_is_below_minus_margin() -> None:
    run = {"paired_accuracy": {"on_vs_off": {"both_correct": 700, "a_only": 0, "b_only": 100,
                                             "both_wrong": 200}},
           "accuracy": {"on": {"n": 1000, "correct": 700}, "off": {"n": 1000, "correct": 800}}}
    check = _claim(run)
    assert check.verdict == "regression" and check.interval.high < -0.02
    assert (check.current_value, check.reference_value) == (0.7, 0.8)


def test_claim_inconclusive_when_the_interval_straddles_the_margin() -> None:
    run = {"paired_accuracy": {"on_vs_off": {"both_correct": 40, "a_only": 1, "b_only": 2,
                                             "both_wrong": 7}}}
    check = _claim(run)
    assert check.verdict == "inconclusive"
    assert check.interval.low < -0.02 <= check.interval.high
    assert check.current_value is None and check.reference_value is None


def test_unpaired_fallback_is_newcombe_and_says_so() -> None:
    run = {"accuracy": {"on": {"n": 400, "correct": 330}, "off": {"n": 500, "correct": 410}}}
    check = _claim(run, confidence=0.9)
    low, high = confint_proportions_2indep(330, 400, 410, 500, method="newcomb",
                                           compare="diff", alpha=0.1)
    assert (check.interval.low, check.interval.high) == pytest.approx((low, high))
    assert check.reason == "unpaired fallback (no paired_accuracy.on_vs_off)"
    assert (check.current_value, check.reference_value) == (0.825, 0.82)


def test_no_results_is_inconclusive_with_the_reason() -> None:
    for run in ({}, {"accuracy": {"on": {"n": 10, "correct": 5}}},
                {"accuracy": {"on": {"n": 0, "correct": 0}, "off": {"n": 10, "correct": 5}}},
                {"paired_accuracy": {"on_vs_off": {}}}):
        check = _claim(run)
        assert check.verdict == "inconclusive" and check.interval is None, run
        assert check.reason == "no GSM8K results for on and off in this run"


def test_paired_counts_win_over_the_unpaired_fallback() -> None:
    run = {"paired_accuracy": {"on_vs_off": {"both_correct": 12, "a_only": 3, "b_only": 1,
                                             "both_wrong": 4}},
           "accuracy": {"on": {"n": 20, "correct": 15}, "off": {"n": 20, "correct": 13}}}
    check = _claim(run)
    assert check.reason == "" and check.interval.method == "paired (Agresti-Min)"
    assert math.isclose(check.interval.estimate, 0.1)


# The in-run claims at their edges (servegate.judge.claims, issue 15): a forced experiment
# judged with its metric's own floor and direction, each arm named when its data is missing, and
# the GSM8K on-vs-off interval rebuilt from a recorded one or from a single paired question.


def _run(tmp_path: Path, modes: tuple[str, ...], factor: float,
         drop: tuple[str, str] | None = None) -> Any:
    """3 repeats at c4; the non-off arms' latencies scaled by `factor`; `drop` = (mode, metric)
    removed from every point of that mode."""
    run_dir = make_run(tmp_path / "run", modes=modes, concurrencies=(4,), repeats=3,
                       n_requests=60, effect=lambda m, c: 1.0 if m == "off" else factor)
    if drop:
        raw = json.loads((run_dir / "run.json").read_text())
        for point in raw["points"]:
            if point["mode"] == drop[0]:
                del point["metrics"][drop[1]]
        (run_dir / "run.json").write_text(json.dumps(raw))
    return load_run(run_dir)


def _check(run: Any, config: JudgeConfig, prefix: str) -> Any:
    [pending] = [p for p in claim_pendings(run, config) if p.name.startswith(prefix)]
    return pending.evaluate(0.99)


def test_an_experiment_uses_its_metrics_own_floor(tmp_path: Path) -> None:
    run = _run(tmp_path, ("off", "forced"), 1.2)             # forced 20 % slower
    loose = JudgeConfig(metrics=("mean_ttft_ms",), floors={"mean_ttft_ms": 0.5})
    check = _check(run, loose, "experiment:")
    assert (check.floor, check.verdict, check.gate) == (0.5, "pass", False)
    strict = JudgeConfig(metrics=("mean_ttft_ms",), floors={"mean_ttft_ms": 0.05},
                         default_floor=0.5)
    assert _check(run, strict, "experiment:").verdict == "regression"


def test_an_experiment_follows_its_metrics_direction(tmp_path: Path) -> None:
    run = _run(tmp_path, ("off", "forced"), 0.7)             # forced faster: throughput up
    config = JudgeConfig(metrics=("output_throughput",), default_floor=0.05)
    check = _check(run, config, "experiment:")
    assert check.interval.estimate > 1.2
    assert check.verdict == "improvement"


def test_a_missing_metric_names_the_arm(tmp_path: Path) -> None:
    config = JudgeConfig(metrics=("mean_ttft_ms",))
    for mode, prefix, label in (("forced", "experiment:", "forced@c4"),
                                ("off", "experiment:", "off@c4")):
        run = _run(tmp_path / mode, ("off", "forced"), 1.0, drop=(mode, "mean_ttft_ms"))
        check = _check(run, config, prefix)
        assert (check.verdict, check.reason) == ("inconclusive",
                                                 f"mean_ttft_ms missing from {label}")
    run = _run(tmp_path / "noop", ("off", "on"), 1.0, drop=("off", "mean_ttft_ms"))
    check = _check(run, config, "no-op: on@c4 mean_ttft_ms")
    assert (check.verdict, check.reason) == ("inconclusive", "mean_ttft_ms missing from off@c4")


def test_the_gated_ttft_claim_names_its_arms(tmp_path: Path) -> None:
    config = JudgeConfig(metrics=("mean_ttft_ms",))
    for mode in ("on", "off"):
        run_dir = make_run(tmp_path / mode, runner_class="mi355x", modes=("off", "on"),
                           concurrencies=(4,), repeats=3)
        raw = json.loads((run_dir / "run.json").read_text())
        for point in raw["points"]:
            if point["mode"] == mode:
                del point["metrics"][config.gated_ttft_metric]
        (run_dir / "run.json").write_text(json.dumps(raw))
        check = _check(load_run(run_dir), config, f"claim: on vs off {config.gated_ttft_metric}")
        assert check.reason == f"{config.gated_ttft_metric} missing from {mode}@c4"


def test_a_recorded_interval_is_rescaled_to_the_familys_level() -> None:
    paired = {"diff": 0.01, "diff_low": -0.02, "diff_high": 0.04, "n": 200, "confidence": 0.95}
    iv = _paired_accuracy_interval(paired, 0.99)
    se = 0.06 / (2 * sps.norm.ppf(0.975))
    z = sps.norm.ppf(0.995)
    assert iv is not None
    assert (iv.estimate, iv.scale, iv.n_current, iv.n_reference) == (0.01, "difference", 200, 200)
    assert iv.method == "paired (recorded at 95%, rescaled)" and iv.confidence == 0.99
    assert iv.se == pytest.approx(se, rel=1e-12)
    assert (iv.low, iv.high) == pytest.approx((0.01 - z * se, 0.01 + z * se), rel=1e-12)


def test_one_paired_question_is_enough_for_the_cell_counts() -> None:
    iv = _paired_accuracy_interval({"both_correct": 1, "a_only": 0, "b_only": 0,
                                    "both_wrong": 0}, 0.95)
    assert iv is not None and iv.method == "paired (Agresti-Min)" and iv.n_current == 1
