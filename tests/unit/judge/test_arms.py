"""The judge's ratio rule over whole repeats, and the arm plumbing around it
(servegate.judge.arms, issue 15): the repeats' t interval with the assumed run-to-run CV and the
measured within-run part as its prior (against scipy's t tests and arithmetic written out here),
how much of the variance is run-to-run, arrays with several leading axes, every refusal's
message, and the Interval that `ratio_interval` hands to the checks."""

from __future__ import annotations

import math
import zlib
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from servegate.config.judge import JudgeConfig
from servegate.judge import arms, stats
from servegate.judge.arms import (
    Arm,
    ArmStats,
    NotJudgeable,
    arm_from_baseline,
    arm_from_points,
    arm_stats,
    compare_arms,
    ratio_interval,
)
from servegate.judge.arms import compare_arms as compare
from servegate.judge.stats import (
    Interval,
    log_se_within,
)

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


# The judge's one rule for a ratio check (servegate.judge.arms.compare_arms) on hand-built arm
# statistics: input refusals, the request-level path with a measured run-to-run spread (sums of
# squares, degrees of freedom, method names) against arithmetic written out here, and simulated
# nights on a leading axis deciding exactly as each night alone (issue 15).


CFG = JudgeConfig(run_to_run_cv=0.0, min_repeats_for_repeat_bootstrap=3)


def _arm_stats(values: list[float], pooled: float | None = 100.0, se: float | None = 0.02,
         n: int = 50) -> ArmStats:
    return ArmStats(np.array([values]), None if pooled is None else np.array([pooled]),
                    None if se is None else np.array([se]), n)


@pytest.mark.parametrize(("cur", "ref"), [([0.0, 1.0], [1.0, 1.0]), ([1.0, 1.0], [1.0, 0.0]),
                                          ([-1.0, 1.0], [1.0, 1.0]), ([1.0, 1.0], [1.0, -1.0])])
def test_non_positive_repeat_values_are_refused(cur: list[float], ref: list[float]) -> None:
    with pytest.raises(ValueError) as info:
        compare(_arm_stats(cur), _arm_stats(ref), config=CFG, paired=False, what="mean_ttft_ms (a/b)")
    assert str(info.value) == "mean_ttft_ms (a/b): values must be positive for a ratio"


def test_values_below_one_are_fine() -> None:
    comp = compare(_arm_stats([0.5, 0.6], 0.5), _arm_stats([0.4, 0.3], 0.4), config=CFG, paired=False)
    assert float(comp.theta[0]) == pytest.approx(math.log(0.5 / 0.4))


@pytest.mark.parametrize(("cur", "ref"), [(0.0, 1.0), (1.0, 0.0), (-1.0, 1.0)])
def test_non_positive_statistics_are_refused(cur: float, ref: float) -> None:
    with pytest.raises(ValueError) as info:
        compare(_arm_stats([1.0], cur), _arm_stats([1.0], ref), config=CFG, paired=False, what="m")
    assert str(info.value) == "m: statistic is not positive; a ratio is meaningless"


def test_requests_path_with_a_measured_spread_by_hand() -> None:
    # 2 repeats vs 1 (below the 3 the repeat test needs): the requests' statistic plus the
    # repeats' spread, dof (2 - 1) + (1 - 1) = 1, pooled with the assumed CV (10 dof)
    cur, ref = _arm_stats([100.0, 110.0], 105.0, 0.02, 40), _arm_stats([90.0], 92.0, 0.03, 30)
    config = JudgeConfig(run_to_run_cv=0.05, run_to_run_cv_dof=10.0,
                         min_repeats_for_repeat_bootstrap=3)
    comp = compare(cur, ref, config=config, paired=False)
    sum_sq = 2 * (math.log(110 / 100) / 2) ** 2
    run_var = (10 * 0.0025 + sum_sq) / 11
    run = run_var * (1 / 2 + 1 / 1)
    total = 0.02 ** 2 + 0.03 ** 2 + run
    assert comp.method == "requests+run-spread+assumed-run-cv"
    assert float(comp.theta[0]) == pytest.approx(math.log(105 / 92))
    assert float(comp.se[0]) == pytest.approx(math.sqrt(total))
    assert float(comp.run_var[0]) == pytest.approx(run)
    df = total ** 2 / (0.02 ** 4 / 39 + 0.03 ** 4 / 29 + run ** 2 / 11)
    assert float(comp.df[0]) == pytest.approx(df)
    assert (comp.n_current, comp.n_reference, comp.n_repeats) == (40, 30, 2)


