"""Estimates over a nested design (server starts holding blocks) on log values shaped
``(..., starts, blocks)``, returning arrays over the leading axes (simulated nights in
``servegate calibrate``; one in the judge). Why blocks, and the estimator in full: docs/judge.md,
How a check is decided."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats as sps

TRIM = 0.2
# the level of the test that refutes a prior: a run whose measured start (or interaction)
# variance is this improbable under the prior uses its own measurement instead
STATED_LEVEL = 0.01


@dataclass(frozen=True)
class Component:
    """One variance term of an estimate's squared standard error, with its degrees of freedom."""

    var: np.ndarray
    df: np.ndarray
    level: str                       # "block" | "start" | "interaction"


@dataclass(frozen=True)
class Nested:
    """A nested estimate of a mean log value (or log ratio) with its noise decomposed."""

    theta: np.ndarray
    se: np.ndarray
    df: np.ndarray
    block_var: np.ndarray            # per-block variance inside a start (winsorized)
    block_df: np.ndarray
    between_var: np.ndarray          # start (or interaction) variance used
    between_df: np.ndarray
    measured_between_var: np.ndarray  # from the starts alone (NaN with one start)
    between_source: str              # "measured" | "prior" | "measured+prior"
    starts: int
    blocks: int
    components: tuple[Component, ...]
    # per night: the prior refuted by the measurement (then the measurement alone is used) and
    # the stated-level test's p-value (NaN: not tested, e.g. one start or no prior)
    widened: np.ndarray | None = None
    prior_p: np.ndarray | None = None
    # halves: start levels centred on their half's (``groups`` halves: ``starts - groups`` dof);
    # ``share``: the start variance's weight in the mean's (1 / starts: every start alike)
    groups: int = 1
    share: float = 1.0

    def scalar(self, name: str) -> float:
        """One field of a single-night estimate as a float (the judge's view)."""
        return float(np.asarray(getattr(self, name)).reshape(-1)[0])


def trimmed(values: np.ndarray, trim: float = TRIM) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(trimmed mean, squared standard error, df) along the last axis (Yuen / Tukey-McLaughlin).

    ``g = floor(trim * n)`` values are cut from each end; the winsorized variance ``s_w^2`` gives
    ``se^2 = (n - 1) s_w^2 / (h (h - 1))`` with ``h = n - 2g`` and ``df = h - 1`` (scipy's
    ``ttest_ind(trim=...)`` uses the same per-sample terms). ``se^2`` is NaN for a single value.
    """
    x = np.sort(np.asarray(values, float), axis=-1)
    n = x.shape[-1]
    g = math.floor(trim * n)
    h = n - 2 * g
    mean = x[..., g:n - g].mean(axis=-1)
    if g:
        x = x.copy()
        x[..., :g] = x[..., g:g + 1]
        x[..., n - g:] = x[..., n - g - 1:n - g]
    if h < 2:
        nan = np.full(mean.shape, np.nan)
        return mean, nan, np.zeros(mean.shape)
    winsorized_var = x.var(axis=-1, ddof=1)
    se2 = (n - 1) * winsorized_var / (h * (h - 1))
    return mean, se2, np.full(mean.shape, float(h - 1))


def satterthwaite(components: tuple[Component, ...]) -> np.ndarray:
    """Welch-Satterthwaite degrees of freedom of a sum of variance terms (inf df: exact)."""
    total = sum(c.var for c in components)
    with np.errstate(divide="ignore", invalid="ignore"):
        denominator = sum(np.where(c.var > 0, c.var ** 2 / c.df, 0.0) for c in components)
        df = np.where(denominator > 0, total ** 2 / denominator, np.inf)
    return np.asarray(df, float)


def refute_prior(prior_var: float | np.ndarray, prior_dof: float | np.ndarray,
                 measured: np.ndarray, measured_df: float, carried: float | np.ndarray = 0.0,
                 carried_df: float | np.ndarray = np.inf,
                 stated_level: float | None = STATED_LEVEL
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(variance, dof, widened, p): the measured variance pooled with the prior by dof, or alone
    if the starts' spread refutes the prior at ``stated_level`` (random-effects F: ``measured``
    plus the block part ``carried`` against prior plus that part, on ``measured_df`` and their
    Welch-Satterthwaite dof). Why: pooling would let a prior shrink an interval the run shows
    too narrow; testing the measurement alone would mistake block noise for a refuted prior."""
    prior_var = np.asarray(prior_var, float)
    prior_dof = np.asarray(prior_dof, float)
    carried = np.asarray(carried, float)
    shape = np.broadcast_shapes(np.shape(measured), prior_var.shape, prior_dof.shape)
    total = prior_dof + measured_df
    with np.errstate(divide="ignore", invalid="ignore"):
        pooled = np.where(prior_dof > 0, (prior_dof * prior_var + measured_df * measured)
                          / np.where(total > 0, total, 1.0), measured)
        expected = prior_var + carried
        ratio = np.where(expected > 0, (measured + carried) / expected,
                         np.where(measured > 0, np.inf, 0.0))
        denominator = prior_var ** 2 / np.where(prior_dof > 0, prior_dof, 1.0) \
            + carried ** 2 / np.asarray(carried_df, float)
        dfd = np.where(denominator > 0, expected ** 2 / denominator, np.inf)
        p = np.where(prior_dof > 0, sps.f.sf(ratio, measured_df, np.minimum(dfd, 1e9)),
                     np.nan)
    widened = (np.nan_to_num(p, nan=1.0) < stated_level) if stated_level is not None \
        else np.zeros(shape, bool)
    between = np.broadcast_to(np.where(widened, measured, pooled), shape).astype(float)
    dof = np.broadcast_to(np.where(widened | (prior_dof <= 0), measured_df, total),
                          shape).astype(float)
    return between, dof, np.broadcast_to(widened, shape), np.broadcast_to(p, shape)


