"""Change points in one nightly series: ruptures' PELT on log-values scaled by a robust noise
estimate, one-night blips set aside (why, and the rule: docs/history.md, Change points)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

import numpy as np

DEFAULT_BETA = 4.0          # penalty = beta * ln(n) on the noise-standardised series (calibrated)
DEFAULT_CONFIRM_NIGHTS = 2  # the change night plus one following night at the new level
MIN_SIGMA = 1e-3            # a series that never moves still has 0.1 % resolution, not infinite
MIN_NIGHTS = 3
_MAD_TO_SD = 1.0 / (0.6744897501960817 * math.sqrt(2.0))   # MAD of N(0, 2 s^2) differences -> s

Status = Literal["suspected", "confirmed"]


@dataclass(frozen=True)
class ChangePoint:
    """A level change starting at night ``index`` (the first night at the new level)."""

    index: int
    before: float           # geometric mean of the accepted nights of the segment before
    after: float            # ... and of the segment after (the metric's own unit)
    ratio: float            # after / before
    nights_after: int       # accepted nights at the new level so far
    status: Status


@dataclass(frozen=True)
class Detection:
    """Everything found in one series; ``analysed`` is False (with ``reason``) when it can't be."""

    n: int                                  # nights in the series
    change_points: tuple[ChangePoint, ...]
    transients: tuple[int, ...]             # nights set aside as one-off blips
    sigma: float                            # night-to-night log-sd the penalty was scaled by
    penalty: float
    analysed: bool = True
    reason: str = ""


def night_log_means(nights: Sequence[Sequence[float]]) -> np.ndarray | str:
    """Mean of the log of each night's repeats, or the reason the series has no log scale."""
    means = []
    for index, values in enumerate(nights):
        array = np.asarray(list(values), dtype=float)
        if array.size == 0:
            return f"night {index} has no values"
        if not np.all(np.isfinite(array)) or np.any(array <= 0):
            return f"night {index} has a value that is not a positive number ({array.tolist()})"
        means.append(float(np.log(array).mean()))
    return np.asarray(means, dtype=float)


def robust_sigma(y: np.ndarray, min_sigma: float = MIN_SIGMA) -> float:
    """Night-to-night sd from consecutive differences (median-based; steps and blips ignored)."""
    if y.size < 2:
        return min_sigma
    diffs = np.abs(np.diff(y))
    sigma = float(np.median(diffs)) * _MAD_TO_SD
    if sigma == 0.0 and np.any(diffs > 0):      # quantised metric: most nights identical
        sigma = float(np.mean(diffs)) * math.sqrt(math.pi) / 2.0
    return max(sigma, min_sigma)


def _segments(breakpoints: list[int]) -> list[tuple[int, int]]:
    bounds = [0, *breakpoints]
    return list(pairwise(bounds))


def _residual_sigma(z: np.ndarray, ends: list[int]) -> tuple[float, int]:
    """Pooled within-segment sd and its degrees of freedom (n - segments)."""
    bounds = _segments(ends)
    dof = z.size - len(bounds)
    if dof < 1:
        return 0.0, 0
    ss = sum(float(((z[a:b] - z[a:b].mean()) ** 2).sum()) for a, b in bounds)
    return math.sqrt(ss / dof), dof


def _small_sample_factor(dof: int) -> float:
    """t(0.99, dof) / z(0.99): an sd from few nights is uncertain, so the penalty must be too."""
    from scipy import stats

    return float(stats.t.ppf(0.99, dof) / stats.norm.ppf(0.99))


def _pelt(z: np.ndarray, penalty: float) -> list[int]:
    """Segment ends (exclusive, the last is len(z)) from ruptures' exact PELT search."""
    import ruptures as rpt  # local: the store and the CLI's add path never need it

    if z.size < 2:
        return [int(z.size)]
    algo = rpt.Pelt(model="l2", min_size=1, jump=1).fit(z.reshape(-1, 1))
    return [int(b) for b in algo.predict(pen=penalty)]


def detect(nights: Sequence[Sequence[float]], *, beta: float = DEFAULT_BETA,
           confirm_nights: int = DEFAULT_CONFIRM_NIGHTS, min_sigma: float = MIN_SIGMA,
           min_change: float = 0.0) -> Detection:
    """Change points of a series of nights (each a list of per-repeat values), oldest first.

    ``min_change`` drops change points smaller than that relative size (0: keep every
    significant one); the neighbouring segments are then merged and re-measured.
    """
    if confirm_nights < 1:
        raise ValueError(f"confirm_nights must be >= 1, got {confirm_nights}")
    n = len(nights)
    y = night_log_means(nights)
    if isinstance(y, str):
        return Detection(n, (), (), math.nan, math.nan, analysed=False,
                         reason=f"not analysed: {y}")
    if n < MIN_NIGHTS:
        return Detection(n, (), (), math.nan, math.nan, analysed=False,
                         reason=f"not analysed: {n} night(s), needs >= {MIN_NIGHTS}")
    sigma = robust_sigma(y, min_sigma)
    active = list(range(n))
    transients: list[int] = []
    penalty = beta * math.log(n)
    for _ in range(n):                              # each pass removes >= 1 night or stops
        penalty = beta * math.log(len(active))
        ends = _pelt(y[active] / sigma, penalty)
        short = [night for start, end in _segments(ends)[:-1] if end - start < confirm_nights
                 for night in active[start:end]]
        if not short or len(active) - len(short) < MIN_NIGHTS:
            break
        transients.extend(short)
        active = [night for night in active if night not in set(short)]
    z = y[active]
    # The median of few differences can undershoot: take the larger of it and the pooled
    # within-segment sd, widened by t/z at 99 % for the degrees of freedom it rests on.
    residual, dof = _residual_sigma(z, ends)
    if dof >= 1:
        widened = max(sigma, residual) * _small_sample_factor(dof)
        if widened > sigma:
            sigma = widened
            ends = _pelt(z / sigma, penalty)
    kept = list(ends[:-1])
    floor = math.log1p(min_change) if min_change > 0 else 0.0
    while True:
        bounds = _segments([*kept, len(active)])
        steps = [abs(z[b:c].mean() - z[a:b].mean()) for (a, b), (_, c) in pairwise(bounds)]
        if not steps or min(steps) >= floor:
            break
        kept.pop(int(np.argmin(steps)))
    points = []
    for (a, b), (_, c) in pairwise(bounds):
        before, after = math.exp(float(z[a:b].mean())), math.exp(float(z[b:c].mean()))
        points.append(ChangePoint(
            index=active[b], before=before, after=after, ratio=after / before,
            nights_after=c - b, status="confirmed" if c - b >= confirm_nights else "suspected"))
    return Detection(n, tuple(points), tuple(sorted(transients)), sigma, penalty)
