"""The claims of servegate.judge.claims beyond GSM8K: the gfx95 TTFT improvement, the no-op's
prefill-batch evidence (gate read-back, Fisher test on aligned counts, reported sequences) and
the forced-mode experiment. Every field of each check is pinned against values worked out here
(by hand, or by scipy as the reference implementation), not by the formulas under test (issue 15).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from judge_runs import make_run, point_mean
from scipy import stats as sps

from servegate.config.judge import JudgeConfig
from servegate.judge import claims
from servegate.judge.baselines import group_points
from servegate.judge.stats import Interval, improvement
from servegate.results import load_run


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
    assert check.verdict == "inconclusive"
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
