"""Change points on log-values (ruptures PELT), the confirmation rule and the noise budget."""

from __future__ import annotations

import math

import numpy as np
import pytest

from servegate.history.changepoints import detect


def _nights(levels: list[float], noise_sd: float, seed: int, repeats: int = 1) -> list[list[float]]:
    rng = np.random.default_rng(seed)
    return [list(level * np.exp(rng.normal(0, noise_sd, repeats))) for level in levels]


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
