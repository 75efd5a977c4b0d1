"""The gated family: a few primary checks decided together under Holm's step-down procedure,
everything else reported at the plain ``confidence`` level (why, and the procedure: docs/judge.md,
How a check is decided, The gated family)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from servegate.judge.checks import Check
from servegate.judge.pending import Pending
from servegate.judge.stats import per_check_confidence

HOLM = "holm"
BONFERRONI = "bonferroni"


def decision_p_value(check: Check, one_sided: bool) -> float:
    """The smallest alpha at which ``check`` is decided (1.0 when it cannot be: no interval).

    A check that carries its own p-value (e.g. the no-op's Fisher test) gives that."""
    if check.p_value is not None:
        return float(check.p_value)
    iv, bounds = check.interval, check.decision_boundaries()
    if iv is None or not bounds:
        return 1.0
    se = iv.standard_error()
    if not math.isfinite(se) or se <= 0:
        return 1.0
    return float(decision_alpha(np.float64(iv.to_model(iv.estimate)), np.float64(se),
                                np.float64(iv.df), [iv.to_model(b) for b in bounds],
                                one_sided))


def decision_alpha(theta: np.ndarray, se: np.ndarray, df: np.ndarray,
                   boundaries: list[float], one_sided: bool) -> np.ndarray:
    """Vectorised :func:`decision_p_value` on the model scale (log ratio or difference): the
    interval ``theta +- t_{(1+c)/2, df} se`` is decided iff that half-width is below the
    distance to the nearest boundary; NaN estimates are never decided (1.0)."""
    distance = np.min(np.abs(np.asarray(theta)[..., None] - np.asarray(boundaries)), axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        critical = 2.0 * sps.t.cdf(distance / se, df) - 1.0
    alpha = np.where(np.isfinite(critical), 1.0 - critical, 1.0)
    return alpha / 2.0 if one_sided else alpha


def holm_levels(p_values: list[float], alpha: float) -> list[float]:
    """Per-check levels of Holm's step-down (statsmodels decides which are rejected)."""
    m = len(p_values)
    if m == 0:
        return []
    reject = multipletests(p_values, alpha=alpha, method="holm")[0]
    order = sorted(range(m), key=lambda i: p_values[i])
    levels = [0.0] * m
    stop_level = None
    for rank, index in enumerate(order):
        step = alpha / (m - rank)
        if stop_level is None and not reject[index]:
            stop_level = step
        levels[index] = step if stop_level is None else stop_level
    return levels


def holm_levels_array(p_values: np.ndarray, alpha: float) -> np.ndarray:
    """:func:`holm_levels` for many families at once (``(nights, m)``; servegate calibrate).
    Equal to statsmodels' decisions (a test compares them on random families)."""
    p = np.asarray(p_values, float)
    m = p.shape[-1]
    order = np.argsort(p, axis=-1, kind="stable")
    sorted_p = np.take_along_axis(p, order, axis=-1)
    steps = alpha / (m - np.arange(m))                      # alpha/m, alpha/(m-1), ...
    rejected = np.cumprod(sorted_p <= steps, axis=-1).astype(bool)
    n_rejected = rejected.sum(axis=-1, keepdims=True)       # rejections form a prefix
    stop = np.take_along_axis(np.broadcast_to(steps, p.shape),
                              np.minimum(n_rejected, m - 1), axis=-1)
    sorted_levels = np.where(rejected, steps, stop)
    levels = np.empty_like(p)
    np.put_along_axis(levels, order, sorted_levels, axis=-1)
    return levels


def decide(pendings: list[Pending], confidence: float, method: str
           ) -> tuple[list[Check], dict[str, object]]:
    """Evaluate every pending check: the primary family at its family level, the rest at the
    plain ``confidence`` (reported, not gating). Returns the checks (in pending order) and the
    family record for verdict.json (``method``, ``size``, ``checks``)."""
    alpha = 1.0 - confidence
    primary = [i for i, p in enumerate(pendings) if p.counts and p.primary]
    out: list[Check | None] = [None] * len(pendings)
    used: dict[int, float] = {}
    if method == HOLM:
        first = {i: pendings[i].evaluate(confidence) for i in primary}
        p_values = [decision_p_value(first[i], pendings[i].one_sided) for i in primary]
        levels = holm_levels(p_values, alpha)
        for i, level, p in zip(primary, levels, p_values, strict=True):
            check = pendings[i].evaluate(1.0 - level)
            out[i] = replace(check, p_value=p)
            used[i] = 1.0 - level
    else:
        level_confidence = per_check_confidence(confidence, len(primary))
        for i in primary:
            out[i] = pendings[i].evaluate(level_confidence)
            used[i] = level_confidence
    for i, pending in enumerate(pendings):
        if out[i] is not None:
            continue
        check = pending.evaluate(confidence)
        if pending.counts and not pending.primary:   # reported with its interval, never gating
            check = replace(check, gate=False, primary=False)
        elif not pending.counts:
            check = replace(check, primary=False)
        out[i] = check
    checks = [c for c in out if c is not None]
    family = {"method": method, "size": len(primary),
              "checks": [checks[i].name for i in primary],
              # the confidence each gated check was actually evaluated at (Holm: per step)
              "levels": {checks[i].name: round(used[i], 8) for i in primary}}
    return checks, family