def test_requests_path_measures_the_spread_of_both_arms() -> None:
    config = JudgeConfig(run_to_run_cv=0.0, run_to_run_cv_dof=0.0,
                         min_repeats_for_repeat_bootstrap=3)
    comp = compare(_arm_stats([100.0], 100.0, 0.02), _arm_stats([90.0, 99.0], 95.0, 0.02), config=config,
                   paired=False)
    run_var = 2 * (math.log(99 / 90) / 2) ** 2 / 1            # reference's spread, 1 dof
    assert comp.method == "requests+run-spread"
    assert float(comp.run_var[0]) == pytest.approx(run_var * (1 + 1 / 2))


def test_requests_path_without_any_run_variance() -> None:
    comp = compare(_arm_stats([100.0], 100.0, 0.02, 40), _arm_stats([90.0], 90.0, 0.03, 30), config=CFG,
                   paired=False)
    assert comp.method == "requests"
    assert float(comp.se[0]) == pytest.approx(math.sqrt(0.0004 + 0.0009))
    assert float(comp.run_var[0]) == 0.0
    assert float(comp.df[0]) == pytest.approx(0.0013 ** 2 / (0.0004 ** 2 / 39 + 0.0009 ** 2 /
                                                             29))


def test_an_assumption_alone_is_named() -> None:
    config = JudgeConfig(run_to_run_cv=0.05, min_repeats_for_repeat_bootstrap=3)
    comp = compare(_arm_stats([100.0]), _arm_stats([90.0]), config=config, paired=False)
    assert comp.method == "requests+assumed-run-cv"


def test_nights_on_a_leading_axis_decide_as_each_night_alone() -> None:
    rng = np.random.default_rng(4)
    values = rng.lognormal(4.6, 0.05, (3, 2)), rng.lognormal(4.6, 0.05, (3, 2))
    pooled = rng.lognormal(4.6, 0.01, 3), rng.lognormal(4.6, 0.01, 3)
    ses = np.array([0.01, 0.02, 0.03]), np.array([0.02, 0.01, 0.04])
    config = JudgeConfig(run_to_run_cv=0.03, min_repeats_for_repeat_bootstrap=3)
    batch = compare(ArmStats(values[0], pooled[0], ses[0], 50),
                    ArmStats(values[1], pooled[1], ses[1], 50), config=config, paired=False)
    for night in range(3):
        one = compare(ArmStats(values[0][night:night + 1], pooled[0][night:night + 1],
                               ses[0][night:night + 1], 50),
                      ArmStats(values[1][night:night + 1], pooled[1][night:night + 1],
                               ses[1][night:night + 1], 50), config=config, paired=False)
        for field in ("theta", "se", "df", "run_var"):
            assert float(getattr(batch, field)[night]) == pytest.approx(
                float(getattr(one, field)[0])), (field, night)


def test_missing_statistics_are_not_judgeable_with_the_reason() -> None:
    with pytest.raises(NotJudgeable) as info:
        compare(_arm_stats([1.0], None, None, 1), _arm_stats([1.0]), config=CFG, paired=False, what="m")
    assert str(info.value) == ("m: 1/1 repeats and 1/50 per-request samples; needs >= 3 "
                               "repeats or >= 2 requests per arm")
    with pytest.raises(NotJudgeable) as info:
        compare(_arm_stats([1.0], None, None, 0), _arm_stats([1.0], None, None, 0), config=CFG,
                paired=False, what="m")
    assert str(info.value) == ("m has no per-request samples and only 1/1 repeats; needs >= 3 "
                               "repeats per arm")
    with pytest.raises(NotJudgeable):
        compare(_arm_stats([1.0], 1.0, None, 5), _arm_stats([1.0], 1.0, 0.1, 5), config=CFG, paired=False)
    with pytest.raises(NotJudgeable):
        compare(_arm_stats([1.0], 1.0, 0.1, 5), _arm_stats([1.0], 1.0, None, 5), config=CFG, paired=False)


