"""Direction-aware ratio intervals and verdicts (significance AND a practical floor).

A check compares a *current* arm with a *reference* arm (a stored baseline, or ``off`` inside the
same run) through the ratio current/reference of one metric. The interval is a seeded percentile
bootstrap: over whole repeats when both arms have enough of them (run-to-run noise is the noise
that matters), over per-request samples otherwise (then it only sees within-run noise, so callers
may widen it with a known run-to-run spread). Verdicts need the *whole* interval past the floor,
so a small but "significant" wobble is never a regression, and a wide interval is inconclusive.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as sps

from servegate.accuracy.paired import wilson  # the one Wilson interval (scipy)
from servegate.metrics import METRICS, Direction, direction, statistic_fn  # noqa: F401

Verdict = Literal["pass", "regression", "improvement", "inconclusive"]
VERDICTS: tuple[str, ...] = ("pass", "regression", "improvement", "inconclusive")

POWER_Z = float(sps.norm.ppf(0.8))      # 80 % power for the minimal detectable effect


def request_statistic(metric: str) -> tuple[str, Callable[[np.ndarray], np.ndarray]] | None:
    """For metrics recomputable from per-request samples: (requests key, row-wise statistic).

    ``mean_ttft_ms`` -> (``ttft_ms``, mean over axis -1), as the metric registry declares it.
    Summary-only metrics (ITL, throughput) return None and can only be judged over repeats.
    """
    registered = METRICS.get(metric)
    if registered is None or registered.quantity is None or registered.statistic is None:
        return None
    return registered.quantity, statistic_fn(registered.statistic)


def per_check_confidence(confidence: float, n_checks: int) -> float:
    """Bonferroni: ``n_checks`` intervals at 1 - alpha/m keep the family-wise rate <= alpha."""
    return 1.0 - (1.0 - confidence) / max(1, n_checks)


def check_seed(seed: int, key: str) -> int:
    """A per-check seed, so adding a check never changes another check's interval."""
    return (seed * 1_000_003 + zlib.crc32(key.encode())) % (2**32)


@dataclass(frozen=True)
class Interval:
    """Point estimate and interval of current/reference (``scale='ratio'``) or of a difference."""

    estimate: float
    low: float
    high: float
    confidence: float
    method: str                     # "repeats", "repeats-paired", "requests", ... (+ notes)
    n_current: int
    n_reference: int
    scale: Literal["ratio", "difference"] = "ratio"

    def change(self) -> tuple[float, float, float]:
        """(estimate, low, high) as changes: ratio - 1 on the ratio scale, as-is otherwise."""
        shift = 1.0 if self.scale == "ratio" else 0.0
        return self.estimate - shift, self.low - shift, self.high - shift

    def _spread(self) -> float:
        """Standard error on the log scale (ratio) or raw scale (difference)."""
        z = float(sps.norm.ppf(0.5 + self.confidence / 2))
        if self.scale == "ratio":
            if self.low <= 0 or self.high <= 0:
                return math.inf
            return (math.log(self.high) - math.log(self.low)) / (2 * z)
        return (self.high - self.low) / (2 * z)

    def minimal_detectable_effect(self, floor: float) -> float:
        """Smallest true change (fraction) this design flags as past ``floor`` with 80 % power."""
        z = float(sps.norm.ppf(0.5 + self.confidence / 2))
        se = self._spread()
        if not math.isfinite(se):
            return math.inf
        if self.scale == "ratio":
            return math.exp(math.log1p(floor) + (z + POWER_Z) * se) - 1.0
        return floor + (z + POWER_Z) * se

    def samples_factor(self, floor: float) -> float:
        """How many times the current samples would shrink the half-width to ``floor``."""
        z = float(sps.norm.ppf(0.5 + self.confidence / 2))
        se = self._spread()
        width = math.log1p(floor) if self.scale == "ratio" else floor
        if width <= 0 or not math.isfinite(se):
            return math.inf
        return (z * se / width) ** 2


