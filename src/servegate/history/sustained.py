"""A sustained shift over consecutive nights: a one-sided CUSUM per gated aggregate (why, the rule,
its spread and its calibration: docs/judge.md, Nights as evidence). Below the history and the
calibration (import layers) so that both apply the one rule."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from servegate.judge.nested import nested_mean, refute_prior

DESIGN_SHIFT = 0.03           # a 3 % sustained slowdown
# nights between false alarms of one series, nominal (Siegmund); on the gfx95 nightly it gives
# 0.72-0.78 false alarms per runner-quarter and flags a sustained 3 % within 3 nights on
# 82-84.5 % of histories (calibrate's sustained_shift; 1000 gives 0.50 and 79.5 %: docs/judge.md)
ARL0 = 700.0
# level of the F test that the nights vary more than their starts predict (then their own spread
# standardises them): looser than judge.nested's, as a missed night level costs false alarms
NIGHT_LEVEL = 0.05
# the most recent monitored nights left out of the level and spread a night is standardised by
GUARD = 3


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
class NightValue:
    """Nights' log values with each night's squared standard error from its own starts, and dof."""

    value: np.ndarray
    var: np.ndarray
    dof: np.ndarray


def night_value(logs: np.ndarray) -> NightValue:
    """A night's aggregate from its logs ``(..., starts, blocks)``: the judge's nested mean with
    no prior (its own starts measure its error: ``starts - 1`` dof, none with one start)."""
    found = nested_mean(np.asarray(logs, float), prior_var=0.0, prior_dof=0.0,
                        stated_level=None)
    one = found.starts < 2
    var = np.where(one, np.nan, found.se ** 2)
    dof = np.where(one, 0.0, np.minimum(found.df, 1e6))
    return NightValue(np.asarray(found.theta, float), np.asarray(var, float),
                      np.asarray(dof, float))


def night_spread(values: np.ndarray, within_var: np.ndarray | None = None,
                 within_dof: np.ndarray | None = None, *,
                 stated_level: float | None = NIGHT_LEVEL
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(variance, dof, widened, p) of one night's value around the level of the nights ``values``
    (last axis, at least 2): their spread alone (``nights - 1`` dof), or with ``within_var`` (per
    night, from its starts; NaN or 0 dof: left out) their mean, worth the sum of their dof,
    pooled with that spread unless judge.nested.refute_prior refutes it (``widened``)."""
    values = np.asarray(values, float)
    n = values.shape[-1]
    between = values.var(axis=-1, ddof=1)
    shape = between.shape
    none = (between, np.full(shape, float(n - 1)), np.zeros(shape, bool),
            np.full(shape, np.nan))
    if within_var is None or within_dof is None:
        return none
    var = np.asarray(within_var, float)
    dof = np.asarray(within_dof, float)
    used = np.isfinite(var) & (dof > 0)
    count = used.sum(axis=-1)
    if not np.any(count):
        return none
    with np.errstate(invalid="ignore", divide="ignore"):
        within = np.where(count > 0, np.where(used, var, 0.0).sum(axis=-1)
                          / np.maximum(count, 1), 0.0)
    within_df = np.where(used, dof, 0.0).sum(axis=-1)
    pooled, df, widened, p = refute_prior(within, within_df, between, float(n - 1),
                                          stated_level=stated_level)
    return (np.asarray(pooled, float), np.asarray(df, float), np.asarray(widened, bool),
            np.asarray(p, float))


@dataclass(frozen=True)
class Flags:
    """Per series (leading axes): first monitored night flagged (-1: none), alarms (the sum
    restarts at 0 after each), the rule's ``k`` and ``h``, the reference log-sd and dof, whether
    the nights' spread refuted the within-night one (``widened``, test ``p``; NaN: no within-night
    input), ``widened_nights`` (standardised by the nights alone) and per-night ``hits`` (last
    axis; a runner's series move together, so one bad night counts once as a night)."""

    first: np.ndarray
    alarms: np.ndarray
    k: np.ndarray
    h: np.ndarray
    spread: np.ndarray
    dof: np.ndarray
    widened: np.ndarray
    p: np.ndarray
    widened_nights: np.ndarray
    hits: np.ndarray

    def source(self) -> str:
        """Where a single series' spread came from, in words."""
        sd, dof = float(np.asarray(self.spread).reshape(-1)[0]), float(
            np.asarray(self.dof).reshape(-1)[0])
        p = float(np.asarray(self.p).reshape(-1)[0])
        if math.isnan(p):
            return f"night-to-night log-sd {sd:.4f} ({dof:g} dof, the nights alone)"
        if bool(np.asarray(self.widened).reshape(-1)[0]):
            return (f"night-to-night log-sd {sd:.4f} ({dof:g} dof): the nights vary more than "
                    f"their starts predict (F test p = {p:.3g} < {NIGHT_LEVEL:g}), the "
                    "nights' spread alone")
        return (f"night-to-night log-sd {sd:.4f} ({dof:g} dof: the starts' spread within each "
                f"night pooled with the nights', F test p = {p:.3g})")