def test_arm_stats_of_a_real_arm() -> None:
    arm = Arm("a", [0, 1], {"mean_ttft_ms": [1.0, 2.0]}, {"ttft_ms": [1.0, 2.0, 3.0]})
    stats = arm_stats(arm, "mean_ttft_ms", 0)
    assert stats.values.tolist() == [[1.0, 2.0]] and stats.values.dtype == float
    assert float(stats.pooled[0]) == 2.0 and stats.n_requests == 3
    assert float(stats.pooled_se[0]) == pytest.approx(np.std([1, 2, 3], ddof=1) / math.sqrt(3)
                                                      / 2)
    two = arm_stats(Arm("a", [0], {"mean_ttft_ms": [1.0]}, {"ttft_ms": [1.0, 3.0]}),
                    "mean_ttft_ms", 0)
    assert two.n_requests == 2 and two.pooled is not None
    one = arm_stats(Arm("a", [0], {"mean_ttft_ms": [1.0]}, {"ttft_ms": [1.0]}), "mean_ttft_ms",
                    0)
    assert (one.pooled, one.n_requests) == (None, 1)
    summary = arm_stats(Arm("a", [0], {"output_throughput": [5.0]}), "output_throughput", 0)
    assert summary.pooled is None and summary.values.tolist() == [[5.0]]
    assert arm_stats(Arm("a"), "mean_ttft_ms", 0).values.shape == (1, 0)


def test_arm_from_a_baseline_point() -> None:
    point = {"repeats": [0, 1], "metrics": {"m": {"repeats": [1, 2]}},
             "requests": {"ttft_ms": [1, 2], "tpot_ms": [], "x": "bad"}}
    arm = arm_from_baseline(point)
    assert (arm.label, arm.repeat_ids, arm.metrics, arm.requests) == (
        "baseline", [0, 1], {"m": [1.0, 2.0]}, {"ttft_ms": [1.0, 2.0]})
    assert arm_from_baseline({}).metrics == {}
    assert arm.values("m") == [1.0, 2.0] and arm.values("none") == []


# The judge's ratio and difference intervals against independent references (scipy's t tests,
# limits the formulas must reach, numbers worked out by hand; issue 15).


CUR_4 = [104.0, 99.0, 108.0, 101.0]


REF_4 = [100.0, 97.0, 99.0, 95.0]


def _median_arm(label: str, values: list[float], requests: list[float] | None = None) -> Arm:
    """An arm whose repeats give both a summary-only metric (``output_throughput``) and one
    with a per-request statistic (``mean_ttft_ms``, ``median_ttft_ms`` over ``requests``)."""
    metrics = {"output_throughput": values, "mean_ttft_ms": values, "median_ttft_ms": values}
    return Arm(label, list(range(len(values))), metrics, {"ttft_ms": requests} if requests else {})


def _interval(cur: Arm, ref: Arm, metric: str = "output_throughput", *, confidence: float = 0.9,
              paired: bool = False, **config: float) -> stats.Interval:
    return arms.ratio_interval(cur, ref, metric, config=JudgeConfig(**config),
                               confidence=confidence, key="k", paired=paired)


def _known_within(values: list[float], pooled_se: float) -> ArmStats:
    """Arm statistics with a known within-run standard error (the prior then gets weight)."""
    return ArmStats(np.array([values]), np.array([100.0]), np.array([pooled_se]), 50)


def test_unpaired_repeats_match_scipy_ttest_ind() -> None:
    ref = sps.ttest_ind(np.log(CUR_4), np.log(REF_4)).confidence_interval(0.9)
    got = _interval(_median_arm("cur", CUR_4), _median_arm("ref", REF_4), confidence=0.9)
    assert got.estimate == pytest.approx(math.exp(np.log(CUR_4).mean() - np.log(REF_4).mean()))
    assert (got.low, got.high) == pytest.approx((math.exp(ref.low), math.exp(ref.high)))
    assert (got.method, got.n_current, got.n_reference, got.df) == ("repeats", 4, 4, 6.0)
    assert got.confidence == 0.9 and got.scale == "ratio"
    assert got.run_var == pytest.approx(got.se ** 2)          # no within-run part known


