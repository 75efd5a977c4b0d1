"""Direction-aware ratio intervals and verdicts (significance AND a practical floor): the interval
``theta +- t(df) * se`` on the log scale at the level the family gives the check (why t, not a
bootstrap: docs/judge.md, Which statistics are libraries). Verdicts need the *whole* interval
past the floor, so a small but "significant" wobble is never a regression."""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as sps

from servegate.core.metrics import METRICS, Direction, direction, statistic_fn  # noqa: F401

Verdict = Literal["pass", "regression", "improvement", "inconclusive"]
VERDICTS: tuple[str, ...] = ("pass", "regression", "improvement", "inconclusive")
CODES: dict[int, Verdict] = {0: "pass", 1: "regression", 2: "improvement", 3: "inconclusive"}

POWER = 0.8                              # power for the minimal detectable effect
RESOLUTION_POWER = 0.975      # a one-night check's resolution (:func:`resolution`)
# a design that cannot rule out 25 % (5 accuracy points) in one night proves nothing
MAX_RESOLUTION, MAX_ACCURACY_RESOLUTION = 0.25, 0.05


def per_check_confidence(confidence: float, n_checks: int) -> float:
    """Bonferroni: ``n_checks`` intervals at 1 - alpha/m keep the family-wise rate <= alpha."""
    return 1.0 - (1.0 - confidence) / max(1, n_checks)


def run_seed(seed: int, run_key: str) -> int:
    """The judge's seed for one run: the suite's seed mixed with the run's identity, so two runs
    never share resamples while re-judging the same run reproduces its verdict."""
    return (seed * 1_000_033 + zlib.crc32(run_key.encode())) % (2**31)


def t_quantile(confidence: float, df: np.ndarray | float) -> np.ndarray | float:
    """Two-sided quantile of Student's t (the normal for infinite df)."""
    return sps.t.ppf(0.5 + confidence / 2, df)


@dataclass(frozen=True)
class Interval:
    """Point estimate and interval of current/reference (``scale='ratio'``) or of a difference,
    with the ``se`` (log scale for ratios; else derived from the width) and ``df`` it was built
    from; ``run_var``: the share of ``se**2`` from run-to-run noise (more prompts cannot shrink it)."""

    estimate: float
    low: float
    high: float
    confidence: float
    method: str                     # "blocks-paired (2 start(s) x 6 block pair(s), ...)", ...
    n_current: int
    n_reference: int
    scale: Literal["ratio", "difference"] = "ratio"
    se: float | None = None
    df: float = math.inf
    run_var: float = 0.0
    n_starts: int | None = None     # server starts per side behind a block interval

    def change(self) -> tuple[float, float, float]:
        """(estimate, low, high) as changes: ratio - 1 on the ratio scale, as-is otherwise."""
        shift = 1.0 if self.scale == "ratio" else 0.0
        return self.estimate - shift, self.low - shift, self.high - shift

    def to_model(self, value: float) -> float:
        """A ratio (or difference) on the scale the standard error lives on."""
        if self.scale == "ratio":
            return math.log(value) if value > 0 else -math.inf
        return value

    def standard_error(self) -> float:
        """``se``, or (for intervals built without one) half the width over the quantile."""
        if self.se is not None:
            return self.se
        q = float(t_quantile(self.confidence, self.df))
        if self.scale == "ratio":
            if self.low <= 0 or self.high <= 0:
                return math.inf
            return (math.log(self.high) - math.log(self.low)) / (2 * q)
        return (self.high - self.low) / (2 * q)

    def minimal_detectable_effect(self, floor: float) -> float:
        """Smallest true change (fraction, or points) this design flags past ``floor`` with 80 %
        power: floor + (t_level + t_power) * se, from the standard error (not the data range)."""
        se = self.standard_error()
        if not math.isfinite(se):
            return math.inf
        q = float(t_quantile(self.confidence, self.df))
        q_power = float(sps.t.ppf(POWER, self.df))
        if self.scale == "ratio":
            return math.exp(math.log1p(floor) + (q + q_power) * se) - 1.0
        return floor + (q + q_power) * se

    def guidance(self, boundaries: Sequence[float]) -> Guidance:
        """What would decide this check at its current estimate (see :class:`Guidance`)."""
        return guidance(self, boundaries)


