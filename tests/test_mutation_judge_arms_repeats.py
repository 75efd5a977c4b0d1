"""The judge's ratio rule over whole repeats, and the arm plumbing around it
(servegate.judge.arms, issue 15): the repeats' t interval with the assumed run-to-run CV and the
measured within-run part as its prior (against scipy's t tests and arithmetic written out here),
how much of the variance is run-to-run, arrays with several leading axes, every refusal's
message, and the Interval that `ratio_interval` hands to the checks."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from servegate.config.judge import JudgeConfig
from servegate.judge.arms import Arm, ArmStats, NotJudgeable, arm_from_points, arm_stats, ratio_interval
from servegate.judge.arms import compare_arms as compare

CUR = [100.0, 104.0, 98.0]
REF = [90.0, 95.0, 91.0, 93.0]


def _stats(values: list[float], se: float | None = None, pooled: float = 100.0,
           n: int = 50) -> ArmStats:
    if se is None:       # a summary-only metric: no per-request samples
        return ArmStats(np.array([values]))
    return ArmStats(np.array([values]), np.array([pooled]), np.array([se]), n)


def _ss(values: list[float]) -> float:
    logs = np.log(values)
    return float(((logs - logs.mean()) ** 2).sum())


# ------------------------------------------------------------------------ the repeats' t test

def test_summary_only_repeats_are_scipys_two_sample_t() -> None:
    # no within-run estimate: the assumed CV gets no weight, the repeats decide alone
    config = JudgeConfig(run_to_run_cv=0.05, run_to_run_cv_dof=10.0,
                         min_repeats_for_repeat_bootstrap=3)
    comp = compare(_stats(CUR), _stats(REF), config=config, paired=False)
    res = sps.ttest_ind(np.log(CUR), np.log(REF))
    theta = float(np.log(CUR).mean() - np.log(REF).mean())
    assert float(comp.theta[0]) == pytest.approx(theta)
    assert float(comp.se[0]) == pytest.approx(theta / res.statistic)
    assert float(comp.df[0]) == pytest.approx(res.df) == 5
    # nothing is known to be within-run noise: all of se^2 counts as run-to-run
    assert float(comp.run_var[0]) == pytest.approx(float(comp.se[0]) ** 2)
    assert (comp.method, comp.n_current, comp.n_reference, comp.n_repeats) == (
        "repeats", 3, 4, 3)


def test_a_known_within_part_joins_the_assumed_cv_as_prior() -> None:
    config = JudgeConfig(run_to_run_cv=0.03, run_to_run_cv_dof=10.0,
                         min_repeats_for_repeat_bootstrap=3)
    comp = compare(_stats(CUR, 0.01), _stats(REF, 0.02), config=config, paired=False)
    # one repeat's within-run variance: the pooled SE^2 times the repeats it pooled, averaged
    within = (0.01 ** 2 * 3 + 0.02 ** 2 * 4) / 2                    # 0.00095
    var = (10 * (0.03 ** 2 + within) + _ss(CUR) + _ss(REF)) / (5 + 10)
    se = math.sqrt(var * (1 / 3 + 1 / 4))
    assert float(comp.se[0]) == pytest.approx(se)
    assert float(comp.df[0]) == pytest.approx(15.0)
    assert float(comp.run_var[0]) == pytest.approx(se ** 2 - within * (1 / 3 + 1 / 4))
    assert 0 < float(comp.run_var[0]) < se ** 2


def test_within_noise_larger_than_the_spread_leaves_no_run_to_run_part() -> None:
    config = JudgeConfig(run_to_run_cv=0.0, run_to_run_cv_dof=10.0,
                         min_repeats_for_repeat_bootstrap=3)
    comp = compare(_stats(CUR, 0.3), _stats(REF, 0.3), config=config, paired=False)
    assert float(comp.run_var[0]) == 0.0


def test_paired_repeats_are_scipys_paired_t() -> None:
    config = JudgeConfig(run_to_run_cv=0.05, min_repeats_for_repeat_bootstrap=3)
    on, off = [100.0, 110.0, 97.0], [95.0, 103.0, 94.0]
    comp = compare(_stats(on), _stats(off), config=config, paired=True)
    res = sps.ttest_rel(np.log(on), np.log(off))
    theta = float(np.mean(np.log(on) - np.log(off)))
    assert comp.method == "repeats-paired"
    assert float(comp.se[0]) == pytest.approx(theta / res.statistic)
    assert float(comp.df[0]) == pytest.approx(res.df) == 2
    assert float(comp.run_var[0]) == pytest.approx(float(comp.se[0]) ** 2)


def test_paired_with_a_known_within_part() -> None:
    config = JudgeConfig(run_to_run_cv=0.02, run_to_run_cv_dof=4.0,
                         min_repeats_for_repeat_bootstrap=3)
    on, off = [100.0, 110.0, 97.0], [95.0, 103.0, 94.0]
    comp = compare(_stats(on, 0.01), _stats(off, 0.015), config=config, paired=True)
    within = (0.01 ** 2 * 3 + 0.015 ** 2 * 3) / 2
    diff = np.log(on) - np.log(off)
    ss = float(((diff - diff.mean()) ** 2).sum())
    var = (4 * 2 * (0.02 ** 2 + within) + ss) / (2 + 4)     # a difference: twice the prior
    se = math.sqrt(var / 3)
    assert float(comp.se[0]) == pytest.approx(se)
    assert float(comp.df[0]) == pytest.approx(6.0)
    assert float(comp.run_var[0]) == pytest.approx(max(se ** 2 - within * 2 / 3, 0.0))


def test_pairing_needs_equal_repeat_counts() -> None:
    config = JudgeConfig(min_repeats_for_repeat_bootstrap=3)
    comp = compare(_stats(CUR), _stats(REF), config=config, paired=True)
    assert comp.method == "repeats"


def _cells(seed: int, n_cur: int, n_ref: int, config: JudgeConfig, n_requests: tuple[int, int]
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Any]:
    """2 x 3 simulated cells (two leading axes) of per-repeat values and pooled standard
    errors, compared in one call: (cur, ref, se_cur, se_ref, comparison)."""
    rng = np.random.default_rng(seed)
    cur = rng.lognormal(4.6, 0.05, (2, 3, n_cur))
    ref = rng.lognormal(4.6, 0.05, (2, 3, n_ref))
    se_c, se_r = rng.uniform(0.005, 0.03, (2, 3)), rng.uniform(0.005, 0.03, (2, 3))
    batch = compare(ArmStats(cur, np.full((2, 3), 100.0), se_c, n_requests[0]),
                    ArmStats(ref, np.full((2, 3), 100.0), se_r, n_requests[1]), config=config,
                    paired=False)
    return cur, ref, se_c, se_r, batch


def test_several_leading_axes_decide_as_each_cell_alone() -> None:
    config = JudgeConfig(run_to_run_cv=0.03, run_to_run_cv_dof=6.0,
                         min_repeats_for_repeat_bootstrap=3)
    cur, ref, se_c, se_r, batch = _cells(11, 4, 5, config, (50, 50))
    for i in range(2):
        for j in range(3):
            within = (se_c[i, j] ** 2 * 4 + se_r[i, j] ** 2 * 5) / 2
            var = (6 * (0.03 ** 2 + within) + _ss(list(cur[i, j])) + _ss(list(ref[i, j]))) / 13
            se = math.sqrt(var * (1 / 4 + 1 / 5))
            assert batch.se[i, j] == pytest.approx(se), (i, j)
            assert batch.run_var[i, j] == pytest.approx(max(se ** 2 - within * 9 / 20, 0.0))
    assert (batch.n_current, batch.n_reference) == (4, 5)


def test_several_leading_axes_on_the_request_path() -> None:
    config = JudgeConfig(run_to_run_cv=0.04, run_to_run_cv_dof=5.0,
                         min_repeats_for_repeat_bootstrap=3)
    # 2 repeats vs 1: below the 3 the repeats' t test needs
    cur, _, se_c, se_r, batch = _cells(12, 2, 1, config, (40, 30))
    for i in range(2):
        for j in range(3):
            run_var = (5 * 0.04 ** 2 + _ss(list(cur[i, j]))) / (1 + 5)
            total = se_c[i, j] ** 2 + se_r[i, j] ** 2 + run_var * (1 / 2 + 1)
            assert batch.se[i, j] == pytest.approx(math.sqrt(total)), (i, j)


def test_no_degrees_of_freedom_at_all_is_not_judgeable() -> None:
    # a config built in code (the suite parser refuses fewer than 2): one repeat each, no
    # within-run estimate, so neither the repeats nor the prior carry any degrees of freedom
    config = JudgeConfig(min_repeats_for_repeat_bootstrap=1)
    with pytest.raises(NotJudgeable) as info:
        compare(_stats([1.0]), _stats([2.0]), config=config, paired=False, what="m")
    assert str(info.value) == ("m: no degrees of freedom for the run-to-run variance (1/1 "
                               "repeats, run_to_run_cv_dof 10): the family's level is "
                               "unreachable")


# ------------------------------------------------------------------- the request-level path

def test_no_assumed_cv_and_single_repeats_means_no_run_term() -> None:
    config = JudgeConfig(run_to_run_cv=0.0, run_to_run_cv_dof=0.0,
                         min_repeats_for_repeat_bootstrap=3)
    comp = compare(_stats([100.0], 0.02, 100.0, 40), _stats([90.0], 0.03, 90.0, 30),
                   config=config, paired=False)
    assert comp.method == "requests"
    assert float(comp.se[0]) == pytest.approx(math.sqrt(0.02 ** 2 + 0.03 ** 2))
    assert float(comp.run_var[0]) == 0.0
    total = 0.02 ** 2 + 0.03 ** 2
    assert float(comp.df[0]) == pytest.approx(total ** 2 / (0.02 ** 4 / 39 + 0.03 ** 4 / 29))


def test_the_default_name_in_messages_is_metric() -> None:
    with pytest.raises(ValueError) as info:
        compare(_stats([0.0]), _stats([1.0]), config=JudgeConfig(), paired=False)
    assert str(info.value) == "metric: values must be positive for a ratio"


def test_unbounded_statistics_are_not_judgeable_with_the_reason() -> None:
    nan = ArmStats(np.array([[1.0]]), np.array([1.0]), np.array([math.nan]), 5)
    with pytest.raises(NotJudgeable) as info:
        compare(nan, nan, config=JudgeConfig(min_repeats_for_repeat_bootstrap=3),
                paired=False, what="p99_ttft_ms (on/off)")
    assert str(info.value) == (
        "p99_ttft_ms (on/off): 5/5 requests cannot bound the statistic (its order-statistic "
        "interval runs past the sample); needs more prompts or >= 3 repeats per arm")


SAMPLES_BUT = ("m: 1/1 repeats and {}/{} per-request samples; needs >= 3 repeats or >= 2 "
               "requests per arm")


@pytest.mark.parametrize(("cur", "ref", "message"), [
    # a statistic without its standard error, on either side
    (ArmStats(np.ones((1, 1)), np.ones(1), None, 5), _stats([1.0], 0.1, 1.0, 5),
     SAMPLES_BUT.format(5, 5)),
    (_stats([1.0], 0.1, 1.0, 5), ArmStats(np.ones((1, 1)), np.ones(1), None, 5),
     SAMPLES_BUT.format(5, 5)),
    # a standard error without its statistic, on either side
    (ArmStats(np.ones((1, 1)), None, np.full(1, 0.1), 5), _stats([1.0], 0.1, 1.0, 5),
     SAMPLES_BUT.format(5, 5)),
    (_stats([1.0], 0.1, 1.0, 5), ArmStats(np.ones((1, 1)), None, np.full(1, 0.1), 5),
     SAMPLES_BUT.format(5, 5)),
    # one request on one side only: the per-request path was possible in principle
    (ArmStats(np.ones((1, 1)), n_requests=0), ArmStats(np.ones((1, 1)), n_requests=1),
     SAMPLES_BUT.format(0, 1)),
    (ArmStats(np.ones((1, 1)), n_requests=1), ArmStats(np.ones((1, 1)), n_requests=0),
     SAMPLES_BUT.format(1, 0)),
])
def test_half_present_request_statistics_name_the_counts(cur: ArmStats, ref: ArmStats,
                                                         message: str) -> None:
    with pytest.raises(NotJudgeable) as info:
        compare(cur, ref, config=JudgeConfig(min_repeats_for_repeat_bootstrap=3),
                paired=False, what="m")
    assert str(info.value) == message


# ---------------------------------------------------------------------------- ratio_interval

def _arm(label: str, values: list[float], requests: list[float] | None = None,
         repeat_ids: list[int] | None = None) -> Arm:
    metrics = {"output_throughput": values, "mean_ttft_ms": values, "std_ttft_ms": values}
    return Arm(label, repeat_ids if repeat_ids is not None else list(range(len(values))),
               metrics, {"ttft_ms": requests} if requests else {})


def test_arms_are_paired_only_when_asked() -> None:
    config = JudgeConfig(min_repeats_for_repeat_bootstrap=3)
    on, off = _arm("on", [100.0, 110.0, 97.0]), _arm("off", [95.0, 103.0, 94.0])
    plain = ratio_interval(on, off, "output_throughput", config=config, confidence=0.9, key="k")
    paired = ratio_interval(on, off, "output_throughput", config=config, confidence=0.9,
                            key="k", paired=True)
    assert (plain.method, paired.method) == ("repeats", "repeats-paired")
    assert (plain.n_current, plain.n_reference, plain.n_repeats) == (3, 3, 3)


def test_a_refusal_names_the_metric_and_both_arms() -> None:
    with pytest.raises(NotJudgeable) as info:
        ratio_interval(_arm("on", [1.0]), _arm("off", [1.0]), "output_throughput",
                       config=JudgeConfig(), confidence=0.9, key="k")
    assert str(info.value) == ("output_throughput (on/off) has no per-request samples and only "
                               "1/1 repeats; needs >= 2 repeats per arm")


def test_a_nan_repeat_value_has_no_standard_error() -> None:
    with pytest.raises(NotJudgeable) as info:
        ratio_interval(_arm("on", [1.0, math.nan, 1.2]), _arm("off", [1.0, 1.1, 1.2]),
                       "output_throughput", config=JudgeConfig(), confidence=0.9, key="k")
    assert str(info.value) == "output_throughput (on/off): no standard error from these samples"


def test_a_request_level_interval_carries_counts_and_run_variance() -> None:
    cur_req, ref_req = [90.0, 100.0, 110.0, 120.0], [80.0, 90.0, 100.0]
    config = JudgeConfig(run_to_run_cv=0.05, run_to_run_cv_dof=10.0)
    iv = ratio_interval(_arm("on", [105.0], cur_req), _arm("off", [90.0], ref_req),
                        "mean_ttft_ms", config=config, confidence=0.9, key="k")
    # one repeat each: the run term is the assumed CV^2 for each arm's single repeat
    run = 0.05 ** 2 * (1 + 1)
    w_c = (np.std(cur_req, ddof=1) / math.sqrt(4) / np.mean(cur_req)) ** 2
    w_r = (np.std(ref_req, ddof=1) / math.sqrt(3) / np.mean(ref_req)) ** 2
    assert (iv.n_current, iv.n_reference, iv.n_repeats) == (4, 3, 1)
    assert iv.run_var == pytest.approx(run)
    assert iv.se == pytest.approx(math.sqrt(w_c + w_r + run))
    assert iv.estimate == pytest.approx(105.0 / 90.0)
    assert iv.method == "requests+assumed-run-cv"


def test_bootstrapped_standard_errors_are_reproducible() -> None:
    rng = np.random.default_rng(2)
    cur, ref = list(rng.lognormal(4.6, 0.3, 40)), list(rng.lognormal(4.6, 0.3, 40))
    config = JudgeConfig(seed=5)

    def interval() -> object:
        return ratio_interval(_arm("on", [1.0], cur), _arm("off", [1.0], ref), "std_ttft_ms",
                              config=config, confidence=0.9, key="std_ttft_ms@c4")

    assert interval() == interval()
    other = ratio_interval(_arm("on", [1.0], cur), _arm("off", [1.0], ref), "std_ttft_ms",
                           config=JudgeConfig(seed=6), confidence=0.9, key="std_ttft_ms@c4")
    assert other.se != interval().se                      # the seed drives the resamples


# ------------------------------------------------------------------------------ building arms

def test_arm_from_points_keeps_repeat_order_and_only_real_numbers() -> None:
    points = [
        {"repeat": 2, "metrics": {"a": 1.0, "b": True, "c": "7", "d": 2},
         "requests": {"ttft_ms": [1.0, True, "x", math.inf, 2.0]}},
        {"repeat": 0, "metrics": {"a": 3.0, "b": 1.0, "c": 1.0, "d": 4}},
        {"repeat": 1},                                  # a repeat that measured no metrics
    ]
    arm = arm_from_points("on", points)
    assert arm.repeat_ids == [2, 0, 1]
    assert arm.metrics == {}            # every metric is missing from the third repeat
    assert arm.requests == {"ttft_ms": [1.0, 2.0]}
    two = arm_from_points("on", points[:2])
    assert two.metrics == {"a": [1.0, 3.0], "d": [2.0, 4.0]}
    assert arm_from_points("x", [{"repeat": 4}]).repeat_ids == [4]


def test_an_unregistered_metric_has_no_request_statistic() -> None:
    stats = arm_stats(Arm("a", [0], {"custom": [5.0]}, {"ttft_ms": [1.0, 2.0]}), "custom", 0)
    assert stats.values.tolist() == [[5.0]]
    assert (stats.pooled, stats.pooled_se, stats.n_requests) == (None, None, 0)