def test_paired_repeats_match_scipy_ttest_rel() -> None:
    ref = sps.ttest_rel(np.log(CUR_4), np.log(REF_4)).confidence_interval(0.95)
    got = _interval(_median_arm("cur", CUR_4), _median_arm("ref", REF_4), confidence=0.95, paired=True)
    assert (got.low, got.high) == pytest.approx((math.exp(ref.low), math.exp(ref.high)))
    assert (got.method, got.df) == ("repeats-paired", 3.0)
    # pairing asked for arms of different repeats: judged unpaired (scipy's two-sample t)
    short = _interval(_median_arm("cur", CUR_4), _median_arm("ref", REF_4[:3]), confidence=0.95, paired=True)
    unpaired = sps.ttest_ind(np.log(CUR_4), np.log(REF_4[:3])).confidence_interval(0.95)
    assert (short.method, short.df) == ("repeats", 5.0)
    assert (short.low, short.high) == pytest.approx((math.exp(unpaired.low),
                                                     math.exp(unpaired.high)))
    # as many repeats but not the same ones (ids 1-4 vs 0-3): unpaired as well
    other = Arm("ref", [1, 2, 3, 4], {"output_throughput": REF_4})
    moved = _interval(_median_arm("cur", CUR_4), other, confidence=0.95, paired=True)
    assert (moved.method, moved.df) == ("repeats", 6.0)


def test_a_strong_prior_makes_the_assumed_cv_the_spread() -> None:
    """With the assumed run-to-run CV worth (almost) infinite degrees of freedom and no
    within-run noise, the se is that CV over the two arms' repeats, whatever the repeats' own
    spread."""
    strong = JudgeConfig(run_to_run_cv=0.05, run_to_run_cv_dof=1e12)
    got = arms.compare_arms(_known_within(CUR_4, 0.0), _known_within(REF_4, 0.0), config=strong,
                            paired=False)
    assert float(got.se[0]) == pytest.approx(0.05 * math.sqrt(1 / 4 + 1 / 4), rel=1e-6)
    paired = arms.compare_arms(_known_within(CUR_4, 0.0), _known_within(REF_4, 0.0), config=strong,
                               paired=True)
    assert paired.method == "repeats-paired"
    assert float(paired.se[0]) == pytest.approx(0.05 * math.sqrt(2 / 4), rel=1e-6)
    # worth no degrees of freedom, the assumption changes nothing: scipy's two-sample t
    no_weight = _interval(_median_arm("cur", CUR_4, [90.0, 100.0, 110.0]),
                          _median_arm("ref", REF_4, [85.0, 95.0, 105.0]), "mean_ttft_ms",
                          run_to_run_cv=0.5, run_to_run_cv_dof=0)
    res = sps.ttest_ind(np.log(CUR_4), np.log(REF_4))
    assert no_weight.se == pytest.approx((np.log(CUR_4).mean() - np.log(REF_4).mean())
                                         / res.statistic)


def test_within_run_variance_is_not_run_to_run() -> None:
    # one repeat's within-run variance: pooled se^2 x its 4 repeats = 0.005 x 4 = 0.02
    se_within = math.sqrt(0.02 / 4)
    strong = JudgeConfig(run_to_run_cv=0.0, run_to_run_cv_dof=1e12)
    all_within = arms.compare_arms(_known_within(CUR_4, se_within), _known_within(REF_4, se_within),
                                   config=strong, paired=False)
    assert float(all_within.se[0]) == pytest.approx(math.sqrt(0.02 * 0.5), rel=1e-6)
    assert float(all_within.run_var[0]) == pytest.approx(0.0, abs=1e-12)
    se_within = math.sqrt(0.01 / 4)                             # 0.01 within, 0.1^2 run-to-run
    half = arms.compare_arms(_known_within(CUR_4, se_within), _known_within(REF_4, se_within),
                             config=JudgeConfig(run_to_run_cv=0.1, run_to_run_cv_dof=1e12),
                             paired=False)
    assert float(half.run_var[0]) == pytest.approx(float(half.se[0]) ** 2 / 2, rel=1e-6)


