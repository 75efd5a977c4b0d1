"""Holes mutation testing left in servegate.judge.stats, pinned against scipy references and
numbers worked out by hand: the within-run standard error of every statistic (delta method,
order-statistic ranks at their edges, the bootstrap for ``std``, leading "nights" axes), the
kernels' edge cases (degrees of freedom below one, zero totals, NaN bounds, no numpy warnings),
the guidance at its thresholds, and non-inferiority at its margin."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from scipy import stats as sps

from servegate.config.judge import JudgeConfig
from servegate.judge import stats
from servegate.judge.arms import Arm, ArmStats, compare_arms, ratio_interval
from servegate.metrics import METRICS, Metric

Z95 = float(sps.t.ppf(0.975, math.inf))          # 1.959964: the two-sided 95 % normal quantile


def _order_statistic_se(x: np.ndarray, p: float) -> float:
    """scipy's distribution-free 95 % interval for the p-quantile, as a log-scale se."""
    ci = sps.quantile_test(x, q=float(np.quantile(x, p)), p=p).confidence_interval(0.95)
    return (math.log(ci.high) - math.log(ci.low)) / (2 * Z95)


def _boot_log_std_se(x: np.ndarray, seed: int, resamples: int) -> np.ndarray:
    """scipy's bootstrap standard error of log(std) over the last axis."""
    res = sps.bootstrap((x,), lambda s, axis: np.log(np.std(s, axis=axis)), axis=-1,
                        n_resamples=resamples, method="percentile",
                        random_state=np.random.default_rng(seed))
    return np.asarray(res.standard_error)


# ------------------------------------------------------------------------- log_se_within

@pytest.mark.filterwarnings("error")
def test_mean_se_by_hand() -> None:
    # [1, 3]: two samples are enough; sd sqrt(2), sem 1, mean 2 -> 0.5
    assert float(stats.log_se_within(np.array([1.0, 3.0]), "mean")) == pytest.approx(0.5)
    # a mean below one is divided by itself: [0.2, 0.6] sem 0.2, mean 0.4 -> 0.5
    assert float(stats.log_se_within(np.array([0.2, 0.6]), "mean")) == pytest.approx(0.5)
    # a mean of zero has no log: NaN, and without a division-by-zero warning
    assert math.isnan(float(stats.log_se_within(np.array([-1.0, 1.0]), "mean")))


def test_mean_se_is_per_night() -> None:
    # rows [1, 3] and [10, 30]: 0.5 each (the CV), not the pooled mean's
    got = stats.log_se_within(np.array([[1.0, 3.0], [10.0, 30.0]]), "mean")
    assert got.shape == (2,) and got == pytest.approx([0.5, 0.5])


def test_fewer_than_two_samples_give_nan_of_the_nights_shape() -> None:
    one = stats.log_se_within(np.array([5.0]), "mean")
    assert one.shape == () and math.isnan(float(one))
    many = stats.log_se_within(np.ones((2, 3, 1)), "median")
    assert many.shape == (2, 3) and many.dtype == float and np.all(np.isnan(many))


def test_median_of_eight_uses_the_sample_extremes() -> None:
    """n = 8: the 95 % ranks are 1 and 8 (binomial 0.5 tails 1/256 + 8/256 < 2.5 %), the
    widest interval still bounded; n = 5 is not bounded at all."""
    x = np.array([1.3, 0.9, 2.2, 1.0, 1.7, 0.8, 1.1, 3.0])
    expected = (math.log(3.0) - math.log(0.8)) / (2 * Z95)
    assert _order_statistic_se(x, 0.5) == pytest.approx(expected)
    assert float(stats.log_se_within(x, "median")) == pytest.approx(expected, rel=1e-12)
    assert math.isnan(float(stats.log_se_within(x[:5], "median")))
    unbounded = stats.log_se_within(np.ones((2, 3, 5)), "median")
    assert unbounded.shape == (2, 3) and np.all(np.isnan(unbounded))