@dataclass(frozen=True)
class Guidance:
    """How much more data would decide, at the current estimate (numbers; the reports word it).

    It decides once ``t * se`` is below the distance to the nearest decision boundary. More starts
    shrink every variance term, more prompts (or blocks) only the within-start one: when the start
    level alone is wider than that distance no number of prompts can decide."""

    decided: bool
    factor: float                    # x the current units per side (inf: nothing decides)
    prompts_factor: float | None     # x the current prompts; None: prompts cannot decide
    need: int | None = None          # units per side that would decide (None: nothing does)
    unit: str = "starts"             # "starts" (per side) or "questions" (accuracy)
    run_limit: float | None = None   # +- share the start level alone spans at this level
    on_boundary: bool = False        # the estimate sits on a decision boundary

    @property
    def text(self) -> str:
        """One line (verdict.json's ``guidance``, summary.md); the numbers are the fields."""
        if self.decided:
            return "decided"
        if self.on_boundary:
            return "the estimate sits on the decision boundary: no sample size decides"
        if self.need is None:
            return "no standard error: nothing to extrapolate"
        need = f"~{self.need} {self.unit}{' per side' if self.unit == 'starts' else ''} " \
               f"(x{self.factor:.1f}) would decide at this estimate"
        if self.unit != "starts":
            return need
        if self.prompts_factor is None:
            limit = 100 * (self.run_limit or 0.0)
            return (f"no amount of prompts can decide (the start level alone is "
                    f"+-{limit:.1f}% at this level); {need}")
        return f"~{self.prompts_factor:.1f}x the prompts per block, or {need}"


def guidance(interval: Interval, boundaries: Sequence[float]) -> Guidance:
    """Solve for the starts (and prompts) that decide ``interval`` against ``boundaries``."""
    se = interval.standard_error()
    q = float(t_quantile(interval.confidence, interval.df))
    theta = interval.to_model(interval.estimate)           # -inf for a ratio <= 0
    distances = [abs(theta - interval.to_model(b)) for b in boundaries
                 if interval.scale == "difference" or b > 0]
    if not distances or not math.isfinite(se) or not math.isfinite(theta):
        return Guidance(False, math.inf, None)
    distance = min(distances)
    if q * se < distance:
        return Guidance(True, 1.0, 1.0)
    if distance <= 1e-12 or se <= 0:
        return Guidance(False, math.inf, None, on_boundary=True)
    target = distance / q                                  # the se that would decide
    factor = (se / target) ** 2
    if interval.scale == "difference":
        need = math.ceil(factor * max(1, interval.n_current))
        return Guidance(False, factor, factor, need, "questions")
    need = math.ceil(factor * max(1, interval.n_starts or interval.n_current))
    within = max(se * se - interval.run_var, 0.0)
    if interval.run_var >= target * target or within <= 0:
        return Guidance(False, factor, None, need,
                        run_limit=q * math.sqrt(interval.run_var))
    return Guidance(False, factor, within / (target * target - interval.run_var), need)


# ------------------------------------------------------------------------ vectorised kernels
# Arrays carry simulated nights on leading axes; the judge calls them with one night.

