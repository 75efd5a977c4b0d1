"""servegate.calibration.worlds: the block noise the nights are drawn from. The heavy-tailed,
bursty world keeps the plain world's sd and share of bursts but has a Student-t core and
bursts that last over consecutive blocks (what trimming a block or two cannot remove)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from servegate.calibration.worlds import BURST_P, BURST_SDS, CORE_RATIO, HEAVY_STAY, bursty_blocks


def _burst(blocks: np.ndarray, core: float) -> np.ndarray:
    """Blocks beyond the smallest burst less a few core sds: (nearly) the bursts."""
    return blocks > (BURST_SDS[0] - 1.5) * core


def test_the_heavy_world_keeps_the_sd_and_burst_share_with_longer_bursts_and_tails() -> None:
    block_cv = 0.02
    core = block_cv / CORE_RATIO
    plain = bursty_blocks(np.random.default_rng(1), (20_000, 12), block_cv)
    heavy = bursty_blocks(np.random.default_rng(1), (20_000, 12), block_cv, heavy=True)
    assert plain.std() == pytest.approx(block_cv, rel=0.05)
    assert heavy.std() == pytest.approx(block_cv, rel=0.15)
    for blocks in (plain, heavy):
        assert _burst(blocks, core).mean() == pytest.approx(BURST_P, abs=0.015)
    # a burst goes on into the next block: HEAVY_STAY in the heavy world, BURST_P in the plain
    for blocks, stay in ((plain, BURST_P), (heavy, HEAVY_STAY)):
        hit = _burst(blocks, core)
        following = hit[:, 1:][hit[:, :-1]].mean()
        assert following == pytest.approx(stay, abs=0.06)
    assert sps.kurtosis(heavy - np.where(_burst(heavy, core), heavy, 0.0), axis=None) > 1.0


def test_the_plain_world_draws_what_it_drew_before_the_heavy_one() -> None:
    """Seeded calibrations of the plain world reproduce: normal core, burst draw, sizes."""
    rng = np.random.default_rng(5)
    core = 0.01 / CORE_RATIO
    expected = rng.normal(0.0, core, (3, 4))
    expected = expected + np.where(rng.random((3, 4)) < BURST_P,
                                   rng.uniform(*BURST_SDS, (3, 4)) * core, 0.0)
    assert np.array_equal(bursty_blocks(np.random.default_rng(5), (3, 4), 0.01), expected)