@pytest.mark.filterwarnings("error")
def test_median_bounds_must_be_positive() -> None:
    """A lower order statistic at zero has no log: NaN, silently; below one is fine."""
    assert math.isnan(float(stats.log_se_within(np.arange(8.0), "median")))   # x_(1) = 0
    small = np.arange(1.0, 9.0) / 10                                          # 0.1 .. 0.8
    expected = (math.log(0.8) - math.log(0.1)) / (2 * Z95)
    assert float(stats.log_se_within(small, "median")) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("statistic", "p", "n"), [
    ("p90", 0.90, 36),        # upper rank exactly n (36): still bounded
    ("p90", 0.90, 300),
    ("p5", 0.05, 200),        # a one-digit quantile
    ("p97.5", 0.975, 400),    # a decimal quantile
])
def test_quantile_se_is_scipys_order_statistic_interval(statistic: str, p: float,
                                                        n: int) -> None:
    x = np.random.default_rng(n).lognormal(0.0, 0.5, n)   # unsorted: ranks must be exact
    got = float(stats.log_se_within(x, statistic))
    assert got == pytest.approx(_order_statistic_se(x, p), rel=1e-12)


def test_an_unknown_statistic_is_refused() -> None:
    with pytest.raises(ValueError, match="statistic 'x90'"):
        stats.log_se_within(np.arange(1.0, 50.0), "x90")


def test_std_se_is_scipys_bootstrap_with_seed_0_and_400_resamples() -> None:
    x = np.random.default_rng(7).gamma(5.0, 20.0, 24)
    assert float(stats.log_se_within(x, "std")) == pytest.approx(
        float(_boot_log_std_se(x, 0, 400)), rel=1e-12)
    assert float(stats.log_se_within(x, "std", seed=3, resamples=50)) == pytest.approx(
        float(_boot_log_std_se(x, 3, 50)), rel=1e-12)


def test_std_se_of_small_values_and_of_nights() -> None:
    """Values well below one (std ~0.03) keep their log; each night resamples its own row."""
    x = np.random.default_rng(8).gamma(5.0, 0.015, (2, 16))
    got = stats.log_se_within(x, "std", seed=1, resamples=60)
    assert got.shape == (2,)
    assert got == pytest.approx(_boot_log_std_se(x, 1, 60), rel=1e-12)
    # sanity against the normal-theory value sqrt(1 / (2 (n - 1))) ~ 0.18 for log(sd)
    assert np.all((got > 0.05) & (got < 0.6))


# ----------------------------------------------------------------------------- kernels

@pytest.mark.filterwarnings("error")
def test_pooled_variance_with_less_than_one_degree_of_freedom() -> None:
    # prior 0.01 worth 0.5 dof, nothing measured: the prior itself, 0.5 * 0.01 / 0.5
    var, dof = stats.pooled_run_variance(0.0, 0, 0.01, 0.5)
    assert float(var) == pytest.approx(0.01) and float(dof) == 0.5
    none, _ = stats.pooled_run_variance(0.0, 0, 0.01, 0.0)        # silently NaN
    assert math.isnan(float(none))


def test_paired_repeats_estimate_is_per_night() -> None:
    """Two nights on a leading axis: each is scipy's paired t on its own log differences."""
    cur = np.log([[104.0, 99.0, 108.0, 101.0], [90.0, 97.0, 93.0, 99.0]])
    ref = np.log([[100.0, 97.0, 99.0, 95.0], [91.0, 92.0, 95.0, 94.0]])
    theta, se, df = stats.repeats_estimate(cur, ref, paired=True, prior_var=0.0, prior_dof=0)
    for night in range(2):
        t = sps.ttest_rel(cur[night], ref[night])
        assert theta[night] == pytest.approx((cur[night] - ref[night]).mean())
        assert se[night] == pytest.approx(theta[night] / t.statistic)
        assert df[night] == t.df == 3


@pytest.mark.filterwarnings("error")
def test_welch_df_with_a_run_term_worth_half_a_degree_of_freedom() -> None:
    # within 0.02^2 + 0.03^2, run 0.001 * (1/2 + 1/2), run_dof 0.5
    _, df, _ = stats.requests_estimate(np.float64(0.02), np.float64(0.03), 11, 21, 0.001, 0.5,
                                       2, 2)
    denom = 0.0004 ** 2 / 10 + 0.0009 ** 2 / 20 + 0.001 ** 2 / 0.5
    assert float(df) == pytest.approx(0.0023 ** 2 / denom)
    # no degrees of freedom behind a run term: NaN df, and no division warning
    _, nan_df, _ = stats.requests_estimate(np.float64(0.02), np.float64(0.03), 11, 21, 0.001,
                                           0.0, 2, 2)
    assert math.isnan(float(nan_df))
    _, inf_df, _ = stats.requests_estimate(np.float64(0.0), np.float64(0.0), 5, 5, 0.0, 0.0,
                                           1, 1)
    assert float(inf_df) == math.inf


