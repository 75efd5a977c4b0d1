"""A noise level learned from a runner's nights: each night measured with the judge's own estimator
(no prior), pooled by degrees of freedom, a night out of profile named and left out. Between the
judge and its users so that the history store (real nights) and the calibration (simulated ones)
learn a level the same way (``OUT_LEVEL``'s calibration: docs/judge.md)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from servegate.judge.nested import nested_mean

OUT_LEVEL = 1e-4
PAIR_OUT_LEVEL = 1e-3      # a live pair that moved: a real change (calibrate --stored-changes)
MIN_NIGHTS = 4


@dataclass(frozen=True)
class NightLevels:
    """One night's (or each simulated night's) measured levels, arrays over leading axes."""

    var: np.ndarray          # start-level (or interaction) variance, measured, no prior
    dof: np.ndarray          # starts - 1 (0: one start, nothing measured)
    carried: np.ndarray      # block part of one start mean's variance (starts x pooled se^2)
    block_var: np.ndarray    # per-block variance inside a start
    block_dof: np.ndarray


def night_levels(logs: np.ndarray) -> NightLevels:
    """Levels of nights shaped ``(..., starts, blocks)`` (log values or log differences)."""
    logs = np.asarray(logs, float)
    found = nested_mean(logs, prior_var=0.0, prior_dof=0.0, stated_level=None)
    starts = logs.shape[-2]
    shape = np.shape(found.theta)
    if starts < 2:
        nan = np.full(shape, np.nan)
        return NightLevels(nan, np.zeros(shape), nan, np.asarray(found.block_var),
                           np.asarray(found.block_df))
    within = found.components[1].var
    return NightLevels(np.asarray(found.measured_between_var, float),
                       np.full(shape, float(starts - 1)), np.asarray(starts * within, float),
                       np.asarray(found.block_var, float), np.asarray(found.block_df, float))


@dataclass(frozen=True)
class Pooled:
    """The nights pooled (arrays over leading axes; the nights axis reduced)."""

    var: np.ndarray
    dof: np.ndarray
    nights: np.ndarray       # nights averaged in
    out: np.ndarray          # (..., nights) bool: out of profile, left out


def pool(var: np.ndarray, dof: np.ndarray, carried: np.ndarray,
         out_level: float = OUT_LEVEL) -> Pooled:
    """Pool nights (last axis) by degrees of freedom, leaving out-of-profile nights out.

    A night (``dof > 0``) is out of profile when its starts' spread ``var + carried`` divided
    by the nights' robust spread (the median of ``spread / (chi2 median / dof)``) exceeds the
    chi-square/dof quantile at ``1 - out_level``: a broken runner, not the runner's noise."""
    var, dof = np.asarray(var, float), np.asarray(dof, float)
    carried = np.nan_to_num(np.asarray(carried, float))
    measured = (dof > 0) & np.isfinite(var)
    safe_dof = np.where(measured, dof, 1.0)
    spread = np.where(measured, var + carried, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)      # a row with no measured night
        scaled = spread / (sps.chi2.median(safe_dof) / safe_dof)
        robust = np.nanmedian(np.where(measured, scaled, np.nan), axis=-1, keepdims=True)
        limit = sps.chi2.ppf(1.0 - out_level, safe_dof) / safe_dof
        enough = measured.sum(axis=-1, keepdims=True) >= MIN_NIGHTS
        out = measured & enough & (robust > 0) & (spread / robust > limit)
    keep = measured & ~out
    weights = np.where(keep, dof, 0.0)
    total = weights.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = np.where(total > 0, (weights * np.where(keep, var, 0.0)).sum(axis=-1)
                          / np.where(total > 0, total, 1.0), np.nan)
    return Pooled(pooled, total, keep.sum(axis=-1), out)


def pair_levels(diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(var, carried) of live pairs' starts, ``diffs`` shaped ``(..., blocks)``: head - base
    per block pair of one start. Its start mean (the judge's estimator) squared, less the block
    part it carries, measures the servers' start-level difference with one dof (no change
    assumed: a pair that moved is out of profile in :func:`pool` at ``PAIR_OUT_LEVEL``)."""
    found = nested_mean(np.asarray(diffs, float)[..., None, :], prior_var=0.0, prior_dof=0.0)
    carried = np.asarray(found.components[1].var, float)
    return np.maximum(np.asarray(found.theta) ** 2 - carried, 0.0), carried
