"""The simulated worlds every calibration draws its nights from: run, start x mode, block and
night-level noise, with interference bursts as measured on this VM (a block's plain log-sd is
``block_cv``; ``BURST_P`` of blocks carry a burst of ``BURST_SDS`` core sds)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Bursts relative to the core block noise: on this VM the MAD-based block log-sd is ~0.025 and
# bursts add +10-30 % (4-12 core sds) to ~8 % of blocks, which makes the plain sd ~0.065
# (2.5x the MAD-based one), as measured (4 starts x 6 blocks of the cpu load).
BURST_P = 0.08
BURST_SDS = (4.0, 12.0)
# ``block_cv`` is the plain block log-sd (as measured); the core normal part is this much smaller
_K_MEAN, _K_SQ = sum(BURST_SDS) / 2, (BURST_SDS[0] ** 2 + BURST_SDS[0] * BURST_SDS[1]
                                      + BURST_SDS[1] ** 2) / 3
CORE_RATIO = math.sqrt(1 + BURST_P * _K_SQ - (BURST_P * _K_MEAN) ** 2)   # plain sd / core sd
# The heavy-tailed, bursty world: a Student-t core and bursts that go on into the next block
# with HEAVY_STAY (trimming a block or two cannot remove them); the same burst share and sd.
HEAVY_DOF, HEAVY_STAY = 3, 0.6
ACCURACY, FLAKY = 0.93, 0.04


@dataclass
class Noise:
    run_cv: float
    block_cv: float
    interaction_cv: float           # of a mode pair's difference (as the judge's prior)
    # a night-level factor shared by every start, mode and point of a night (the driver, the
    # machine's temperature, the day): invisible to the night's own starts; 0 in every world
    # but the sustained-shift rule's guard row (calibration_sustained)
    night_cv: float = 0.0
    heavy: bool = False             # the heavy-tailed, bursty block world (bursty_blocks)
    half_cv: float = 0.0            # each half of a halves runner its own level a night

    @property
    def per_mode_interaction(self) -> float:
        """Each mode's own start x mode draw: two independent ones differ by interaction_cv."""
        return self.interaction_cv / math.sqrt(2.0)


def bursty_blocks(rng: np.random.Generator, shape: tuple[int, ...],
                  block_cv: float, heavy: bool = False) -> np.ndarray:
    """Log block factors: a normal core plus, with probability BURST_P, an interference burst of
    BURST_SDS core sds, scaled so the plain log-sd is ``block_cv`` (the model measured here).
    ``heavy``: a Student-t core and bursts lasting over consecutive blocks (last axis)."""
    core = block_cv / CORE_RATIO
    if not heavy:
        block = rng.normal(0.0, core, shape)
        hit = rng.random(shape) < BURST_P
    else:
        block = rng.standard_t(HEAVY_DOF, shape) * core / math.sqrt(HEAVY_DOF / (HEAVY_DOF - 2))
        draw, onset = rng.random(shape), BURST_P * (1 - HEAVY_STAY) / (1 - BURST_P)
        hit = draw < BURST_P
        for b in range(1, shape[-1]):
            hit[..., b] = draw[..., b] < np.where(hit[..., b - 1], HEAVY_STAY, onset)
    return block + np.where(hit, rng.uniform(*BURST_SDS, shape) * core, 0.0)