@pytest.mark.filterwarnings("error")
def test_tost_power_at_zero_and_infinite_se_is_silent() -> None:
    assert float(stats.tost_power(0.0, math.inf, 0.9, 0.05)) == 1.0      # no noise: certain
    assert math.isnan(float(stats.tost_power(math.inf, math.inf, 0.9, 0.05)))


@pytest.mark.parametrize(("low", "high"), [(math.nan, -0.2), (0.2, math.nan)])
def test_equivalence_with_one_nan_bound_is_inconclusive(low: float, high: float) -> None:
    """The other bound alone lies outside the margin; a NaN interval still decides nothing."""
    assert int(stats.classify_equivalence(np.float64(low), np.float64(high), 0.05)) == 3


def test_interval_from_log_by_hand() -> None:
    # theta ln 1.1, se 0.05, df 4: ln 1.1 -+ 2.776445 * 0.05 (t(4) 97.5 %)
    got = stats.interval_from_log(math.log(1.1), 0.05, 4.0, 0.95, "repeats", 3, 3)
    q = float(sps.t.ppf(0.975, 4))
    assert got.estimate == pytest.approx(1.1)
    assert (got.low, got.high) == pytest.approx((1.1 * math.exp(-q * 0.05),
                                                 1.1 * math.exp(q * 0.05)))
    assert (got.se, got.df, got.run_var, got.method) == (0.05, 4.0, 0.0, "repeats")


def test_paired_difference_at_90_percent() -> None:
    # as in test_paired_accuracy_difference_by_hand, with z = 1.644854 for 90 %
    got = stats.paired_difference(12, 3, 1, 4, 0.9)
    assert got.confidence == 0.9
    assert (got.low, got.high) == pytest.approx((0.0909091 - 1.644854 * 0.0997744,
                                                 0.0909091 + 1.644854 * 0.0997744), abs=1e-5)


def test_ratio_scale_below_one() -> None:
    iv = stats.Interval(0.9, 0.85, 0.95, 0.95, "m", 1, 1)
    assert iv.to_model(0.5) == pytest.approx(math.log(0.5))
    assert iv.standard_error() == pytest.approx((math.log(0.95) - math.log(0.85)) / (2 * Z95))


def test_seeds_stay_below_2_to_the_32() -> None:
    for seed in (5_000, 7_919, 123_456, 2 ** 31 - 1):
        got = stats.check_seed(seed, "check")
        assert 0 <= got < 2 ** 32
        assert got == (seed * 1_000_003 + zlib.crc32(b"check")) % 2 ** 32


def test_request_statistic_needs_both_quantity_and_statistic(
        monkeypatch: pytest.MonkeyPatch) -> None:
    base = METRICS["mean_ttft_ms"]
    for name, quantity, statistic in (("no_stat", "ttft_ms", None), ("no_qty", None, "mean")):
        monkeypatch.setitem(METRICS, name, Metric(name, base.direction, base.unit, name, name,
                                                  quantity=quantity, statistic=statistic))
        assert stats.request_statistic(name) is None


# ---------------------------------------------------------------------------- guidance

def _ratio(estimate: float, se: float, run_var: float = 0.0) -> stats.Interval:
    return stats.Interval(estimate, estimate * 0.8, estimate * 1.2, 0.95, "requests", 24, 24,
                          se=se, run_var=run_var, n_repeats=1)


def test_guidance_for_an_estimate_below_one() -> None:
    # d = ln(0.95 / 0.9) = 0.0540672; factor (0.0979982 / 0.0540672)^2 = 1.812526^2 = 3.28525
    got = stats.guidance(_ratio(0.9, 0.05), (0.95,))
    assert got.decided is False
    assert got.repeats_factor == pytest.approx((0.05 * Z95 / math.log(0.95 / 0.9)) ** 2)
    assert got.repeats_factor == pytest.approx(3.28525, rel=1e-5)
    assert got.text.endswith("~4 repeats per arm (x3.3) would decide at this estimate")


