"""The history's noise budget (servegate.history.noise): power of n starts against n, and the
start and block levels measured apart from the nights' starts x blocks."""

from __future__ import annotations

import math

import numpy as np
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


def _nights(rng: np.random.Generator, *, nights: int, starts: int, blocks: int, start_sd: float,
            block_sd: float) -> list[dict[int, list[float]]]:
    """Values per server start of each night: a start's level shared by its blocks."""
    return [{s: list(100.0 * np.exp(rng.normal(0.0, start_sd) + rng.normal(0.0, block_sd, blocks)))
             for s in range(starts)} for _ in range(nights)]


def test_tight_blocks_in_spread_starts_are_a_large_start_level_not_many_repeats() -> None:
    """10 nights of 2 starts x 6 blocks, start log-sd 5 %, block log-sd 0.5 %: the start level
    carries the noise, so today's 12 blocks per arm resolve what 2 starts resolve. The flat
    reading (every block an independent repeat) claims a floor several times finer."""
    nights = _nights(np.random.default_rng(3), nights=10, starts=2, blocks=6, start_sd=0.05,
                     block_sd=0.005)
    levels = noise.measure_levels(nights)
    assert levels is not None
    assert (levels.starts, levels.blocks, levels.start_dof) == (20, 6, 19)
    assert 0.035 < math.sqrt(levels.start_var) < 0.07
    assert 0.003 < math.sqrt(levels.block_var) < 0.008 and levels.block_dof > 50
    found = noise.budget(levels, 0.05, starts_today=2, blocks_today=6, minutes_per_block=1.5)
    logs = np.log([v for night in nights for values in night.values() for v in values])
    flat = noise.reachable_floor(12, float(np.std(logs, ddof=1)), dof=logs.size - 1)
    assert found.reachable_floor > 2.5 * flat
    assert found.blocks_needed is None                  # more blocks cannot reach the floor
    assert found.repeats_needed is not None and found.repeats_needed > 2
    assert found.minutes_per_repeat == pytest.approx(9.0)   # one start = 6 blocks of 1.5 min


def test_spread_blocks_in_steady_starts_are_a_block_level_more_blocks_resolve() -> None:
    """Start log-sd 0.2 %, block log-sd 5 %: the block level carries the noise (read winsorized,
    as the judge reads it), so more blocks per start reach the floor at today's 2 starts."""
    nights = _nights(np.random.default_rng(2), nights=20, starts=2, blocks=6, start_sd=0.002,
                     block_sd=0.05)
    levels = noise.measure_levels(nights)
    assert levels is not None
    assert math.sqrt(levels.start_var) < 0.02 < 0.03 < math.sqrt(levels.block_var)
    found = noise.budget(levels, 0.05, starts_today=2, blocks_today=6, minutes_per_block=None)
    assert found.blocks_needed is not None and found.blocks_needed <= 40
    assert noise.power(2, 0.05, levels.sigma(found.blocks_needed), dof=levels.dof(
        found.blocks_needed)) >= noise.POWER


def test_one_block_per_start_is_the_flat_spread_of_every_value() -> None:
    """A store from before the levels (each value its own start): the start level is the
    spread of every value with n - 1 degrees of freedom, the block level not measured."""
    values = [[101.0, 97.5], [103.2], [99.1, 100.4, 98.8]]
    levels = noise.measure_levels([{i: [v] for i, v in enumerate(night)} for night in values])
    assert levels is not None
    logs = np.log([v for night in values for v in night])
    assert levels.sigma(1) == pytest.approx(float(np.std(logs, ddof=1)), rel=1e-12)
    assert levels.dof(1) == pytest.approx(5.0)
    assert (levels.block_var, levels.block_dof) == (0.0, 0.0)
    assert noise.measure_levels([{0: [100.0, 101.0, 99.0]}]) is None     # one start: no level
