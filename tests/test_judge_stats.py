"""The judge's statistics against known cases (seeded, no sglang)."""

from __future__ import annotations

import numpy as np
import pytest

from servegate.judge.stats import (
    Interval,
    direction,
    equivalence,
    per_check_confidence,
    ratio_over_repeats,
    ratio_over_requests,
    request_statistic,
    tost_confidence,
    verdict,
    widen_for_run_spread,
)

MEAN = request_statistic("mean_ttft_ms")[1]


def _requests(n: int, centre: float, cv: float, seed: int) -> np.ndarray:
    return centre * np.exp(np.random.default_rng(seed).normal(0.0, cv, n))


def _judge(cur, ref, metric="mean_ttft_ms", floor=0.05, confidence=0.95, over="requests"):
    if over == "requests":
        iv = ratio_over_requests(cur, ref, MEAN, confidence=confidence, resamples=2000, seed=1)
    else:
        iv = ratio_over_repeats(cur, ref, confidence=confidence, resamples=2000, seed=1)
    return iv, verdict(iv, direction(metric), floor)


def test_identical_samples_pass():
    data = _requests(200, 100.0, 0.1, 0)
    iv, v = _judge(data, data.copy())
    assert v == "pass"
    assert iv.estimate == pytest.approx(1.0)
    assert iv.low < 1.0 < iv.high


def test_identical_repeats_pass():
    _, v = _judge([100.0, 101.0, 99.0, 100.5], [100.0, 101.0, 99.0, 100.5], over="repeats")
    assert v == "pass"


def test_shift_20_percent_tight_spread_is_regression():
    iv, v = _judge(_requests(100, 120.0, 0.02, 1), _requests(100, 100.0, 0.02, 2))
    assert v == "regression"
    assert iv.estimate == pytest.approx(1.2, rel=0.02)
    assert iv.low > 1.05


def test_shift_20_percent_over_repeats_is_regression():
    iv, v = _judge([120.0, 121.0, 119.5], [100.0, 100.8, 99.4], over="repeats")
    assert (v, iv.method) == ("regression", "repeats")


def test_two_samples_inconclusive():
    iv, v = _judge([100.0, 130.0], [95.0, 125.0])
    assert v == "inconclusive"
    assert iv.high - iv.low > 0.1
    assert iv.minimal_detectable_effect(0.05) > 0.05
    assert iv.samples_factor(0.05) > 1


def test_improvement_and_small_wobble():
    _, v = _judge(_requests(100, 80.0, 0.02, 3), _requests(100, 100.0, 0.02, 4))
    assert v == "improvement"
    # a significant but tiny (2%) slowdown stays under a 5% floor: pass, not regression
    iv, v = _judge(_requests(2000, 102.0, 0.02, 5), _requests(2000, 100.0, 0.02, 6))
    assert iv.low > 1.0 and v == "pass"


def test_direction_awareness_throughput():
    assert direction("output_throughput") == "higher"
    assert direction("p99_ttft_ms") == "lower"
    assert direction("median_itl_ms") == "lower"
    assert direction("accuracy") == "higher"
    with pytest.raises(ValueError, match="not registered"):
        direction("mystery_metric")
    lower_tp = Interval(0.8, 0.78, 0.82, 0.95, "repeats", 3, 3)
    assert verdict(lower_tp, "higher", 0.05) == "regression"
    assert verdict(lower_tp, "lower", 0.05) == "improvement"


def test_request_statistics():
    data = np.arange(1.0, 101.0)[None, :]
    assert request_statistic("median_tpot_ms")[1](data)[0] == pytest.approx(50.5)
    assert request_statistic("p99_e2e_latency_ms")[1](data)[0] == pytest.approx(
        np.percentile(data, 99))
    assert request_statistic("mean_itl_ms") is None
    assert request_statistic("output_throughput") is None


def test_seeded_and_reproducible():
    a, b = _requests(50, 100, 0.1, 7), _requests(50, 100, 0.1, 8)
    first = ratio_over_requests(a, b, MEAN, confidence=0.95, resamples=500, seed=3)
    again = ratio_over_requests(a, b, MEAN, confidence=0.95, resamples=500, seed=3)
    assert first == again


def _aa_night(rng_seed: int, n_points: int, confidence: float) -> int:
    """False regressions in one A/A night: both arms from the same distribution, floor 0."""
    rng = np.random.default_rng(rng_seed)
    fails = 0
    for i in range(n_points):
        cur = 100 * np.exp(rng.normal(0, 0.2, 150))
        ref = 100 * np.exp(rng.normal(0, 0.2, 150))
        iv = ratio_over_requests(cur, ref, MEAN, confidence=confidence, resamples=600,
                                 seed=rng_seed * 1000 + i)
        fails += verdict(iv, "lower", 0.0) == "regression"
    return fails


def test_multiplicity_aa_simulation_holds_familywise_rate():
    """Without correction about 1-(0.975)^20 = 40 % of A/A nights fail somewhere; with
    Bonferroni over the 20 points judged at once, about 2.5 % (one-sided) do."""
    nights, points = 40, 20
    corrected = per_check_confidence(0.95, points)
    corrected_bad = sum(_aa_night(s, points, corrected) > 0 for s in range(nights))
    naive_bad = sum(_aa_night(s, points, 0.95) > 0 for s in range(nights))
    assert corrected_bad / nights <= 0.10
    assert naive_bad > corrected_bad
    assert naive_bad / nights >= 0.15          # the simulation can detect the problem


def test_equivalence_tost():
    same_a, same_b = _requests(3000, 100, 0.1, 9), _requests(3000, 100, 0.1, 10)
    level = tost_confidence(0.95)
    assert level == pytest.approx(0.90)
    iv = ratio_over_requests(same_a, same_b, MEAN, confidence=level, resamples=1000, seed=0)
    assert equivalence(iv, 0.05) == "pass"
    shifted = ratio_over_requests(same_a * 1.2, same_b, MEAN, confidence=level,
                                  resamples=1000, seed=0)
    assert equivalence(shifted, 0.05) == "regression"
    few = ratio_over_requests(same_a[:3], same_b[:3], MEAN, confidence=level, resamples=1000,
                              seed=0)
    # "no significant difference" on 3 samples is not equivalence
    assert equivalence(few, 0.05) == "inconclusive"


def test_run_spread_widens_request_interval():
    iv = Interval(1.0, 0.98, 1.02, 0.95, "requests", 100, 100)
    wide = widen_for_run_spread(iv, 0.05, 1, 2)
    assert wide.low < iv.low and wide.high > iv.high
    assert wide.method == "requests+run-spread"
    assert verdict(iv, "lower", 0.05) == "pass"
    assert verdict(wide, "lower", 0.05) == "inconclusive"
