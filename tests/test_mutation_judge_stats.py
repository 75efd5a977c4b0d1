"""The judge's ratio and difference intervals against independent references (scipy's t tests,
limits the formulas must reach, numbers worked out by hand): holes mutation testing showed
(issue 15)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from servegate.judge import stats

CUR = [104.0, 99.0, 108.0, 101.0]
REF = [100.0, 97.0, 99.0, 95.0]


def test_unpaired_repeats_match_scipy_ttest_ind() -> None:
    ref = sps.ttest_ind(np.log(CUR), np.log(REF)).confidence_interval(0.9)
    got = stats.ratio_over_repeats(CUR, REF, confidence=0.9)
    assert got.estimate == pytest.approx(math.exp(np.log(CUR).mean() - np.log(REF).mean()))
    assert (got.low, got.high) == pytest.approx((math.exp(ref.low), math.exp(ref.high)))
    assert (got.method, got.n_current, got.n_reference, got.df) == ("repeats", 4, 4, 6.0)
    assert got.confidence == 0.9 and got.scale == "ratio"
    assert got.run_var == pytest.approx(got.se ** 2)          # no within-run part given


def test_paired_repeats_match_scipy_ttest_rel() -> None:
    ref = sps.ttest_rel(np.log(CUR), np.log(REF)).confidence_interval(0.95)
    got = stats.ratio_over_repeats(CUR, REF, confidence=0.95, paired=True)
    assert (got.low, got.high) == pytest.approx((math.exp(ref.low), math.exp(ref.high)))
    assert (got.method, got.df) == ("repeats-paired", 3.0)
    with pytest.raises(ValueError, match="paired comparison needs the same number of repeats "
                                         "in both arms"):
        stats.ratio_over_repeats(CUR, REF[:3], confidence=0.95, paired=True)


def test_a_strong_prior_makes_the_assumed_cv_the_spread() -> None:
    """With the assumed run-to-run CV worth (almost) infinite degrees of freedom, the se is
    that CV over the two arms' repeats, whatever the repeats' own spread."""
    got = stats.ratio_over_repeats(CUR, REF, confidence=0.9, prior_cv=0.05, prior_dof=1e12)
    assert got.se == pytest.approx(0.05 * math.sqrt(1 / 4 + 1 / 4), rel=1e-6)
    paired = stats.ratio_over_repeats(CUR, REF, confidence=0.9, paired=True, prior_cv=0.05,
                                      prior_dof=1e12)
    assert paired.se == pytest.approx(0.05 * math.sqrt(2 / 4), rel=1e-6)
    no_weight = stats.ratio_over_repeats(CUR, REF, confidence=0.9, prior_cv=0.5, prior_dof=0)
    assert no_weight.se == pytest.approx(stats.ratio_over_repeats(CUR, REF,
                                                                  confidence=0.9).se)


def test_within_run_variance_is_not_run_to_run() -> None:
    strong = dict(confidence=0.9, prior_cv=0.0, prior_dof=1e12)
    all_within = stats.ratio_over_repeats(CUR, REF, within_var=0.02, **strong)
    assert all_within.se == pytest.approx(math.sqrt(0.02 * 0.5), rel=1e-6)
    assert all_within.run_var == pytest.approx(0.0, abs=1e-12)
    half = stats.ratio_over_repeats(CUR, REF, prior_cv=0.1, prior_dof=1e12, within_var=0.01,
                                    confidence=0.9)
    assert half.run_var == pytest.approx(half.se ** 2 / 2, rel=1e-6)


@pytest.mark.parametrize(("values", "words"), [
    ([], "current repeats: need at least one value"),
    ([[1.0, 2.0]], "current repeats: need at least one value"),
    ([1.0, math.nan], "current repeats: contains NaN or infinite values"),
    ([1.0, math.inf], "current repeats: contains NaN or infinite values"),
    ([1.0, 0.0], "current repeats: values must be positive for a ratio"),
    ([1.0, -2.0], "current repeats: values must be positive for a ratio"),
])
def test_bad_repeats_are_named(values: list[float], words: str) -> None:
    with pytest.raises(ValueError) as info:
        stats.ratio_over_repeats(values, REF, confidence=0.9)
    assert str(info.value) == words
    with pytest.raises(ValueError) as info:
        stats.ratio_over_repeats(REF, values, confidence=0.9)
    assert str(info.value) == words.replace("current", "reference")


def test_values_just_above_zero_and_one_are_fine() -> None:
    got = stats.ratio_over_repeats([0.5, 0.6], [1.0, 1.2], confidence=0.9)
    assert got.estimate == pytest.approx(0.5)
    assert stats.ratio_over_repeats([1, 2], [3, 4], confidence=0.9).n_current == 2   # ints


def test_request_ratio_of_means_by_delta_method() -> None:
    rng = np.random.default_rng(3)
    cur, ref = rng.gamma(20, 5.5, 200), rng.gamma(20, 5.0, 300)
    got = stats.ratio_over_requests(cur, ref, "mean", confidence=0.9)
    assert got.estimate == pytest.approx(cur.mean() / ref.mean())
    se = math.sqrt((sps.sem(cur) / cur.mean()) ** 2 + (sps.sem(ref) / ref.mean()) ** 2)
    assert got.se == pytest.approx(se)
    assert (got.method, got.n_current, got.n_reference, got.n_repeats) == ("requests", 200, 300,
                                                                           1)
    assert got.run_var == 0.0 and 200 < got.df < 500
    with_runs = stats.ratio_over_requests(cur, ref, "mean", confidence=0.9, run_var=0.01,
                                          run_dof=8, repeats=(2, 2))
    assert with_runs.se == pytest.approx(math.sqrt(se ** 2 + 0.01), rel=1e-9)
    assert with_runs.run_var == pytest.approx(0.01) and with_runs.n_repeats == 2
    assert with_runs.df < got.df


def test_request_ratio_needs_positive_statistics() -> None:
    with pytest.raises(ValueError, match="statistic is not positive; a ratio is meaningless"):
        stats.ratio_over_requests([0.0, 0.0, 0.0], [1.0, 2.0, 3.0], "median", confidence=0.9)
    with pytest.raises(ValueError, match="statistic is not positive"):
        stats.ratio_over_requests([1.0, 2.0, 3.0], [0.0, 0.0, 0.0], "median", confidence=0.9)


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