def test_an_interval_touching_the_boundary_is_not_decided() -> None:
    """q * se == distance exactly: the interval reaches the boundary, so it is not past it."""
    iv = stats.Interval(Z95, 0.0, 2 * Z95, 0.95, "paired", 500, 500, scale="difference", se=1.0)
    got = stats.guidance(iv, (0.0,))
    assert got.decided is False and got.repeats_factor == 1.0
    assert got.text == "~500 questions (x1.0) would decide at this estimate"


def test_a_distance_of_1e12_is_on_the_boundary() -> None:
    iv = stats.Interval(1e-12, -0.1, 0.1, 0.95, "paired", 500, 500, scale="difference", se=0.05)
    got = stats.guidance(iv, (0.0,))
    assert (got.decided, got.repeats_factor, got.prompts_factor) == (False, math.inf, None)
    assert got.text.startswith("the estimate sits on the decision boundary")


def test_run_variance_exactly_the_deciding_variance_leaves_prompts_out() -> None:
    """run_var == (d / q)^2: prompts would have to shrink the within-run part to zero."""
    d = abs(math.log(1.2) - math.log(1.1))
    target = d / Z95
    got = stats.guidance(_ratio(1.2, 0.1, run_var=target * target), (1.1,))
    assert got.decided is False and got.prompts_factor is None
    assert got.text.startswith("no amount of prompts can decide")


# ---------------------------------------------------------------------- non-inferiority

def _difference(low: float, high: float) -> stats.Interval:
    return stats.Interval((low + high) / 2, low, high, 0.95, "paired", 100, 100,
                          scale="difference")


@pytest.mark.parametrize(("low", "high", "expected"), [
    (-0.02, 0.03, "pass"),            # low exactly at -margin: non-inferior
    (0.0, 0.03, "pass"),
    (-0.0201, 0.03, "inconclusive"),
    (-0.05, -0.02, "inconclusive"),   # high exactly at -margin: not wholly below
    (-0.05, 0.01, "inconclusive"),    # reaches inside the margin
    (-0.05, -0.0201, "regression"),   # wholly worse than the margin
])
def test_noninferiority_at_the_margin(low: float, high: float, expected: str) -> None:
    assert stats.noninferiority(_difference(low, high), 0.02) == expected


# ------------------------------------- the judge's ratio rule (servegate.judge.arms), at its edges

CUR = [104.0, 99.0, 108.0, 101.0]
REF = [100.0, 97.0, 99.0]


def _sum_sq(values: list[float]) -> float:
    logs = np.log(values)
    return float(((logs - logs.mean()) ** 2).sum())


def _known_within(values: list[float], pooled_se: float) -> ArmStats:
    """Arm statistics with a known within-run standard error (the prior then gets weight)."""
    return ArmStats(np.array([values]), np.array([100.0]), np.array([pooled_se]), 50)


def _arm(label: str, values: list[float], requests: list[float]) -> Arm:
    metrics = {"mean_ttft_ms": values, "median_ttft_ms": values, "std_ttft_ms": values}
    return Arm(label, list(range(len(values))), metrics, {"ttft_ms": requests})


def test_a_zero_assumed_cv_still_weighs_its_degrees_of_freedom() -> None:
    """run_to_run_cv 0 worth 10 dof (no within-run noise): the measured spread is pooled with a
    variance of 0 worth 10 dof."""
    config = JudgeConfig(run_to_run_cv=0.0, run_to_run_cv_dof=10.0)
    got = compare_arms(_known_within(CUR, 0.0), _known_within(REF, 0.0), config=config,
                       paired=False)
    var = (_sum_sq(CUR) + _sum_sq(REF)) / (5 + 10)
    assert float(got.se[0]) == pytest.approx(math.sqrt(var * (1 / 4 + 1 / 3)), rel=1e-12)
    assert float(got.df[0]) == 15.0