@pytest.mark.parametrize(("values", "error", "words"), [
    ([], arms.NotJudgeable, "output_throughput missing from {bad}"),
    ([1.0, math.nan], arms.NotJudgeable,
     "output_throughput (current/reference): no standard error from these samples"),
    pytest.param([1.0, math.inf], arms.NotJudgeable,   # (inf - inf in the spread: numpy warns)
                 "output_throughput (current/reference): no standard error from these samples",
                 marks=pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")),
    ([1.0, 0.0], ValueError,
     "output_throughput (current/reference): values must be positive for a ratio"),
    ([1.0, -2.0], ValueError,
     "output_throughput (current/reference): values must be positive for a ratio"),
])
def test_bad_repeats_are_named(values: list[float], error: type[Exception], words: str) -> None:
    with pytest.raises(error) as info:
        _interval(_median_arm("current", values), _median_arm("reference", REF_4))
    assert str(info.value) == words.format(bad="current")
    with pytest.raises(error) as info:
        _interval(_median_arm("current", REF_4), _median_arm("reference", values))
    assert str(info.value) == words.format(bad="reference")


def test_values_just_above_zero_and_one_are_fine() -> None:
    got = _interval(_median_arm("cur", [0.5, 0.6]), _median_arm("ref", [1.0, 1.2]))
    assert got.estimate == pytest.approx(0.5)
    ints = arms.Arm("cur", [0, 1], {"output_throughput": [1, 2]})               # ints
    assert _interval(ints, arms.Arm("ref", [0, 1], {"output_throughput": [3, 4]})).n_current == 2


def test_request_ratio_of_means_by_delta_method() -> None:
    rng = np.random.default_rng(3)
    cur, ref = rng.gamma(20, 5.5, 200), rng.gamma(20, 5.0, 300)
    # one repeat each and no assumed CV: no run-to-run term at all
    got = _interval(_median_arm("cur", [110.0], list(cur)), _median_arm("ref", [100.0], list(ref)),
                    "mean_ttft_ms", run_to_run_cv=0.0)
    assert got.estimate == pytest.approx(cur.mean() / ref.mean())
    se = math.sqrt((sps.sem(cur) / cur.mean()) ** 2 + (sps.sem(ref) / ref.mean()) ** 2)
    assert got.se == pytest.approx(se)
    assert (got.method, got.n_current, got.n_reference, got.n_repeats) == ("requests", 200, 300,
                                                                           1)
    assert got.run_var == 0.0 and 200 < got.df < 500
    # two repeats each (below the 3 the repeats' t needs), identical within each arm: the
    # run-to-run variance is the assumed 0.1^2 worth 6 dof pooled with a spread of 0 on 2 dof
    with_runs = _interval(_median_arm("cur", [110.0, 110.0], list(cur)),
                          _median_arm("ref", [100.0, 100.0], list(ref)), "mean_ttft_ms",
                          run_to_run_cv=0.1, run_to_run_cv_dof=6,
                          min_repeats_for_repeat_bootstrap=3)
    run = (6 * 0.1 ** 2 + 0.0) / (2 + 6) * (1 / 2 + 1 / 2)
    assert with_runs.se == pytest.approx(math.sqrt(se ** 2 + run), rel=1e-9)
    assert with_runs.run_var == pytest.approx(run) and with_runs.n_repeats == 2
    assert with_runs.method == "requests+run-spread+assumed-run-cv"
    assert with_runs.df < got.df


def test_request_ratio_needs_positive_statistics() -> None:
    with pytest.raises(ValueError, match="statistic is not positive; a ratio is meaningless"):
        _interval(_median_arm("cur", [1.0], [0.0, 0.0, 0.0]), _median_arm("ref", [1.0], [1.0, 2.0, 3.0]),
                  "median_ttft_ms")
    with pytest.raises(ValueError, match="statistic is not positive"):
        _interval(_median_arm("cur", [1.0], [1.0, 2.0, 3.0]), _median_arm("ref", [1.0], [0.0, 0.0, 0.0]),
                  "median_ttft_ms")


# The judge's statistics against scipy/statsmodels references and by simulation (no sglang).
#
# Each test that guards against a named mutation of issue 11 says so in its docstring.


def _lognormal(n: int, centre: float, cv: float, seed: int) -> np.ndarray:
    return centre * np.exp(np.random.default_rng(seed).normal(0.0, cv, n))


def _repeats_interval(cur: list[float], ref: list[float], *, confidence: float,
                      paired: bool = False) -> Interval:
    """The judge's interval over whole repeats of a summary-only metric (no per-request
    samples, so no within-run estimate: the assumed CV gets no weight and the repeats decide)."""
    return ratio_interval(Arm("cur", list(range(len(cur))), {"output_throughput": cur}),
                          Arm("ref", list(range(len(ref))), {"output_throughput": ref}),
                          "output_throughput", config=JudgeConfig(), confidence=confidence,
                          key="k", paired=paired)


def test_unpaired_repeats_at_99_percent_match_scipy_ttest_ind():
    """Kills 'small-sample widening removed' (t with honest df replaced by z): the interval is
    scipy's two-sample t interval on log values, df = n_c + n_r - 2."""
    cur, ref = [101.0, 104.0, 99.5], [100.0, 98.0, 100.7]
    iv = _repeats_interval(cur, ref, confidence=0.99)
    ref_t = sps.ttest_ind(np.log(cur), np.log(ref), equal_var=True)
    ci = ref_t.confidence_interval(0.99)
    assert (iv.method, iv.df) == ("repeats", pytest.approx(4))
    assert math.log(iv.low) == pytest.approx(ci.low, rel=1e-9)
    assert math.log(iv.high) == pytest.approx(ci.high, rel=1e-9)


def test_paired_repeats_match_scipy_ttest_rel_and_beat_unpaired():
    """Kills 'paired comparison disabled': with pairing the interval is scipy's paired t."""
    on, off = [103.0, 110.0, 96.0, 105.0], [100.0, 108.0, 94.5, 102.0]
    iv = _repeats_interval(on, off, confidence=0.95, paired=True)
    ci = sps.ttest_rel(np.log(on), np.log(off)).confidence_interval(0.95)
    assert (iv.method, iv.df) == ("repeats-paired", 3)
    assert math.log(iv.low) == pytest.approx(ci.low, rel=1e-9)
    assert math.log(iv.high) == pytest.approx(ci.high, rel=1e-9)
    # shared server noise cancels only when paired: a 3 % effect is shown paired, not unpaired
    unpaired = _repeats_interval(on, off, confidence=0.95)
    assert iv.low > 1.0 > unpaired.low


def test_judge_pairs_on_vs_off_by_repeat():
    """Kills 'paired comparison disabled' at the judge level (ratio_interval, paired=True)."""
    rng = np.random.default_rng(4)
    server = np.exp(rng.normal(0, 0.08, 4))
    on = Arm("on", [0, 1, 2, 3], {"output_throughput": list(100 * server * 1.02)})
    off = Arm("off", [0, 1, 2, 3], {"output_throughput": list(100 * server)})
    config = JudgeConfig(run_to_run_cv=0.0, run_to_run_cv_dof=0)
    paired = ratio_interval(on, off, "output_throughput", config=config, confidence=0.95,
                            key="k", paired=True)
    unpaired = ratio_interval(on, off, "output_throughput", config=config, confidence=0.95,
                              key="k", paired=False)
    assert paired.method == "repeats-paired" and unpaired.method == "repeats"
    assert paired.high - paired.low < 0.2 * (unpaired.high - unpaired.low)


def test_request_path_widens_with_the_measured_spread_of_repeats():
    """Kills 'measured-spread widening removed' on the request path: a reference with 3 repeats
    that disagree widens a 1-repeat comparison; the same requests with agreeing repeats do not."""
    reqs = list(_lognormal(200, 100, 0.1, 1))
    config = JudgeConfig(run_to_run_cv=0.02, run_to_run_cv_dof=4, min_repeats_for_repeat_bootstrap=3)
    cur = Arm("run", [0], {"mean_ttft_ms": [100.0]}, {"ttft_ms": reqs})
    calm = Arm("base", [0, 1, 2], {"mean_ttft_ms": [100.0, 100.5, 99.5]}, {"ttft_ms": reqs})
    wild = Arm("base", [0, 1, 2], {"mean_ttft_ms": [100.0, 125.0, 80.0]}, {"ttft_ms": reqs})
    a = ratio_interval(cur, calm, "mean_ttft_ms", config=config, confidence=0.95, key="k")
    b = ratio_interval(cur, wild, "mean_ttft_ms", config=config, confidence=0.95, key="k")
    assert "run-spread" in b.method and "assumed-run-cv" in b.method
    assert b.se > 2 * a.se


def test_a_quantile_the_requests_cannot_bound_is_not_judged():
    """p99 of 16 requests: the order-statistic interval runs past the sample; inconclusive with
    that reason, never a verdict."""
    assert math.isnan(float(log_se_within(_lognormal(16, 100, 0.3, 3), "p99")))
    cur = Arm("run", [0], {"p99_ttft_ms": [150.0]}, {"ttft_ms": list(_lognormal(16, 100, .3, 3))})
    ref = Arm("base", [0], {"p99_ttft_ms": [100.0]}, {"ttft_ms": list(_lognormal(16, 100, .3, 4))})
    with pytest.raises(NotJudgeable, match="cannot bound"):
        ratio_interval(cur, ref, "p99_ttft_ms", config=JudgeConfig(), confidence=0.99, key="k")


def test_no_degrees_of_freedom_is_unreachable_not_a_regression():
    """One repeat per side, no requests to lean on and no assumption worth anything: the level
    cannot be reached; the judge says so instead of deciding."""
    cur = Arm("run", [0, 1], {"output_throughput": [50.0, 50.0]})
    ref = Arm("base", [0, 1], {"output_throughput": [100.0, 100.0]})
    config = JudgeConfig(run_to_run_cv=0.0, run_to_run_cv_dof=0)
    iv = ratio_interval(cur, ref, "output_throughput", config=config, confidence=0.99, key="k",
                        paired=True)
    assert iv.df == 1                      # two pairs: one degree of freedom, honest t
    with pytest.raises(NotJudgeable, match="needs >= 2 repeats"):
        ratio_interval(Arm("run", [0], {"output_throughput": [50.0]}),
                       Arm("base", [0], {"output_throughput": [100.0]}), "output_throughput",
                       config=config, confidence=0.99, key="k")


# The judge's ratio rule (servegate.judge.arms) at its edges, against scipy references and
# numbers worked out by hand (issue 15).


def _boot_log_std_se(x: np.ndarray, seed: int, resamples: int) -> np.ndarray:
    """scipy's bootstrap standard error of log(std) over the last axis."""
    res = sps.bootstrap((x,), lambda s, axis: np.log(np.std(s, axis=axis)), axis=-1,
                        n_resamples=resamples, method="percentile",
                        random_state=np.random.default_rng(seed))
    return np.asarray(res.standard_error)


REF_3 = [100.0, 97.0, 99.0]


def _sum_sq(values: list[float]) -> float:
    logs = np.log(values)
    return float(((logs - logs.mean()) ** 2).sum())


def _spread_arm(label: str, values: list[float], requests: list[float]) -> Arm:
    metrics = {"mean_ttft_ms": values, "median_ttft_ms": values, "std_ttft_ms": values}
    return Arm(label, list(range(len(values))), metrics, {"ttft_ms": requests})


def test_a_zero_assumed_cv_still_weighs_its_degrees_of_freedom() -> None:
    """run_to_run_cv 0 worth 10 dof (no within-run noise): the measured spread is pooled with a
    variance of 0 worth 10 dof."""
    config = JudgeConfig(run_to_run_cv=0.0, run_to_run_cv_dof=10.0)
    got = compare_arms(_known_within(CUR_4, 0.0), _known_within(REF_3, 0.0), config=config,
                       paired=False)
    var = (_sum_sq(CUR_4) + _sum_sq(REF_3)) / (5 + 10)
    assert float(got.se[0]) == pytest.approx(math.sqrt(var * (1 / 4 + 1 / 3)), rel=1e-12)
    assert float(got.df[0]) == 15.0


def test_within_run_share_with_unequal_and_paired_repeats() -> None:
    """With the prior dominant (1e12 dof) a repeat's variance is run_to_run_cv^2 + within =
    0.02, of which the within-run 0.01 (pooled se^2 x repeats, averaged over the arms): half of
    se^2 is run-to-run, whatever the repeats per arm (4 vs 3, or 4 paired: a difference has
    twice a repeat's variance)."""
    strong = JudgeConfig(run_to_run_cv=0.1, run_to_run_cv_dof=1e12)
    unequal = compare_arms(_known_within(CUR_4, math.sqrt(0.01 / 4)),
                           _known_within(REF_3, math.sqrt(0.01 / 3)), config=strong, paired=False)
    assert float(unequal.se[0]) ** 2 == pytest.approx(0.02 * (1 / 4 + 1 / 3), rel=1e-9)
    assert float(unequal.run_var[0]) == pytest.approx(0.01 * (1 / 4 + 1 / 3), rel=1e-9)
    paired = compare_arms(_known_within(CUR_4, math.sqrt(0.01 / 4)),
                          _known_within([*REF_3, 95.0], math.sqrt(0.01 / 4)), config=strong,
                          paired=True)
    assert paired.method == "repeats-paired"
    assert float(paired.se[0]) ** 2 == pytest.approx(2 * 0.02 / 4, rel=1e-9)
    assert float(paired.run_var[0]) == pytest.approx(2 * 0.01 / 4, rel=1e-9)


def test_identical_repeats_have_no_variance_at_all() -> None:
    # the requests do have within-run noise, but the repeats agree exactly: se 0, run_var 0
    requests = [90.0, 100.0, 110.0, 120.0]
    got = ratio_interval(_spread_arm("cur", [100.0] * 3, requests), _spread_arm("ref", [100.0] * 3, requests),
                         "mean_ttft_ms", config=JudgeConfig(run_to_run_cv=0.0,
                                                            run_to_run_cv_dof=0.0),
                         confidence=0.9, key="k")
    assert (got.estimate, got.se, got.run_var) == (1.0, 0.0, 0.0)


def test_request_statistics_below_one_are_fine_and_zero_is_named() -> None:
    # means 0.4 and 0.5: ratio 0.8, se by the delta method (sem 0.11547 / mean); 2 vs 3
    # repeats that agree within each arm (below the 4 the repeats' t needs here, no assumed CV)
    got = ratio_interval(_spread_arm("cur", [0.4, 0.4], [0.2, 0.4, 0.6]),
                         _spread_arm("ref", [0.5, 0.5, 0.5], [0.3, 0.5, 0.7]), "mean_ttft_ms",
                         config=JudgeConfig(run_to_run_cv=0.0,
                                            min_repeats_for_repeat_bootstrap=4),
                         confidence=0.9, key="k")
    assert got.estimate == pytest.approx(0.8)
    sem = 0.2 / math.sqrt(3)
    assert got.se == pytest.approx(math.hypot(sem / 0.4, sem / 0.5))
    assert got.n_repeats == 2
    with pytest.raises(ValueError) as info:
        ratio_interval(_spread_arm("cur", [1.0], [0.0, 0.0, 0.0]), _spread_arm("ref", [1.0], [1.0, 2.0]),
                       "median_ttft_ms", config=JudgeConfig(), confidence=0.9, key="k")
    assert str(info.value) == ("median_ttft_ms (cur/ref): statistic is not positive; a ratio "
                               "is meaningless")


def test_request_std_seeds_each_arm_apart() -> None:
    """The current arm's bootstrap uses the check's seed, the reference arm's that seed + 1."""
    rng = np.random.default_rng(9)
    cur, ref = rng.gamma(5.0, 20.0, 16), rng.gamma(5.0, 18.0, 16)
    for suite_seed in (0, 5):
        got = ratio_interval(_spread_arm("cur", [1.0], list(cur)), _spread_arm("ref", [1.0], list(ref)),
                             "std_ttft_ms", config=JudgeConfig(seed=suite_seed,
                                                               run_to_run_cv=0.0),
                             confidence=0.9, key="std_ttft_ms@c4")
        seed = (suite_seed * 1_000_003 + zlib.crc32(b"std_ttft_ms@c4")) % 2 ** 32
        se_c = float(_boot_log_std_se(cur, seed, 400))
        se_r = float(_boot_log_std_se(ref, seed + 1, 400))
        assert got.se == pytest.approx(math.hypot(se_c, se_r), rel=1e-12)
