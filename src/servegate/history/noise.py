"""Noise budget: from the nights' noise at both levels the judge models, measured with its own
estimator, the server starts a floor needs and the floor reachable (why, and the formulas:
docs/history.md, Noise budget)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

from servegate.judge.budget import EFFICIENCY, MAX_BLOCKS, variance
from servegate.judge.nested import Component, nested_mean, satterthwaite

POWER = 0.80
ALPHA = 0.05
MAX_REPEATS = 1000


@dataclass(frozen=True)
class Levels:
    """The nights' noise by level (log scale), each with its degrees of freedom."""

    start_var: float        # between server starts (a start's level; nights' starts pooled)
    start_dof: int          # server starts - 1
    block_var: float        # between the blocks of one start (winsorized; 0: not measured)
    block_dof: float        # trimmed blocks - starts (0: one block per start, not measured)
    nights: int
    starts: int             # server starts measured
    blocks: int             # blocks per start used (the fewest any start had)

    def _noise(self) -> dict[str, float]:
        return {"between_var": self.start_var, "block_var": self.block_var}

    def sigma(self, blocks: int) -> float:
        """Log-sd of one server start's mean of ``blocks`` blocks (a repeat of that design)."""
        return math.sqrt(variance(self._noise(), 1, blocks))

    def dof(self, blocks: int) -> float | None:
        """Welch-Satterthwaite degrees of freedom of :meth:`sigma` (None: exact, no noise)."""
        parts = (Component(np.asarray(self.start_var), np.asarray(float(self.start_dof)),
                           "start"),
                 Component(np.asarray(self.block_var / (EFFICIENCY * blocks)),
                           np.asarray(self.block_dof if self.block_dof > 0 else np.inf),
                           "block"))
        dof = float(satterthwaite(parts))
        return dof if math.isfinite(dof) else None


def measure_levels(nights: Sequence[Mapping[int, Sequence[float]]]) -> Levels | None:
    """The levels of the nights given (each: its values per server start, blocks in order); None
    below two server starts. Every start keeps the fewest blocks any start has (as the judge's
    ``as_matrix``), so a store mixing schema-1 nights (one block per start) with in-server ones
    measures the block level only once those older nights left the current level."""
    rows = [list(values) for night in nights for values in night.values() if values]
    if len(rows) < 2:
        return None
    blocks = min(len(row) for row in rows)
    logs = np.log(np.asarray([row[:blocks] for row in rows], dtype=float))[None]
    found = nested_mean(logs, prior_var=0.0, prior_dof=0.0)
    block_dof = found.scalar("block_df")
    measured = blocks >= 2 and math.isfinite(block_dof)
    return Levels(start_var=found.scalar("measured_between_var"), start_dof=len(rows) - 1,
                  block_var=found.scalar("block_var") if measured else 0.0,
                  block_dof=block_dof if measured else 0.0, nights=len(nights),
                  starts=len(rows), blocks=blocks)


def power(repeats: int, floor: float, sigma: float, alpha: float = ALPHA,
          dof: float | None = None) -> float:
    """Probability that an ``n``-vs-``n`` repeat comparison detects a change of ``floor``."""
    if repeats < 1 or floor <= 0:
        raise ValueError(f"repeats must be >= 1 and floor > 0, got {repeats}, {floor}")
    if sigma <= 0:
        return 1.0
    noncentrality = math.log1p(floor) / (sigma * math.sqrt(2.0 / repeats))
    if dof is None:
        z = stats.norm.ppf(1 - alpha / 2)
        return float(stats.norm.cdf(noncentrality - z) + stats.norm.cdf(-noncentrality - z))
    t = stats.t.ppf(1 - alpha / 2, dof)
    value = stats.nct.sf(t, dof, noncentrality) + stats.nct.cdf(-t, dof, noncentrality)
    return float(value) if math.isfinite(value) else 1.0   # nct is NaN far in the tail: power 1


def repeats_needed(floor: float, sigma: float, *, target: float = POWER, alpha: float = ALPHA,
                   dof: float | None = None, limit: int = MAX_REPEATS) -> int | None:
    """Smallest repeats per arm with ``power >= target`` (None: more than ``limit``)."""
    if power(limit, floor, sigma, alpha, dof) < target:
        return None
    low, high = 0, limit                # power grows with repeats: bisect
    while high - low > 1:
        middle = (low + high) // 2
        if power(middle, floor, sigma, alpha, dof) >= target:
            high = middle
        else:
            low = middle
    return high


def reachable_floor(repeats: int, sigma: float, *, target: float = POWER,
                    alpha: float = ALPHA, dof: float | None = None) -> float:
    """The smallest relative change ``repeats`` per arm detect with ``target`` power."""
    if sigma <= 0:
        return 0.0

    def gap(floor: float) -> float:
        return power(repeats, floor, sigma, alpha, dof) - target

    high = 0.01
    while gap(high) < 0:
        high *= 2
    return float(optimize.brentq(gap, 1e-12, high, xtol=1e-9))


def blocks_needed(starts: int, floor: float, levels: Levels, *, target: float = POWER,
                  alpha: float = ALPHA, limit: int = MAX_BLOCKS) -> int | None:
    """Fewest blocks per start with ``power >= target`` at ``starts`` server starts per arm
    (None: more than ``limit``; the start level alone then keeps the floor out of reach)."""
    for blocks in range(1, limit + 1):
        if power(starts, floor, levels.sigma(blocks), alpha, levels.dof(blocks)) >= target:
            return blocks
    return None


@dataclass(frozen=True)
class Budget:
    """One gated (series, floor): what today's design resolves and what the floor would need.

    A repeat is one server start of today's ``blocks`` blocks: ``repeats_today`` and
    ``repeats_needed`` count server starts per arm."""

    levels: Levels
    floor: float
    blocks: int                     # blocks per start today (the latest night)
    repeats_today: int              # server starts per arm today
    repeats_needed: int | None      # server starts of ``blocks`` blocks the floor needs
    blocks_needed: int | None       # blocks per start the floor needs at today's starts
    reachable_floor: float
    minutes_per_repeat: float | None   # serving minutes of one start's blocks

    @property
    def sigma(self) -> float:
        return self.levels.sigma(self.blocks)

    @property
    def dof(self) -> float | None:
        return self.levels.dof(self.blocks)

    @property
    def minutes_needed(self) -> float | None:
        if self.repeats_needed is None or self.minutes_per_repeat is None:
            return None
        return self.repeats_needed * self.minutes_per_repeat


def budget(levels: Levels, floor: float, starts_today: int, blocks_today: int,
           minutes_per_block: float | None, alpha: float = ALPHA) -> Budget:
    """The budget of today's design (``starts_today`` x ``blocks_today`` per arm)."""
    blocks = max(1, blocks_today)
    sigma, dof = levels.sigma(blocks), levels.dof(blocks)
    return Budget(levels, floor, blocks, starts_today,
                  repeats_needed(floor, sigma, alpha=alpha, dof=dof),
                  blocks_needed(max(1, starts_today), floor, levels, alpha=alpha),
                  reachable_floor(max(1, starts_today), sigma, alpha=alpha, dof=dof),
                  None if minutes_per_block is None else minutes_per_block * blocks)