def test_within_run_share_with_unequal_and_paired_repeats() -> None:
    """With the prior dominant (1e12 dof) a repeat's variance is run_to_run_cv^2 + within =
    0.02, of which the within-run 0.01 (pooled se^2 x repeats, averaged over the arms): half of
    se^2 is run-to-run, whatever the repeats per arm (4 vs 3, or 4 paired: a difference has
    twice a repeat's variance)."""
    strong = JudgeConfig(run_to_run_cv=0.1, run_to_run_cv_dof=1e12)
    unequal = compare_arms(_known_within(CUR, math.sqrt(0.01 / 4)),
                           _known_within(REF, math.sqrt(0.01 / 3)), config=strong, paired=False)
    assert float(unequal.se[0]) ** 2 == pytest.approx(0.02 * (1 / 4 + 1 / 3), rel=1e-9)
    assert float(unequal.run_var[0]) == pytest.approx(0.01 * (1 / 4 + 1 / 3), rel=1e-9)
    paired = compare_arms(_known_within(CUR, math.sqrt(0.01 / 4)),
                          _known_within([*REF, 95.0], math.sqrt(0.01 / 4)), config=strong,
                          paired=True)
    assert paired.method == "repeats-paired"
    assert float(paired.se[0]) ** 2 == pytest.approx(2 * 0.02 / 4, rel=1e-9)
    assert float(paired.run_var[0]) == pytest.approx(2 * 0.01 / 4, rel=1e-9)


def test_identical_repeats_have_no_variance_at_all() -> None:
    # the requests do have within-run noise, but the repeats agree exactly: se 0, run_var 0
    requests = [90.0, 100.0, 110.0, 120.0]
    got = ratio_interval(_arm("cur", [100.0] * 3, requests), _arm("ref", [100.0] * 3, requests),
                         "mean_ttft_ms", config=JudgeConfig(run_to_run_cv=0.0,
                                                            run_to_run_cv_dof=0.0),
                         confidence=0.9, key="k")
    assert (got.estimate, got.se, got.run_var) == (1.0, 0.0, 0.0)


def test_request_statistics_below_one_are_fine_and_zero_is_named() -> None:
    # means 0.4 and 0.5: ratio 0.8, se by the delta method (sem 0.11547 / mean); 2 vs 3
    # repeats that agree within each arm (below the 4 the repeats' t needs here, no assumed CV)
    got = ratio_interval(_arm("cur", [0.4, 0.4], [0.2, 0.4, 0.6]),
                         _arm("ref", [0.5, 0.5, 0.5], [0.3, 0.5, 0.7]), "mean_ttft_ms",
                         config=JudgeConfig(run_to_run_cv=0.0,
                                            min_repeats_for_repeat_bootstrap=4),
                         confidence=0.9, key="k")
    assert got.estimate == pytest.approx(0.8)
    sem = 0.2 / math.sqrt(3)
    assert got.se == pytest.approx(math.hypot(sem / 0.4, sem / 0.5))
    assert got.n_repeats == 2
    with pytest.raises(ValueError) as info:
        ratio_interval(_arm("cur", [1.0], [0.0, 0.0, 0.0]), _arm("ref", [1.0], [1.0, 2.0]),
                       "median_ttft_ms", config=JudgeConfig(), confidence=0.9, key="k")
    assert str(info.value) == ("median_ttft_ms (cur/ref): statistic is not positive; a ratio "
                               "is meaningless")


def test_request_std_seeds_each_arm_apart() -> None:
    """The current arm's bootstrap uses the check's seed, the reference arm's that seed + 1."""
    rng = np.random.default_rng(9)
    cur, ref = rng.gamma(5.0, 20.0, 16), rng.gamma(5.0, 18.0, 16)
    for suite_seed in (0, 5):
        got = ratio_interval(_arm("cur", [1.0], list(cur)), _arm("ref", [1.0], list(ref)),
                             "std_ttft_ms", config=JudgeConfig(seed=suite_seed,
                                                               run_to_run_cv=0.0),
                             confidence=0.9, key="std_ttft_ms@c4")
        seed = (suite_seed * 1_000_003 + zlib.crc32(b"std_ttft_ms@c4")) % 2 ** 32
        se_c = float(_boot_log_std_se(cur, seed, 400))
        se_r = float(_boot_log_std_se(ref, seed + 1, 400))
        assert got.se == pytest.approx(math.hypot(se_c, se_r), rel=1e-12)
