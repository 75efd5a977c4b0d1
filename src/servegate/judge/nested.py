"""Estimates over a nested design: server starts, each holding blocks (one client run each).

Why blocks, not requests: inside a closed-loop wave a request's latency is mostly its position in
the wave, so per-request samples are not independent and their standard error is not the noise
of a block's mean. A block's statistic (its mean TTFT, median TPOT, p99, ...) is the unit of
evidence; the noise lives at two levels, within a start (block to block: measured here on a
2-core VM at log-sd ~0.065, with heavy-tailed interference bursts) and between starts.

Every function works on log values shaped ``(..., starts, blocks)`` (leading axes: simulated
nights in ``servegate calibrate``; one in the judge) and returns arrays over the leading axes.

- Blocks: a 20 % trimmed mean of every block (robust to bursts), with Yuen's winsorized
  standard error from the blocks' spread around their own start (the start level removed).
- Between starts: a random-effects component. With two or more starts its variance is measured
  from the spread of the start means (less the within part they carry), pooled with the stated
  prior weighted by degrees of freedom; with one start only the prior speaks, and the estimate
  says so (``between_source``). A paired comparison of two modes inside the same starts takes
  differences first: the start component cancels and only a start x mode interaction remains,
  whose prior is the suite's ``[judge] interaction_cv`` (with ``interaction_cv_dof``).
- Degrees of freedom: Welch-Satterthwaite over the components.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

TRIM = 0.2


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


def nested_mean(logs: np.ndarray, *, prior_var: float, prior_dof: float, level: str = "start",
                trim: float = TRIM) -> Nested:
    """The mean of ``logs`` (``(..., starts, blocks)``) with its noise split by level.

    Estimate: the mean of the starts' medians plus the 20 % trimmed mean of every block's
    residual from its start's median (each start weighs the same; bursts are trimmed from the
    pooled residuals, so even 2-4 blocks per start are protected). Block level: the winsorized
    spread of those residuals, Yuen's ``(n-1) s_w^2 / (h (h-1))`` for the pooled mean, with
    ``h - starts`` degrees of freedom. Start level: the spread of the starts' winsorized means
    less the block part they carry, pooled with the prior (``prior_var``, worth ``prior_dof``);
    with one start the prior alone (exact when ``prior_dof == 0``: a stated assumption).
    """
    logs = np.asarray(logs, float)
    if logs.ndim < 2:
        raise ValueError("nested_mean: expected values shaped (..., starts, blocks)")
    starts, blocks = logs.shape[-2], logs.shape[-1]
    if starts < 1 or blocks < 1:
        raise ValueError("nested_mean: no blocks")
    n = starts * blocks
    centers = np.median(logs, axis=-1, keepdims=True)               # (..., S, 1)
    residuals = (logs - centers).reshape(*logs.shape[:-2], n)
    # each start keeps its own level (equal weight per start); the blocks' bursts are trimmed
    # from the pooled residuals, so a start of 2-4 blocks is as robust as a long one
    offset, _, _ = trimmed(residuals, trim)
    theta = centers[..., 0].mean(axis=-1) + offset
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
    if starts >= 2:
        low, high = x[..., None, :1], x[..., None, -1:]             # the winsorizing bounds
        clipped = np.clip(logs - centers, low, high)
        start_means = (centers + clipped).mean(axis=-1)              # (..., S) winsorized
        spread = start_means.var(axis=-1, ddof=1)
        measured = np.maximum(spread - starts * within, 0.0)
        measured_df = float(starts - 1)
        if prior_dof > 0:
            between = (prior_dof * prior_var + measured_df * measured) / (prior_dof + measured_df)
            between_df = np.full(theta.shape, prior_dof + measured_df)
            source = "measured+prior"
        else:
            between, between_df, source = measured, np.full(theta.shape, measured_df), "measured"
    else:
        measured = np.full(theta.shape, np.nan)
        between = np.full(theta.shape, float(prior_var))
        between_df = np.full(theta.shape, prior_dof if prior_dof > 0 else np.inf)
        source = "prior"
    components = (Component(between / starts, between_df, level),
                  Component(within, within_df, "block"))
    se = np.sqrt(between / starts + within)
    block_var = within * h
    return Nested(theta, se, satterthwaite(components), block_var, within_df, between,
                  between_df, measured, source, starts, blocks, components)


@dataclass(frozen=True)
class Difference:
    """log(current/reference) from two nested estimates (independent or paired)."""

    theta: np.ndarray
    se: np.ndarray
    df: np.ndarray
    parts: tuple[Nested, ...]
    method: str

    def scalar(self, name: str) -> float:
        return float(np.asarray(getattr(self, name)).reshape(-1)[0])

    @property
    def components(self) -> tuple[Component, ...]:
        return tuple(c for part in self.parts for c in part.components)


def paired_difference(current: np.ndarray, reference: np.ndarray, *, interaction_var: float,
                      interaction_dof: float, trim: float = TRIM,
                      level: str = "interaction") -> Difference:
    """Two modes measured in the same starts and block rounds: differences first, so the start
    component cancels and only the start x mode interaction remains. Two trees in a live pair
    (``level="start"``): their block pairs share the machine's drift and bursts, but each
    tree's server start keeps its own level, so ``interaction_var`` is then the difference of
    two starts (twice the start variance)."""
    diff = nested_mean(np.asarray(current, float) - np.asarray(reference, float),
                       prior_var=interaction_var, prior_dof=interaction_dof,
                       level=level, trim=trim)
    method = f"blocks-paired ({diff.starts} start(s) x {diff.blocks} block pair(s), " \
             f"trimmed {int(100 * trim)}%)"
    return Difference(diff.theta, diff.se, diff.df, (diff,), method)


def independent_difference(current: np.ndarray, reference: np.ndarray, *, start_var: float,
                           start_dof: float, trim: float = TRIM) -> Difference:
    """Two sittings (a run and its baseline) or two trees: each side's start component counts
    in full. The start level is one property of the setup, so what either side measures of it
    (its starts' spread, S - 1 degrees of freedom each) is pooled with the prior and used for
    both: a one-start run judged against a baseline of many nights takes the nights' spread."""
    cur = nested_mean(current, prior_var=start_var, prior_dof=start_dof, trim=trim)
    ref = nested_mean(reference, prior_var=start_var, prior_dof=start_dof, trim=trim)
    measured = [(part.measured_between_var, part.starts - 1) for part in (cur, ref)
                if part.starts >= 2]
    if measured:
        dof = start_dof + sum(d for _, d in measured)
        pooled = (start_dof * start_var + sum(v * d for v, d in measured)) / dof
        source = "measured+prior" if start_dof > 0 else "measured"
        cur = _with_between(cur, pooled, np.full(np.shape(pooled), dof), source)
        ref = _with_between(ref, pooled, np.full(np.shape(pooled), dof), source)
    se = np.sqrt(cur.se ** 2 + ref.se ** 2)
    # one start variance serves both sides (pooled, or the prior): one component with its
    # degrees of freedom, not two independent ones (that would double them)
    start = Component(cur.components[0].var + ref.components[0].var, cur.components[0].df,
                      cur.components[0].level)
    df = satterthwaite((start, cur.components[1], ref.components[1]))
    method = (f"blocks ({cur.starts}x{cur.blocks} vs {ref.starts}x{ref.blocks} "
              f"starts x blocks, trimmed {int(100 * trim)}%)")
    return Difference(cur.theta - ref.theta, se, df, (cur, ref), method)


def _with_between(part: Nested, between: np.ndarray, between_df: np.ndarray,
                  source: str) -> Nested:
    """``part`` with its start level replaced (the pooled estimate of both sides)."""
    block = part.components[1]
    components = (Component(between / part.starts, between_df, part.components[0].level),
                  block)
    se = np.sqrt(between / part.starts + block.var)
    return replace(part, se=se, df=satterthwaite(components), between_var=between,
                   between_df=between_df, between_source=source, components=components)