def cusum(reference: np.ndarray, monitored: np.ndarray, *, worse: str = "higher",
          within_var: np.ndarray | None = None, within_dof: np.ndarray | None = None,
          design_shift: float = DESIGN_SHIFT, arl0: float = ARL0,
          self_starting: bool = True, stated_level: float | None = NIGHT_LEVEL,
          guard: int = GUARD) -> Flags:
    """Page's one-sided CUSUM of the ``monitored`` nights' log values (last axis, in order)
    against the ``reference`` nights' (at least 3), in the ``worse`` direction.

    ``within_var`` / ``within_dof``: per night, reference then monitored, as from
    :func:`night_value` (spread: :func:`night_spread`'s; without them the nights' alone).
    ``self_starting`` (Hawkins): each monitored night is standardised by every night before it,
    else an error in a short reference window's level pushes a whole quarter one way."""
    reference = np.asarray(reference, float)
    monitored = np.asarray(monitored, float)
    if reference.shape[-1] < 3:
        raise ValueError("CUSUM: at least 3 reference nights are needed to measure a spread")
    if worse not in ("higher", "lower"):
        raise ValueError(f"CUSUM: worse must be 'higher' or 'lower', got {worse!r}")
    sign = 1.0 if worse == "higher" else -1.0
    n0, m = reference.shape[-1], monitored.shape[-1]
    seen = np.concatenate([reference, monitored], axis=-1)

    def spread_of(count: int) -> tuple[np.ndarray, ...]:
        return night_spread(seen[..., :count],
                            None if within_var is None else np.asarray(within_var)[..., :count],
                            None if within_dof is None else np.asarray(within_dof)[..., :count],
                            stated_level=stated_level)

    base_var, base_dof, base_widened, base_p = spread_of(n0)
    shape = base_var.shape
    if self_starting:
        levels, spreads, widened = [], [], []
        for night in range(m):
            count = n0 + max(0, night - guard)
            var, _, wide, _ = spread_of(count)
            levels.append(seen[..., :count].mean(axis=-1))
            spreads.append(np.sqrt(var * (1 + 1 / count)))
            widened.append(wide)
        level = np.stack(levels, axis=-1) if m else np.zeros((*shape, 0))
        spread = np.stack(spreads, axis=-1) if m else np.zeros((*shape, 0))
        widened_nights = (np.stack(widened, axis=-1).sum(axis=-1) if m
                          else np.zeros(shape, int))
    else:
        level = reference.mean(axis=-1, keepdims=True)
        spread = np.broadcast_to(np.sqrt(base_var * (1 + 1 / n0))[..., None], monitored.shape)
        widened_nights = np.where(base_widened, m, 0)
    spread = np.where(spread > 0, spread, np.inf)
    z = sign * (monitored - level) / spread
    base = np.sqrt(base_var)
    k = math.log1p(design_shift) / 2.0 / np.where(base > 0, base, np.inf)
    h = np.vectorize(lambda kk: threshold(kk, arl0) if math.isfinite(kk) and kk > 0
                     else math.inf)(k)
    total = np.zeros(z.shape[:-1])
    first = np.full(z.shape[:-1], -1)
    hits = np.zeros(z.shape, bool)
    for night in range(m):
        total = np.maximum(0.0, total + z[..., night] - k)
        hits[..., night] = hit = total > h
        first = np.where(hit & (first < 0), night, first)
        total = np.where(hit, 0.0, total)
    return Flags(first, hits.sum(axis=-1), np.asarray(k), np.asarray(h), base,
                 np.asarray(base_dof), np.asarray(base_widened), np.asarray(base_p),
                 np.asarray(widened_nights), hits)
