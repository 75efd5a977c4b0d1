"""A sustained shift over consecutive nights: a one-sided CUSUM per gated aggregate.

Why: one night against its baseline hears only large regressions (its interval carries the
start level of two sittings); a small slowdown that stays (3 %, a commit that costs a little
every night) is evidence that accumulates. Page's CUSUM on the nights' values, standardised by
the level and spread the series' own reference nights measured, adds the evidence of each night
past an allowance ``k`` and flags the series when the sum passes ``h``: the fastest detection of
a sustained shift of ``2 k`` standard deviations for a given in-control run length (Lorden).

Units: ``k`` is half the shift the rule is tuned for (``design_shift``, relative, on the log
scale) in the reference nights' standard deviations; ``h`` is chosen for an in-control average
run length ``arl0`` by Siegmund's approximation ``ARL0 ~ (exp(2k b) - 2k b - 1) / (2k^2)``,
``b = h + 1.166``. The reference nights' spread is estimated (with ``W - 1`` dof), so the
realised false-alarm rate is calibrated by simulation (``servegate calibrate``,
servegate.calibration_sustained), not taken from the formula. Below the history and the
calibration (import layers) so that both apply the one rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize

DESIGN_SHIFT = 0.03           # a 3 % sustained slowdown
# nights between false alarms of one series, nominal (Siegmund); realised, with 14 reference
# nights and the self-starting rule: 0.6-0.7 false alarms per gfx95 nightly runner (its 4 gated
# aggregates) per quarter (servegate calibrate's sustained_shift; docs/judge.md)
ARL0 = 1000.0


def siegmund_arl0(k: float, h: float) -> float:
    """In-control average run length of a one-sided CUSUM on N(0, 1) values."""
    b = h + 1.166
    x = min(2 * k * b, 700.0)                   # beyond: an infinite run length, in effect
    return (math.exp(x) - x - 1) / (2 * k * k)


def threshold(k: float, arl0: float = ARL0) -> float:
    """The ``h`` whose in-control average run length is ``arl0`` (Siegmund)."""
    if k <= 0 or arl0 <= 1:
        raise ValueError(f"CUSUM: expected k > 0 and arl0 > 1, got {k}, {arl0}")
    def gap(h: float) -> float:
        return siegmund_arl0(k, h) - arl0

    if gap(0.0) >= 0:
        return 0.0
    high = 1.0
    while gap(high) < 0:
        high *= 2
    return float(optimize.brentq(gap, 0.0, high, xtol=1e-9))


@dataclass(frozen=True)
class Flags:
    """Per series (leading axes): the first monitored night flagged (-1: none), the number of
    alarms (the sum restarts at 0 after each), and the rule's ``k`` and ``h`` per series."""

    first: np.ndarray
    alarms: np.ndarray
    k: np.ndarray
    h: np.ndarray


def cusum(reference: np.ndarray, monitored: np.ndarray, *, worse: str = "higher",
          design_shift: float = DESIGN_SHIFT, arl0: float = ARL0,
          self_starting: bool = True) -> Flags:
    """Page's one-sided CUSUM of the ``monitored`` nights' log values (last axis, in order)
    against the ``reference`` nights' (last axis: at least 3), in the ``worse`` direction.

    ``self_starting``: each monitored night is standardised by the level and spread of every
    night before it (the reference and the monitored nights so far, Hawkins' self-starting
    CUSUM): an error in a short reference window's level would otherwise push every night of
    the quarter the same way and pile up false alarms."""
    reference = np.asarray(reference, float)
    monitored = np.asarray(monitored, float)
    if reference.shape[-1] < 3:
        raise ValueError("CUSUM: at least 3 reference nights are needed to measure a spread")
    if worse not in ("higher", "lower"):
        raise ValueError(f"CUSUM: worse must be 'higher' or 'lower', got {worse!r}")
    sign = 1.0 if worse == "higher" else -1.0
    n0 = reference.shape[-1]
    if self_starting:
        seen = np.concatenate([reference, monitored], axis=-1)
        count = np.arange(n0, n0 + monitored.shape[-1])               # nights before each
        sums = np.cumsum(seen, axis=-1)[..., n0 - 1:-1]
        squares = np.cumsum(seen ** 2, axis=-1)[..., n0 - 1:-1]
        level = sums / count
        spread = np.sqrt(np.maximum(squares - count * level ** 2, 0.0) / (count - 1))
    else:
        level = reference.mean(axis=-1, keepdims=True)
        spread = np.broadcast_to(reference.std(axis=-1, ddof=1, keepdims=True),
                                 monitored.shape)
    spread = np.where(spread > 0, spread, np.inf)
    z = sign * (monitored - level) / spread
    base = reference.std(axis=-1, ddof=1)
    k = math.log1p(design_shift) / 2.0 / np.where(base > 0, base, np.inf)
    h = np.vectorize(lambda kk: threshold(kk, arl0) if math.isfinite(kk) and kk > 0
                     else math.inf)(k)
    total = np.zeros(z.shape[:-1])
    first = np.full(z.shape[:-1], -1)
    alarms = np.zeros(z.shape[:-1], int)
    for night in range(z.shape[-1]):
        total = np.maximum(0.0, total + z[..., night] - k)
        hit = total > h
        first = np.where(hit & (first < 0), night, first)
        alarms += hit
        total = np.where(hit, 0.0, total)
    return Flags(first, alarms, np.asarray(k), np.asarray(h))