def _bootstrap_means(values: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    idx = rng.integers(0, len(values), size=(resamples, len(values)))
    return values[idx].mean(axis=1)


def expanded_confidence(confidence: float, n: int) -> float:
    """Hesterberg's expanded percentile level: percentile bootstraps are too narrow for small n.

    Uses alpha'/2 = Phi(-sqrt(n/(n-1)) * t_{alpha/2, n-1}), so with 3 repeats or a handful of
    requests the interval reaches the bootstrap extremes instead of pretending to be precise.
    """
    if n < 2:
        return confidence
    alpha = 1.0 - confidence
    t = float(sps.t.ppf(1 - alpha / 2, n - 1))
    return 1.0 - 2.0 * float(sps.norm.cdf(-math.sqrt(n / (n - 1)) * t))


def _percentile_interval(samples: np.ndarray, confidence: float,
                         n: int | None = None) -> tuple[float, float]:
    if n is not None:
        confidence = expanded_confidence(confidence, n)
    alpha = 1.0 - confidence
    low, high = np.quantile(samples, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def _as_array(values: Sequence[float], what: str) -> np.ndarray:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1 or len(array) == 0:
        raise ValueError(f"{what}: need at least one value")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what}: contains NaN or infinite values")
    return array


def ratio_over_repeats(current: Sequence[float], reference: Sequence[float], *,
                       confidence: float, resamples: int, seed: int,
                       paired: bool = False) -> Interval:
    """Bootstrap of mean(current)/mean(reference) over whole repeats (paired: same indices)."""
    cur = _as_array(current, "current repeats")
    ref = _as_array(reference, "reference repeats")
    if ref.mean() <= 0:
        raise ValueError("reference mean is not positive; a ratio is meaningless")
    rng = np.random.default_rng(seed)
    if paired:
        if len(cur) != len(ref):
            raise ValueError("paired bootstrap needs the same number of repeats in both arms")
        idx = rng.integers(0, len(cur), size=(resamples, len(cur)))
        num, den = cur[idx].mean(axis=1), ref[idx].mean(axis=1)
    else:
        num = _bootstrap_means(cur, rng, resamples)
        den = _bootstrap_means(ref, rng, resamples)
    ratios = num / np.where(den > 0, den, np.nan)
    ratios = ratios[np.isfinite(ratios)]
    low, high = _percentile_interval(ratios, confidence, min(len(cur), len(ref)))
    return Interval(float(cur.mean() / ref.mean()), low, high, confidence,
                    "repeats-paired" if paired else "repeats", len(cur), len(ref))


def ratio_over_requests(current: Sequence[float], reference: Sequence[float],
                        statistic: Callable[[np.ndarray], np.ndarray], *,
                        confidence: float, resamples: int, seed: int,
                        chunk: int = 250) -> Interval:
    """Bootstrap of statistic(current)/statistic(reference) resampling per-request samples."""
    cur = _as_array(current, "current requests")
    ref = _as_array(reference, "reference requests")
    ref_stat = float(statistic(ref[None, :])[0])
    if ref_stat <= 0:
        raise ValueError("reference statistic is not positive; a ratio is meaningless")
    rng = np.random.default_rng(seed)
    ratios: list[np.ndarray] = []
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        num = statistic(cur[rng.integers(0, len(cur), size=(size, len(cur)))])
        den = statistic(ref[rng.integers(0, len(ref), size=(size, len(ref)))])
        ratios.append(num / np.where(den > 0, den, np.nan))
    all_ratios = np.concatenate(ratios)
    all_ratios = all_ratios[np.isfinite(all_ratios)]
    low, high = _percentile_interval(all_ratios, confidence, min(len(cur), len(ref)))
    estimate = float(statistic(cur[None, :])[0]) / ref_stat
    return Interval(estimate, low, high, confidence, "requests", len(cur), len(ref))


def log_spread(values: Sequence[float]) -> float | None:
    """Run-to-run standard deviation on the log scale (None with fewer than 2 positive values)."""
    array = np.asarray([v for v in values if v is not None and v > 0], dtype=float)
    if len(array) < 2:
        return None
    return float(np.std(np.log(array), ddof=1))


def widen_for_run_spread(interval: Interval, spread: float, n_current: int,
                         n_reference: int) -> Interval:
    """Add run-to-run noise (log-sd ``spread`` per repeat) to a within-run request interval.

    A request bootstrap cannot see that the machine drifts between sittings; adding that variance
    in quadrature keeps an A/A comparison across days from failing on drift alone.
    """
    if interval.scale != "ratio" or interval.estimate <= 0 or spread <= 0:
        return interval
    z = float(sps.norm.ppf(0.5 + interval.confidence / 2))
    extra = z * spread * math.sqrt(1 / max(1, n_current) + 1 / max(1, n_reference))
    centre = math.log(interval.estimate)
    low_half = centre - math.log(interval.low) if interval.low > 0 else math.inf
    high_half = math.log(interval.high) - centre
    low = centre - math.hypot(max(low_half, 0.0), extra)
    high = centre + math.hypot(max(high_half, 0.0), extra)
    return Interval(interval.estimate, math.exp(low), math.exp(high), interval.confidence,
                    interval.method + "+run-spread", interval.n_current, interval.n_reference)


def verdict(interval: Interval, metric_direction: Direction, floor: float) -> Verdict:
    """Regression/improvement only when the whole interval is past the floor.

    ``pass`` means the interval rules out a change worse than ``floor`` (its bad-direction bound
    lies inside the floor) without showing a whole-interval improvement; ``inconclusive`` means
    the interval reaches past the floor on the bad side but does not clear it.
    """
    _, low, high = interval.change()
    if metric_direction == "higher":      # flip so that positive = worse
        low, high = -high, -low
    if low > floor:
        return "regression"
    if high < -floor:
        return "improvement"
    if high <= floor:
        return "pass"
    return "inconclusive"


def equivalence(interval: Interval, margin: float) -> Verdict:
    """TOST-style equivalence: pass when the whole interval lies inside ±margin.

    Build ``interval`` at confidence 1 - 2*alpha for a level-alpha TOST. ``regression`` means
    the whole interval is outside the margin (demonstrably not equivalent); otherwise
    ``inconclusive`` — never "no significant difference, so equal".
    """
    _, low, high = interval.change()
    if -margin <= low and high <= margin:
        return "pass"
    if low > margin or high < -margin:
        return "regression"
    return "inconclusive"


def tost_confidence(confidence: float) -> float:
    """Two one-sided tests at alpha each == a two-sided interval at 1 - 2*alpha."""
    return 1.0 - 2.0 * (1.0 - confidence)


def newcombe_difference(correct_a: int, n_a: int, correct_b: int, n_b: int,
                        confidence: float) -> Interval:
    """Unpaired difference of proportions a - b (Newcombe hybrid score interval)."""
    p_a, p_b = correct_a / n_a, correct_b / n_b
    la, ua = wilson(correct_a, n_a, confidence)
    lb, ub = wilson(correct_b, n_b, confidence)
    diff = p_a - p_b
    low = diff - math.sqrt((p_a - la) ** 2 + (ub - p_b) ** 2)
    high = diff + math.sqrt((ua - p_a) ** 2 + (p_b - lb) ** 2)
    return Interval(diff, low, high, confidence, "newcombe", n_a, n_b, scale="difference")
