"""Change points on log-values (ruptures PELT), the confirmation rule and the noise budget."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from servegate.history import noise


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