def log_bounds(theta: np.ndarray, se: np.ndarray, df: np.ndarray,
               confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """theta -+ t(df) * se (NaN where df or se is not finite)."""
    q = t_quantile(confidence, np.where(np.isfinite(df) | np.isinf(df), df, np.nan))
    return theta - q * se, theta + q * se


def resolution(se: np.ndarray | float, df: np.ndarray | float, confidence: float,
               floor: float, scale: str = "ratio") -> np.ndarray:
    """The change a design rules out on ``RESOLUTION_POWER`` of healthy nights (and catches
    about as often): ``(t_level + t_power) * se``, at least ``floor``; beyond ``MAX_RESOLUTION``
    (accuracy points: ``MAX_ACCURACY_RESOLUTION``) the floor itself must be ruled out."""
    found = (t_quantile(confidence, df) + sps.t.ppf(RESOLUTION_POWER, df)) * np.asarray(se)
    found, limit = ((np.expm1(found), MAX_RESOLUTION) if scale == "ratio"
                    else (found, MAX_ACCURACY_RESOLUTION))
    return np.where(found <= limit, np.maximum(found, floor), floor)


def classify(low: np.ndarray, high: np.ndarray, floor: float, metric_direction: Direction,
             resolution: np.ndarray | float | None = None) -> np.ndarray:
    """Verdict codes (:data:`CODES`) from interval bounds given as *changes* (ratio - 1 or a
    difference): regression/improvement only when the whole interval is past the floor; pass
    when it rules out a change worse than the floor (or ``resolution``)."""
    low, high = np.asarray(low, float), np.asarray(high, float)  # pragma: no mutate (floats already)
    if metric_direction == "higher":      # flip so that positive = worse
        low, high = -high, -low
    codes = np.int8(3)                    # inconclusive; each np.where broadcasts it to the bounds
    codes = np.where(high <= (floor if resolution is None else resolution), 0, codes)
    codes = np.where(high < -floor, 2, codes)
    codes = np.where(low > floor, 1, codes)
    return np.where(np.isnan(low) | np.isnan(high), 3, codes)


def classify_equivalence(low: np.ndarray, high: np.ndarray, margin: float) -> np.ndarray:
    """TOST codes from bounds as changes: pass inside +-margin, regression wholly outside."""
    low, high = np.asarray(low, float), np.asarray(high, float)  # pragma: no mutate (floats already)
    codes = np.where((-margin <= low) & (high <= margin), 0, 3)
    codes = np.where((low > margin) | (high < -margin), 1, codes)
    return np.where(np.isnan(low) | np.isnan(high), 3, codes).astype(np.int8)


def tost_power(se: np.ndarray | float, df: np.ndarray | float, confidence: float,
               margin: float) -> np.ndarray:
    """Power of the TOST (interval at ``confidence``) to show equivalence when the arms are
    truly identical: P(|theta_hat| <= log(1+margin) - t*se) = 2 Phi(...) - 1 (0 when negative)."""
    q = t_quantile(confidence, df)
    se = np.asarray(se, float)  # pragma: no mutate (numbers: float or int, same)
    with np.errstate(divide="ignore", invalid="ignore"):
        room = (math.log1p(margin) - q * se) / se
    return np.maximum(2 * sps.norm.cdf(room) - 1, 0.0)         # (2 Phi - 1 <= 1 already)


# --------------------------------------------------------------------- scalar judge helpers

def interval_from_log(theta: float, se: float, df: float, confidence: float, method: str,
                      n_current: int, n_reference: int, run_var: float = 0.0) -> Interval:
    """A ratio :class:`Interval` from a log-scale estimate, standard error and df."""
    low, high = log_bounds(np.float64(theta), np.float64(se), np.float64(df), confidence)
    return Interval(math.exp(theta), float(np.exp(low)), float(np.exp(high)), confidence,
                    method, n_current, n_reference, se=float(se), df=float(df),
                    run_var=float(run_var))


def verdict(interval: Interval, metric_direction: Direction, floor: float,
            resolution: float | None = None) -> Verdict:
    """Regression/improvement only when the whole interval is past the floor; ``pass`` when it
    rules out a change worse than ``floor`` (or ``resolution``) without a whole-interval
    improvement; ``inconclusive`` when it reaches past that on the bad side without clearing it."""
    _, low, high = interval.change()
    return CODES[int(classify(np.float64(low), np.float64(high), floor, metric_direction,
                              resolution))]


def equivalence(interval: Interval, margin: float) -> Verdict:
    """TOST-style equivalence (``interval`` at 1 - 2*alpha for level alpha): pass when the whole
    interval lies inside ±margin, regression when wholly outside, else inconclusive (never "no
    significant difference, so equal")."""
    _, low, high = interval.change()
    return CODES[int(classify_equivalence(np.float64(low), np.float64(high), margin))]


def noninferiority(interval: Interval, margin: float, resolution: float | None = None) -> Verdict:
    """For a difference a - b (higher is better): ``pass`` when the whole interval is above
    ``-margin`` (or ``-resolution``, a one-night check's), ``regression`` when it is wholly
    below ``-margin``, ``inconclusive`` otherwise."""
    if interval.high < -margin:
        return "regression"
    return "pass" if interval.low >= -(resolution or margin) else "inconclusive"


def improvement(interval: Interval, target: float) -> Verdict:
    """A stated improvement of a lower-is-better ratio (``target`` = 0.96 for "at least 4 %
    better"): ``pass`` when the whole interval is at or below ``target``, ``regression`` when it
    is wholly above (the improvement is demonstrably smaller), ``inconclusive`` otherwise."""
    if interval.high <= target:
        return "pass"
    return "regression" if interval.low > target else "inconclusive"


def tost_confidence(confidence: float) -> float:
    """Two one-sided tests at alpha each == a two-sided interval at 1 - 2*alpha."""
    return 1.0 - 2.0 * (1.0 - confidence)


def newcombe_difference(correct_a: int, n_a: int, correct_b: int, n_b: int,
                        confidence: float) -> Interval:
    """Unpaired difference of proportions a - b (Newcombe's hybrid score interval, statsmodels)."""
    from statsmodels.stats.proportion import confint_proportions_2indep

    low, high = confint_proportions_2indep(correct_a, n_a, correct_b, n_b, method="newcomb",
                                           compare="diff", alpha=1 - confidence)
    return Interval(correct_a / n_a - correct_b / n_b, float(low), float(high), confidence,
                    "newcombe", n_a, n_b, scale="difference")


def paired_difference(both: int, a_only: int, b_only: int, neither: int,
                      confidence: float, method: str = "paired (Agresti-Min)") -> Interval:
    """Paired accuracy difference a - b with its standard error (the gate's accuracy test)."""
    from servegate.accuracy.paired import paired_diff_interval, paired_diff_se

    n = both + a_only + b_only + neither
    low, high = paired_diff_interval(both, a_only, b_only, neither, confidence=confidence)
    return Interval((a_only - b_only) / n, low, high, confidence, method, n, n,
                    scale="difference", se=paired_diff_se(both, a_only, b_only, neither))
