"""Change points on log-values (ruptures PELT), the confirmation rule and the noise budget."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from servegate.history import noise
from servegate.history.calibrate import Scenario, measure, ruptures_detector
from servegate.history.changepoints import detect


def _nights(levels: list[float], noise_sd: float, seed: int, repeats: int = 1) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return [list(level * np.exp(rng.normal(0, noise_sd, repeats))) for level in levels]


def test_detection_and_false_alarm_rates_over_seeds() -> None:
    """The calibration target: 40 nights, 2 % noise, 8 % step at 20 vs a flat series."""
    detector = ruptures_detector()
    seeds = range(1000, 1060)            # not the seeds the penalty was calibrated on
    step = measure(detector, Scenario("step", step=0.08), seeds)
    flat = measure(detector, Scenario("flat"), seeds)
    assert step.exact_one_near >= 0.93
    assert flat.false_alarm <= 0.05


def test_step_is_located_with_before_after_and_ratio() -> None:
    nights = _nights([100.0] * 20 + [108.0] * 20, 0.02, seed=7, repeats=3)
    found = detect(nights)
    assert len(found.change_points) == 1
    cp = found.change_points[0]
    assert abs(cp.index - 20) <= 2
    logs = [np.log(v).mean() for v in nights]
    assert cp.before == pytest.approx(math.exp(np.mean(logs[:cp.index])))
    assert cp.after == pytest.approx(math.exp(np.mean(logs[cp.index:])))
    assert cp.ratio == pytest.approx(cp.after / cp.before)
    assert 1.05 < cp.ratio < 1.11
    assert cp.status == "confirmed" and cp.nights_after == 40 - cp.index


def test_last_night_step_is_suspected_then_confirmed_and_a_blip_is_set_aside() -> None:
    base = _nights([100.0] * 30, 0.02, seed=3)
    jump = [[125.0]]
    suspected = detect(base + jump)
    assert [(cp.index, cp.status) for cp in suspected.change_points] == [(30, "suspected")]
    confirmed = detect(base + jump + [[124.0]])
    assert [(cp.index, cp.status) for cp in confirmed.change_points] == [(30, "confirmed")]
    blip = detect(base + jump + [[100.5]], confirm_nights=2)
    assert blip.change_points == ()
    assert blip.transients == (30,)


def test_series_that_is_not_positive_is_not_analysed_with_the_night_named() -> None:
    found = detect([[1.0], [0.0], [1.0], [1.0]])
    assert not found.analysed
    assert "night 1" in found.reason
    assert not detect([[1.0], [1.0]]).analysed


def test_min_change_drops_small_steps() -> None:
    nights = _nights([100.0] * 20 + [103.0] * 20, 0.003, seed=5)
    assert len(detect(nights).change_points) == 1
    assert detect(nights, min_change=0.05).change_points == ()


def test_repeats_needed_matches_the_normal_formula_for_many_degrees_of_freedom() -> None:
    sigma, floor = 0.02, 0.02
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    normal_n = 2 * z * z * sigma**2 / math.log1p(floor) ** 2
    assert noise.repeats_needed(floor, sigma) == math.ceil(normal_n)
    few = noise.repeats_needed(floor, sigma, dof=4)
    assert few is not None and few > math.ceil(normal_n)     # an uncertain sd costs repeats


@pytest.mark.parametrize("repeats", [1, 3, 10])
def test_reachable_floor_has_the_target_power(repeats: int) -> None:
    floor = noise.reachable_floor(repeats, 0.05, dof=20)
    assert noise.power(repeats, floor, 0.05, dof=20) == pytest.approx(0.8, abs=1e-6)
    assert noise.reachable_floor(repeats + 1, 0.05, dof=20) < floor
