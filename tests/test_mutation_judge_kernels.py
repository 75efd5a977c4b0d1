"""The judge's small kernels at their boundaries, against values worked out by hand or by scipy/
statsmodels (servegate.judge.stats, issue 15): verdict codes at the floor, TOST codes at the
margin, the TOST's power, Welch-Satterthwaite degrees of freedom, prior pooling, the
Newcombe interval, an interval's standard error from its width, and the seeds."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.proportion import confint_proportions_2indep

from servegate.judge import stats


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
