"""servegate.judge.stats against scipy references and numbers worked out by hand: the within-run
standard error of every statistic (delta method, order-statistic ranks at their edges, the bootstrap
for ``std``, leading "nights" axes), the kernels' edge cases (degrees of freedom below one, zero
totals, NaN bounds, no numpy warnings), the guidance at its thresholds, and non-inferiority at its
margin."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.proportion import confint_proportions_2indep
from statsmodels.stats.weightstats import ttost_ind, ttost_paired

from servegate.config.judge import JudgeConfig
from servegate.judge import stats
from servegate.judge.arms import Arm, ratio_interval
from servegate.judge.stats import (
    Interval,
    classify,
    direction,
    equivalence,
    guidance,
    log_bounds,
    log_se_within,
    per_check_confidence,
    pooled_run_variance,
    repeats_estimate,
    request_statistic,
    t_quantile,
    tost_confidence,
    tost_power,
    verdict,
)

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


# The judge's statistics against scipy/statsmodels references and by simulation (no sglang).
#
# Each test that guards against a named mutation of issue 11 says so in its docstring.


def _lognormal(n: int, centre: float, cv: float, seed: int) -> np.ndarray:
    return centre * np.exp(np.random.default_rng(seed).normal(0.0, cv, n))


def test_three_repeats_aa_false_positive_rate_is_nominal():
    """3 vs 3 repeats, identical arms: the interval excludes 1 at its nominal rate (a percentile
    bootstrap's range-of-data interval excludes it ~5 % at any level; z instead of t ~3x)."""
    rng = np.random.default_rng(0)
    cur = np.log(100 * np.exp(rng.normal(0, 0.02, (20000, 3))))
    ref = np.log(100 * np.exp(rng.normal(0, 0.02, (20000, 3))))
    theta, se, df = repeats_estimate(cur, ref, paired=False, prior_var=0.0, prior_dof=0.0)
    low, high = log_bounds(theta, se, df, 0.99)
    rate = float(np.mean((low > 0) | (high < 0)))
    assert 0.006 < rate < 0.014, rate
    z_low = theta - 2.576 * se
    assert float(np.mean(z_low > 0)) > 2 * float(np.mean(low > 0))   # the simulation can tell


def test_assumed_cv_is_pooled_with_measured_spread():
    """Kills 'measured-spread widening removed': the repeats' spread enters the variance with its
    degrees of freedom, pooled with the assumed CV (never replaced by it, nor it by them)."""
    cur, ref = np.log([100.0, 112.0, 91.0]), np.log([100.0, 99.0, 101.0])
    sum_sq = ((cur - cur.mean()) ** 2).sum() + ((ref - ref.mean()) ** 2).sum()
    var, df = pooled_run_variance(sum_sq, 4, 0.02 ** 2, 10)
    assert float(df) == 14
    assert float(var) == pytest.approx((10 * 0.02 ** 2 + sum_sq) / 14)
    _theta, se, _ = repeats_estimate(cur, ref, paired=False, prior_var=0.02 ** 2, prior_dof=10)
    assert float(se) == pytest.approx(math.sqrt(float(var) * (2 / 3)))
    tight = repeats_estimate(np.log([100.0, 101.0, 99.0]), ref, paired=False,
                             prior_var=0.02 ** 2, prior_dof=10)[1]
    assert float(se) > 2 * float(tight)


def test_mde_has_its_power_by_simulation():
    """Kills 'MDE returns floor + 0.5': a true change of exactly the MDE is flagged as a
    regression in ~80 % of draws at the interval's own level and df."""
    iv = Interval(1.0, 0.97, 1.03, 0.999, "repeats", 3, 3, se=0.012, df=8.0)
    mde = iv.minimal_detectable_effect(0.02)
    rng = np.random.default_rng(0)
    # theta_hat = true + se * t_df (a standardised t with the interval's own df)
    theta = math.log1p(mde) + 0.012 * rng.standard_t(8.0, 200000)
    low = theta - float(t_quantile(0.999, 8.0)) * 0.012
    power = float(np.mean(low > math.log1p(0.02)))
    assert 0.77 < power < 0.83, (mde, power)


def test_guidance_solves_for_repeats_at_the_current_estimate():
    """Kills 'samples_factor returns 2.0': 1.019 [1.009, 1.029] against a 2 % floor needs MORE
    data (the estimate sits just below the floor), by the factor (t se / distance)^2."""
    se = (math.log(1.029) - math.log(1.009)) / (2 * float(t_quantile(0.99, math.inf)))
    iv = Interval(1.019, 1.009, 1.029, 0.99, "repeats", 3, 3, se=se, run_var=0.0)
    guide = iv.guidance([1.02])
    expected = (float(t_quantile(0.99, math.inf)) * se / abs(math.log(1.019) - math.log(1.02))) ** 2
    assert not guide.decided
    assert guide.repeats_factor == pytest.approx(expected, rel=1e-9)
    assert guide.repeats_factor > 50
    assert iv.samples_factor(0.02) == pytest.approx(expected, rel=1e-9)
    far = Interval(1.30, 1.25, 1.35, 0.99, "repeats", 3, 3, se=0.015)
    assert far.guidance([1.02]).decided


def test_guidance_says_when_prompts_cannot_decide():
    """Run-to-run variance alone wider than the distance to the floor: no amount of prompts."""
    iv = Interval(1.03, 0.95, 1.12, 0.99, "requests+assumed-run-cv", 200, 200, se=0.032,
                  run_var=0.03 ** 2, n_repeats=1)
    guide = iv.guidance([1.05])
    assert guide.prompts_factor is None and "no amount of prompts" in guide.text
    mostly_within = Interval(1.03, 0.95, 1.12, 0.99, "requests", 200, 200, se=0.032,
                             run_var=0.001 ** 2, n_repeats=1)
    g = mostly_within.guidance([1.05])
    assert g.prompts_factor is not None and g.prompts_factor > 1


def test_within_run_se_against_scipy_references():
    """The mean's delta-method SE and a quantile's order-statistic SE agree with
    scipy.stats.bootstrap; the quantile ranks are scipy.stats.quantile_test's."""
    x = _lognormal(400, 100, 0.3, 2)
    boot = sps.bootstrap((x,), lambda s, axis: np.log(np.mean(s, axis=axis)), n_resamples=4000,
                         random_state=np.random.default_rng(0)).standard_error
    assert float(log_se_within(x, "mean")) == pytest.approx(boot, rel=0.1)
    boot_med = sps.bootstrap((x,), lambda s, axis: np.log(np.median(s, axis=axis)),
                             n_resamples=4000, random_state=np.random.default_rng(0)
                             ).standard_error
    assert float(log_se_within(x, "median")) == pytest.approx(boot_med, rel=0.25)
    ci = sps.quantile_test(x, q=np.median(x), p=0.5).confidence_interval(0.95)
    expected = (math.log(ci.high) - math.log(ci.low)) / (2 * 1.959963984540054)
    assert float(log_se_within(x, "median")) == pytest.approx(expected, rel=1e-9)


def test_tost_matches_statsmodels():
    """The no-op equivalence at level 1 - 2 alpha is statsmodels' TOST at alpha (no prior)."""
    rng = np.random.default_rng(5)
    for trial in range(40):
        a = np.log(100 * np.exp(rng.normal(0, 0.02, 4)))
        b = np.log(100 * np.exp(rng.normal(0.01 * (trial % 3), 0.02, 4)))
        for paired in (False, True):
            theta, se, df = repeats_estimate(a, b, paired=paired, prior_var=0.0, prior_dof=0.0)
            low, high = log_bounds(theta, se, df, tost_confidence(0.95))
            margin = math.log1p(0.03)
            ours = bool(-margin <= low and high <= margin)
            test = ttost_paired if paired else ttost_ind
            p = test(a, b, -margin, margin)[0]
            assert ours == (p < 0.05), (trial, paired, p)


def test_tost_power_rule():
    """Power of the TOST on identical arms: high when the margin is many standard errors wide,
    zero when t * se alone exceeds it (then the no-op check only reports)."""
    assert float(tost_power(0.002, 30.0, 0.9, 0.02)) > 0.99
    assert float(tost_power(0.02, 4.0, 0.998, 0.02)) == 0.0
    rng = np.random.default_rng(1)
    theta = 0.006 * rng.standard_normal(100000)
    simulated = np.mean(np.abs(theta) <= math.log1p(0.02) - float(t_quantile(0.9, 1e9)) * 0.006)
    assert float(tost_power(0.006, 1e9, 0.9, 0.02)) == pytest.approx(simulated, abs=0.01)


def test_verdicts_need_the_whole_interval_past_the_floor():
    assert direction("output_throughput") == "higher" and direction("accuracy") == "higher"
    assert direction("p99_ttft_ms") == "lower"
    with pytest.raises(ValueError, match="not registered"):
        direction("mystery_metric")
    lower_tp = Interval(0.8, 0.78, 0.82, 0.95, "repeats", 3, 3)
    assert verdict(lower_tp, "higher", 0.05) == "regression"
    assert verdict(lower_tp, "lower", 0.05) == "improvement"
    assert verdict(Interval(1.03, 1.01, 1.04, 0.95, "r", 3, 3), "lower", 0.05) == "pass"
    assert verdict(Interval(1.05, 1.01, 1.09, 0.95, "r", 3, 3), "lower", 0.05) == "inconclusive"
    codes = classify(np.array([0.06, -0.2, 0.0, np.nan]), np.array([0.09, -0.1, 0.04, 0.1]),
                     0.05, "lower")
    assert codes.tolist() == [1, 2, 0, 3]
    assert equivalence(Interval(1.0, 0.99, 1.01, 0.9, "r", 3, 3), 0.02) == "pass"
    assert equivalence(Interval(1.1, 1.05, 1.15, 0.9, "r", 3, 3), 0.02) == "regression"


def test_request_interval_and_multiplicity():
    stat = request_statistic("mean_ttft_ms")
    assert stat is not None and stat[0] == "ttft_ms"
    cur, ref = list(_lognormal(300, 120, 0.1, 6)), list(_lognormal(300, 100, 0.1, 7))
    # one repeat each and no assumed run-to-run CV: the requests alone decide
    slow = ratio_interval(Arm("run", [0], {"mean_ttft_ms": [120.0]}, {"ttft_ms": cur}),
                          Arm("base", [0], {"mean_ttft_ms": [100.0]}, {"ttft_ms": ref}),
                          "mean_ttft_ms", config=JudgeConfig(run_to_run_cv=0.0),
                          confidence=0.99, key="k")
    assert slow.method == "requests" and slow.run_var == 0.0
    assert verdict(slow, "lower", 0.05) == "regression" and slow.df > 100
    assert per_check_confidence(0.95, 20) == pytest.approx(0.9975)
    assert tost_confidence(0.95) == pytest.approx(0.90)


# The judge's small kernels at their boundaries, against values worked out by hand or by scipy/
# statsmodels (servegate.judge.stats, issue 15): verdict codes at the floor, TOST codes at the
# margin, the TOST's power, Welch-Satterthwaite degrees of freedom, prior pooling, the
# Newcombe interval, an interval's standard error from its width, and the seeds.


@pytest.mark.parametrize(("low", "high", "direction", "code"), [
    (-0.05, 0.10, "lower", 0),       # high exactly at the floor: the bad side is ruled out
    (-0.05, 0.1001, "lower", 3),
    (0.10, 0.3, "lower", 3),         # low exactly at the floor: not wholly worse
    (0.1001, 0.3, "lower", 1),
    (-0.3, -0.1001, "lower", 2),     # wholly better than the floor
    (-0.3, -0.10, "lower", 0),       # at -floor exactly: not an improvement
    (-0.10, 0.05, "higher", 0),      # higher is better: mirror image
    (-0.1001, 0.05, "higher", 3),
    (-0.3, -0.1001, "higher", 1),
    (0.1001, 0.3, "higher", 2),
    (math.nan, 0.0, "lower", 3),
    (0.0, math.nan, "lower", 3),
])
def test_classify_at_the_floor(low: float, high: float, direction: str, code: int) -> None:
    assert int(stats.classify(np.float64(low), np.float64(high), 0.10, direction)) == code


def test_classify_is_elementwise() -> None:
    codes = stats.classify(np.array([0.2, -0.05, -0.3]), np.array([0.3, 0.05, -0.2]), 0.1,
                           "lower")
    assert codes.tolist() == [1, 0, 2] and codes.dtype == np.int8


@pytest.mark.parametrize(("low", "high", "code"), [
    (-0.05, 0.05, 0), (-0.0501, 0.05, 3), (-0.05, 0.0501, 3), (0.05, 0.2, 3),
    (0.0501, 0.2, 1), (-0.2, -0.0501, 1), (-0.2, -0.05, 3), (math.nan, 0.0, 3),
    (0.0, math.nan, 3)])
def test_equivalence_at_the_margin(low: float, high: float, code: int) -> None:
    got = stats.classify_equivalence(np.float64(low), np.float64(high), 0.05)
    assert int(got) == code and got.dtype == np.int8


def test_tost_power_by_hand() -> None:
    # room = (ln 1.05 - 1.644854 * 0.01) / 0.01 = 3.234163; power = 2 Phi(room) - 1
    room = (math.log(1.05) - 1.6448536 * 0.01) / 0.01
    expected = 2 * sps.norm.cdf(room) - 1
    assert float(stats.tost_power(0.01, math.inf, 0.90, 0.05)) == pytest.approx(expected,
                                                                                 rel=1e-6)
    assert float(stats.tost_power(0.05, math.inf, 0.90, 0.05)) == 0.0      # negative room
    small_df = float(stats.tost_power(0.01, 3, 0.90, 0.05))
    assert small_df < expected                                             # t(3) is wider
    assert stats.tost_confidence(0.95) == pytest.approx(0.90)


def test_requests_estimate_welch_satterthwaite_by_hand() -> None:
    # within 0.02^2 + 0.03^2 = 0.0013; run 0.001 * (1/2 + 1/2) = 0.001; total 0.0023
    se, df, run = stats.requests_estimate(np.float64(0.02), np.float64(0.03), 11, 21, 0.001, 8,
                                          2, 2)
    denom = 0.0004 ** 2 / 10 + 0.0009 ** 2 / 20 + 0.001 ** 2 / 8
    assert float(se) == pytest.approx(math.sqrt(0.0023))
    assert float(df) == pytest.approx(0.0023 ** 2 / denom)
    assert float(run) == pytest.approx(0.001)
    # a run-to-run term worth no degrees of freedom leaves no df at all
    _, df0, _ = stats.requests_estimate(np.float64(0.02), np.float64(0.03), 11, 21, 0.001, 0,
                                        1, 1)
    assert math.isnan(float(df0))
    # known (infinite-dof) run variance adds nothing to the df denominator
    _, df_inf, _ = stats.requests_estimate(np.float64(0.02), np.float64(0.03), 11, 21, 0.001,
                                           math.inf, 1, 2)
    assert float(df_inf) == pytest.approx((0.0013 + 0.0015) ** 2 /
                                          (0.0004 ** 2 / 10 + 0.0009 ** 2 / 20))
    # one request: the within term counts one degree of freedom, not zero
    _, df1, _ = stats.requests_estimate(np.float64(0.02), np.float64(0.03), 1, 1, 0.0, 0, 1, 1)
    assert float(df1) == pytest.approx(0.0013 ** 2 / (0.0004 ** 2 + 0.0009 ** 2))
    _, none, _ = stats.requests_estimate(np.float64(0.0), np.float64(0.0), 5, 5, 0.0, 0, 1, 1)
    assert float(none) == math.inf


def test_prior_pooling_by_hand() -> None:
    var, dof = stats.pooled_run_variance(0.03, 3, 0.0004, 10)
    assert float(var) == pytest.approx((10 * 0.0004 + 0.03) / 13) and float(dof) == 13
    var0, dof0 = stats.pooled_run_variance(0.0, 0, 0.0004, 0)
    assert math.isnan(float(var0)) and float(dof0) == 0


def test_newcombe_is_statsmodels() -> None:
    iv = stats.newcombe_difference(80, 100, 70, 120, 0.9)
    low, high = confint_proportions_2indep(80, 100, 70, 120, method="newcomb", compare="diff",
                                           alpha=0.1)
    assert (iv.low, iv.high) == pytest.approx((low, high))
    assert iv.estimate == pytest.approx(0.8 - 70 / 120)
    assert (iv.confidence, iv.method, iv.n_current, iv.n_reference, iv.scale) == (
        0.9, "newcombe", 100, 120, "difference")


def test_standard_error_from_an_intervals_width() -> None:
    z = 1.959964
    ratio = stats.Interval(1.0, math.exp(-0.2), math.exp(0.2), 0.95, "m", 1, 1)
    assert ratio.standard_error() == pytest.approx(0.2 / z, rel=1e-6)
    t = stats.Interval(1.0, math.exp(-0.2), math.exp(0.2), 0.95, "m", 1, 1, df=4.0)
    assert t.standard_error() == pytest.approx(0.2 / sps.t.ppf(0.975, 4), rel=1e-6)
    diff = stats.Interval(0.0, -0.04, 0.04, 0.95, "m", 1, 1, scale="difference")
    assert diff.standard_error() == pytest.approx(0.04 / z, rel=1e-6)
    assert stats.Interval(1.0, 0.0, 2.0, 0.95, "m", 1, 1).standard_error() == math.inf
    assert stats.Interval(1.0, 0.5, -1.0, 0.95, "m", 1, 1).standard_error() == math.inf
    assert stats.Interval(1.0, 0.5, 2.0, 0.95, "m", 1, 1, se=0.3).standard_error() == 0.3


def test_to_model_and_change() -> None:
    ratio = stats.Interval(1.2, 1.1, 1.3, 0.95, "m", 1, 1)
    assert ratio.to_model(math.e) == pytest.approx(1.0)
    assert ratio.to_model(0.0) == -math.inf and ratio.to_model(-1.0) == -math.inf
    assert ratio.change() == pytest.approx((0.2, 0.1, 0.3))
    diff = stats.Interval(0.2, 0.1, 0.3, 0.95, "m", 1, 1, scale="difference")
    assert diff.to_model(-0.5) == -0.5 and diff.change() == (0.2, 0.1, 0.3)


def test_seeds_mix_the_key_and_stay_in_range() -> None:
    assert stats.check_seed(5, "k") == (5 * 1_000_003 + zlib.crc32(b"k")) % 2 ** 32
    assert stats.run_seed(5, "night") == (5 * 1_000_033 + zlib.crc32(b"night")) % 2 ** 31
    assert stats.check_seed(5, "a") != stats.check_seed(5, "b")
    assert stats.run_seed(2 ** 40, "x") < 2 ** 31 and stats.check_seed(2 ** 40, "x") < 2 ** 32
    assert stats.per_check_confidence(0.95, 0) == 0.95
    assert stats.per_check_confidence(0.95, 5) == pytest.approx(0.99)


# What would decide an undecided check (servegate.judge.stats.guidance), against numbers worked
# out by hand: distance d from the log estimate to the nearest boundary, the deciding standard
# error d / z (z = 1.959964 at 95 %, df infinite), the repeats factor (se / (d / z))^2, and the
# prompts factor within / ((d / z)^2 - run_var) (issue 15).


def _ratio_with(estimate: float, se: float, **kw: object) -> Interval:
    base: dict[str, object] = dict(n_repeats=1)
    base.update(kw)
    return Interval(estimate, estimate * 0.8, estimate * 1.2, 0.95, "requests", 24, 24, se=se,
                    **base)  # type: ignore[arg-type]


def test_decided_when_the_interval_clears_the_boundary() -> None:
    # d = ln(1.3 / 1.1) = 0.16705 > 1.96 * 0.05
    got = guidance(_ratio_with(1.3, 0.05), (1.1,))
    assert (got.decided, got.repeats_factor, got.prompts_factor, got.text) == (
        True, 1.0, 1.0, "decided")


def test_more_prompts_or_repeats_when_within_run_noise_dominates() -> None:
    # d = ln(1.2 / 1.1) = 0.0870114, target se 0.0443944, factor (0.1 / 0.0443944)^2 = 5.0739;
    # within = 0.01 - 0.001 = 0.009, prompts 0.009 / (0.0443944^2 - 0.001) = 9.2701
    got = guidance(_ratio_with(1.2, 0.1, run_var=0.001), (1.1,))
    assert not got.decided
    assert got.repeats_factor == pytest.approx(5.073926, rel=1e-6)
    assert got.prompts_factor == pytest.approx(9.270126, rel=1e-6)
    assert got.text == ("~9.3x the prompts per repeat, or ~6 repeats per arm (x5.1) would "
                        "decide at this estimate")


def test_repeats_scale_with_the_repeats_already_run() -> None:
    # d = ln(1.05 / 1.03) = 0.0192316 to the nearer of (0.95, 1.05); factor 25.9667; 3 repeats
    got = guidance(_ratio_with(1.03, 0.05, n_repeats=3), (0.95, 1.05))
    assert got.repeats_factor == pytest.approx(25.96666, rel=1e-5)
    assert got.text.endswith("~78 repeats per arm (x26.0) would decide at this estimate")


def test_no_prompts_can_decide_when_run_to_run_variance_alone_is_too_wide() -> None:
    # run_var 0.003 > target^2 0.0019708: +-1.96 * sqrt(0.003) = +-10.7 %
    got = guidance(_ratio_with(1.2, 0.1, run_var=0.003), (1.1,))
    assert got.prompts_factor is None
    assert got.text == ("no amount of prompts can decide (run-to-run variance alone is +-10.7% "
                        "at this level); ~6 repeats per arm (x5.1) would decide at this "
                        "estimate")
    all_run = guidance(_ratio_with(1.2, 0.1, run_var=0.01), (1.1,))   # within-run part is 0
    assert all_run.prompts_factor is None and all_run.text.startswith("no amount of prompts")


def test_a_difference_needs_questions() -> None:
    # d = 0.01, target 0.0051021, factor (0.02 / 0.0051021)^2 = 15.3658, x500 questions = 7683
    iv = Interval(-0.01, -0.05, 0.03, 0.95, "paired", 500, 500, scale="difference", se=0.02)
    got = guidance(iv, (-0.02,))
    assert got.repeats_factor == pytest.approx(15.365835, rel=1e-6)
    assert got.prompts_factor == got.repeats_factor
    assert got.text == "~7683 questions (x15.4) would decide at this estimate"


def test_an_estimate_on_the_boundary_cannot_be_decided() -> None:
    got = guidance(_ratio_with(1.1, 0.05), (1.1,))
    assert (got.decided, got.repeats_factor, got.prompts_factor) == (False, math.inf, None)
    assert got.text == "the estimate sits on the decision boundary: no sample size decides"


@pytest.mark.parametrize(("interval", "bounds"), [
    (Interval(1.2, 0.0, 1.5, 0.95, "m", 3, 3), (1.1,)),          # no se, low 0: infinite se
    (_ratio_with(0.0, 0.1), (1.1,)),                                   # a ratio of 0: no log
    (_ratio_with(1.2, 0.1), (0.0, -1.0)),                              # no positive ratio boundary
    (_ratio_with(1.2, 0.1), ()),
])
def test_nothing_to_extrapolate(interval: Interval, bounds: tuple[float, ...]) -> None:
    got = guidance(interval, bounds)
    assert (got.decided, got.repeats_factor, got.prompts_factor, got.text) == (
        False, math.inf, None, "no standard error: nothing to extrapolate")


def test_a_difference_accepts_non_positive_boundaries() -> None:
    iv = Interval(0.05, 0.0, 0.1, 0.95, "paired", 500, 500, scale="difference", se=0.01)
    assert guidance(iv, (0.0,)).decided                 # d 0.05 > 1.96 * 0.01
    assert not guidance(iv, (0.04,)).decided


# The judge's ratio and difference intervals against independent references (scipy's t tests,
# limits the formulas must reach, numbers worked out by hand; issue 15).


def test_paired_accuracy_difference_by_hand() -> None:
    # 20 pairs, 3 a-only, 1 b-only: difference 0.1, Agresti-Min se 0.0997744
    got = stats.paired_difference(12, 3, 1, 4, confidence=0.95)
    assert got.estimate == pytest.approx(0.1)
    assert got.se == pytest.approx(0.0997744, abs=1e-6)
    assert (got.scale, got.n_current, got.n_reference) == ("difference", 20, 20)
    assert got.method == "paired (Agresti-Min)"
    assert (got.low, got.high) == pytest.approx((0.0909091 - 1.959964 * 0.0997744,
                                                 0.0909091 + 1.959964 * 0.0997744), abs=1e-5)
    assert stats.paired_difference(12, 3, 1, 4, 0.9, method="vs baseline").method == \
        "vs baseline"


def test_request_statistic_only_for_registered_per_request_metrics() -> None:
    key, func = stats.request_statistic("p99_ttft_ms")
    assert key == "ttft_ms" and float(func(np.arange(101.0)[None, :])[0]) == 99.0
    assert stats.request_statistic("output_throughput") is None     # summary only
    assert stats.request_statistic("mean_itl_ms") is None           # no per-request samples
    assert stats.request_statistic("not_a_metric") is None


def test_samples_factor_on_the_difference_scale() -> None:
    interval = stats.Interval(0.05, 0.0, 0.1, 0.9, "paired", 50, 50, scale="difference",
                              se=0.03, df=math.inf)
    assert interval.samples_factor(0.02) == pytest.approx(
        interval.guidance([0.02]).repeats_factor)
    assert interval.samples_factor(0.02) != pytest.approx(
        interval.guidance([1.02]).repeats_factor)