def start_weights(halves: Sequence[int] | None, starts: int) -> tuple[np.ndarray, np.ndarray]:
    """(each start's weight in the mean: every half alike, shared by its starts; its half as a
    one-hot row)."""
    codes = np.unique(np.asarray(halves if halves is not None else [0] * starts),
                      return_inverse=True)[1].reshape(-1)
    if codes.size != starts:
        raise ValueError(f"nested_mean: {codes.size} halves for {starts} starts")
    onehot = np.eye(codes.max() + 1)[codes]                          # (S, G)
    counts = onehot.sum(axis=0)
    return (onehot / counts).sum(axis=-1) / onehot.shape[1], onehot


def nested_mean(logs: np.ndarray, *, prior_var: float | np.ndarray,
                prior_dof: float | np.ndarray, level: str = "start", trim: float = TRIM,
                stated_level: float | None = STATED_LEVEL,
                halves: Sequence[int] | None = None) -> Nested:
    """The mean of ``logs`` (``(..., starts, blocks)``) with its noise split by level.

    Estimate: mean of the starts' medians plus the 20 % trimmed mean of the pooled residuals
    (starts weigh alike; bursts trimmed from the pool protect even 2-4 blocks per start). Block
    level: Yuen's ``(n-1) s_w^2 / (h (h-1))`` on the residuals, ``h - starts`` dof. Start level:
    the starts' winsorized means' spread less their block part, pooled with the prior (per night
    or not) unless :func:`refute_prior` refutes it; one start: the prior alone (exact when
    ``prior_dof == 0``). ``halves``: levels centred per half (``starts - halves`` dof), halves
    weighing alike."""
    logs = np.asarray(logs, float)
    if logs.ndim < 2:
        raise ValueError("nested_mean: expected values shaped (..., starts, blocks)")
    starts, blocks = logs.shape[-2], logs.shape[-1]
    if starts < 1 or blocks < 1:
        raise ValueError("nested_mean: no blocks")
    n = starts * blocks
    centers = np.median(logs, axis=-1, keepdims=True)               # (..., S, 1)
    residuals = (logs - centers).reshape(*logs.shape[:-2], n)
    offset, _, _ = trimmed(residuals, trim)
    weights, onehot = start_weights(halves, starts)
    groups = onehot.shape[1]
    theta = centers[..., 0] @ weights + offset
    g = math.floor(trim * n)
    h = n - 2 * g
    within_df_value = float(h - starts)
    x = np.sort(residuals, axis=-1)
    if g:
        x[..., :g] = x[..., g:g + 1]
        x[..., n - g:] = x[..., n - g - 1:n - g]
    if blocks >= 2 and within_df_value >= 1:
        winsorized_var = ((x - x.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1) / (n - starts)
        within = (n - 1) * winsorized_var / (h * (h - 1))           # var of the pooled mean
        within_df = np.full(theta.shape, within_df_value)
    else:
        within = np.zeros(theta.shape)
        within_df = np.full(theta.shape, np.inf)
    if starts - groups >= 1:
        low, high = x[..., None, :1], x[..., None, -1:]             # the winsorizing bounds
        clipped = np.clip(logs - centers, low, high)
        start_means = (centers + clipped).mean(axis=-1)              # (..., S) winsorized
        measured_df = float(starts - groups)
        half_means = (start_means @ onehot) / onehot.sum(axis=0)     # (..., G)
        spread = ((start_means - half_means @ onehot.T) ** 2).sum(axis=-1) / measured_df
        measured = np.maximum(spread - starts * within, 0.0)
        between, between_df, widened, prior_p = refute_prior(
            prior_var, prior_dof, measured, measured_df, starts * within, within_df,
            stated_level)
        source = _source(prior_dof, widened)
    else:
        measured = np.full(theta.shape, np.nan)
        between = np.broadcast_to(np.asarray(prior_var, float), theta.shape).astype(float)
        dof = np.asarray(prior_dof, float)
        between_df = np.broadcast_to(np.where(dof > 0, dof, np.inf), theta.shape).astype(float)
        widened = np.zeros(theta.shape, bool)
        prior_p = np.full(theta.shape, np.nan)
        source = "prior"
    share = float((weights ** 2).sum())                             # 1/S: starts alike
    components = (Component(between * share, between_df, level),
                  Component(within, within_df, "block"))
    se = np.sqrt(between * share + within)
    block_var = within * h
    return Nested(theta, se, satterthwaite(components), block_var, within_df, between,
                  between_df, measured, source, starts, blocks, components, widened, prior_p,
                  groups, share)


@dataclass(frozen=True)
class Difference:
    """log(current/reference) from two nested estimates (independent or paired)."""

    theta: np.ndarray
    se: np.ndarray
    df: np.ndarray
    parts: tuple[Nested, ...]
    method: str

    scalar = Nested.scalar

    @property
    def components(self) -> tuple[Component, ...]:
        return tuple(c for part in self.parts for c in part.components)


def paired_difference(current: np.ndarray, reference: np.ndarray, *,
                      interaction_var: float | np.ndarray, interaction_dof: float | np.ndarray,
                      trim: float = TRIM, level: str = "interaction",
                      stated_level: float | None = STATED_LEVEL) -> Difference:
    """Two modes measured in the same starts and block rounds: differences first, so the start
    component cancels and only the start x mode interaction remains. Two trees in a live pair
    (``level="start"``): their block pairs share the machine's drift and bursts, but each
    tree's server start keeps its own level, so ``interaction_var`` is then the difference of
    two starts (twice the start variance)."""
    diff = nested_mean(np.asarray(current, float) - np.asarray(reference, float),
                       prior_var=interaction_var, prior_dof=interaction_dof,
                       level=level, trim=trim, stated_level=stated_level)
    method = f"blocks-paired ({diff.starts} start(s) x {diff.blocks} block pair(s), " \
             f"trimmed {int(100 * trim)}%)"
    return Difference(diff.theta, diff.se, diff.df, (diff,), method)


def independent_difference(current: np.ndarray, reference: np.ndarray, *,
                           start_var: float | np.ndarray, start_dof: float | np.ndarray,
                           trim: float = TRIM,
                           stated_level: float | None = STATED_LEVEL,
                           halves: tuple[Sequence[int] | None, Sequence[int] | None]
                           = (None, None)) -> Difference:
    """Two sittings (a run and its baseline) or two trees: each side's start component counts in
    full. The start level is one property of the setup, so both sides' measurements of it (S - 1
    dof each) are pooled with the prior and used for both (a one-start run against many nights
    takes the nights' spread), or alone if they refute it. ``halves`` (per side): starts centred
    on their half's level, which does not cancel here as in :func:`paired_difference`."""
    cur, ref = (nested_mean(logs, prior_var=start_var, prior_dof=start_dof, trim=trim,
                            stated_level=stated_level, halves=side)
                for logs, side in zip((current, reference), halves, strict=True))
    sides = [part for part in (cur, ref) if part.starts - part.groups >= 1]
    if sides:
        measured_df = float(sum(part.starts - part.groups for part in sides))
        var = sum(part.measured_between_var * (part.starts - part.groups)
                  for part in sides) / measured_df
        carried = sum((part.starts - part.groups) * part.starts * part.components[1].var
                      for part in sides) / measured_df
        pooled, dof, widened, p = refute_prior(start_var, start_dof, var, measured_df, carried,
                                               sum(part.block_df for part in sides),
                                               stated_level)
        source = _source(start_dof, widened)
        cur = _with_between(cur, pooled, dof, source, widened, p)
        ref = _with_between(ref, pooled, dof, source, widened, p)
    se = np.sqrt(cur.se ** 2 + ref.se ** 2)
    # one start variance serves both sides (pooled, or the prior): one component with its
    # degrees of freedom, not two independent ones (that would double them)
    start = Component(cur.components[0].var + ref.components[0].var, cur.components[0].df,
                      cur.components[0].level)
    df = satterthwaite((start, cur.components[1], ref.components[1]))
    method = (f"blocks ({cur.starts}x{cur.blocks}{_in_halves(cur)} vs {ref.starts}x"
              f"{ref.blocks}{_in_halves(ref)} starts x blocks, trimmed {int(100 * trim)}%)")
    return Difference(cur.theta - ref.theta, se, df, (cur, ref), method)


def _source(prior_dof: float | np.ndarray, widened: np.ndarray) -> str:
    if not np.any(np.asarray(prior_dof) > 0):
        return "measured"
    return "measured, prior refuted" if widened.size == 1 and bool(widened.all()) else "measured+prior"


def _in_halves(part: Nested) -> str:
    """`` in 2 halves`` where the start levels were centred per half, else nothing."""
    return f" in {part.groups} halves" if part.groups > 1 else ""


def _with_between(part: Nested, between: np.ndarray, between_df: np.ndarray,
                  source: str, widened: np.ndarray, prior_p: np.ndarray) -> Nested:
    """``part`` with its start level replaced (the pooled estimate of both sides)."""
    block = part.components[1]
    components = (Component(between * part.share, between_df,
                            part.components[0].level), block)
    se = np.sqrt(between * part.share + block.var)
    return replace(part, se=se, df=satterthwaite(components), between_var=between,
                   between_df=between_df, between_source=source, components=components,
                   widened=widened, prior_p=prior_p)


def design_se(diff: Difference, prior_var: float | np.ndarray,
              prior_dof: float | np.ndarray) -> np.ndarray:
    """``diff``'s standard error at its prior start level (measured where the prior is worth
    0 dof, e.g. against ``history:N``): what the design resolves, whatever its starts did."""
    start = np.where(np.asarray(prior_dof) > 0, prior_var, diff.parts[0].between_var)
    return np.sqrt(sum(start / p.starts + p.components[1].var for p in diff.parts))
