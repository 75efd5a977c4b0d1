"""Noise budget: from a measured run-to-run spread, the repeats a floor needs and the floor reachable.

Why: the suites *assume* a run-to-run CV (``run_to_run_cv``) and pick repeats by habit; the
nights measure it. The design judged is the gate's: the current run's ``n`` repeats against a
reference with as many, on the log scale (a ratio), two-sided at ``alpha``. With log-sd ``s`` per
repeat the difference of means has sd ``s * sqrt(2 / n)``; the spread comes from the history
(``dof`` degrees of freedom, many nights), not from the ``n`` repeats, so the test statistic is
a t with ``dof`` degrees of freedom and the power to see ``delta = ln(1 + floor)`` is the
noncentral t's: ``P(|T| > t(1 - alpha/2, dof))`` with noncentrality ``delta / (s sqrt(2/n))``.
For large ``dof`` this is the normal formula ``n = 2 (z(1-alpha/2) + z(power))^2 s^2 / delta^2``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

POWER = 0.80
ALPHA = 0.05
MAX_REPEATS = 1000


@dataclass(frozen=True)
class Spread:
    """Run-to-run log-sd of single repeats and the degrees of freedom it rests on."""

    sigma: float
    dof: int
    nights: int
    values: int


def log_spread(nights: Sequence[Sequence[float]]) -> Spread | None:
    """Pooled log-sd of every repeat around the mean of the nights given (None: < 2 values)."""
    logs = np.log(np.asarray([v for night in nights for v in night], dtype=float))
    if logs.size < 2:
        return None
    return Spread(float(np.std(logs, ddof=1)), int(logs.size - 1), len(nights), int(logs.size))


def power(repeats: int, floor: float, sigma: float, alpha: float = ALPHA,
          dof: int | None = None) -> float:
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
                   dof: int | None = None, limit: int = MAX_REPEATS) -> int | None:
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
                    alpha: float = ALPHA, dof: int | None = None) -> float:
    """The smallest relative change ``repeats`` per arm detect with ``target`` power."""
    if sigma <= 0:
        return 0.0

    def gap(floor: float) -> float:
        return power(repeats, floor, sigma, alpha, dof) - target

    high = 0.01
    while gap(high) < 0:
        high *= 2
    return float(optimize.brentq(gap, 1e-12, high, xtol=1e-9))


@dataclass(frozen=True)
class Budget:
    """One gated (series, floor): what today's design resolves and what the floor would need."""

    spread: Spread
    floor: float
    repeats_today: int
    repeats_needed: int | None
    reachable_floor: float
    minutes_per_repeat: float | None

    @property
    def minutes_needed(self) -> float | None:
        if self.repeats_needed is None or self.minutes_per_repeat is None:
            return None
        return self.repeats_needed * self.minutes_per_repeat


def budget(spread: Spread, floor: float, repeats_today: int,
           minutes_per_repeat: float | None, alpha: float = ALPHA) -> Budget:
    return Budget(spread, floor, repeats_today,
                  repeats_needed(floor, spread.sigma, alpha=alpha, dof=spread.dof),
                  reachable_floor(max(1, repeats_today), spread.sigma, alpha=alpha,
                                  dof=spread.dof),
                  minutes_per_repeat)
