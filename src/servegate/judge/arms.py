"""An *arm* (one side of a comparison) and the choice of interval: over repeats or requests.

Both the baseline comparison and the in-run A/B claims reduce to "ratio of one metric between two
arms", so the rule for which bootstrap applies lives here once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from servegate.config.judge import JudgeConfig
from servegate.core.metrics import METRICS, QUANTITIES, finite_number, statistic_fn
from servegate.judge.checks import Check
from servegate.judge.stats import (
    Interval,
    check_seed,
    interval_from_log,
    log_se_within,
    pooled_run_variance,
    repeats_estimate,
    requests_estimate,
)


@dataclass
class Arm:
    """Per-repeat values of every metric plus pooled per-request samples."""

    label: str
    repeat_ids: list[int] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)
    requests: dict[str, list[float]] = field(default_factory=dict)

    def values(self, metric: str) -> list[float]:
        return self.metrics.get(metric, [])

    def mean(self, metric: str) -> float | None:
        vals = self.values(metric)
        return sum(vals) / len(vals) if vals else None


def arm_from_points(label: str, points: list[dict[str, Any]]) -> Arm:
    """An arm from run.json points of one (mode, concurrency), in repeat order."""
    arm = Arm(label, repeat_ids=[int(p["repeat"]) for p in points])
    names = {name for p in points for name in p.get("metrics", {})}
    for name in sorted(names):
        vals = [p.get("metrics", {}).get(name) for p in points]
        if all(finite_number(v) for v in vals):       # a metric missing in one repeat is unusable
            arm.metrics[name] = [float(v) for v in vals]
    for key in QUANTITIES:
        pooled = [float(v) for p in points for v in (p.get("requests") or {}).get(key, [])
                  if finite_number(v)]
        if pooled:
            arm.requests[key] = pooled
    return arm


def arm_from_baseline(point: dict[str, Any]) -> Arm:
    """An arm from a stored baseline point."""
    arm = Arm("baseline", repeat_ids=list(point.get("repeats", [])))
    for name, entry in point.get("metrics", {}).items():
        arm.metrics[name] = [float(v) for v in entry["repeats"]]
    for key, vals in (point.get("requests") or {}).items():
        if isinstance(vals, list) and vals:
            arm.requests[key] = [float(v) for v in vals]
    return arm


class NotJudgeable(Exception):
    """The arms don't carry enough data for an interval; the message says what is missing."""


@dataclass
class ArmStats:
    """One arm's numbers for one metric, with simulated nights on the leading axes (the judge
    uses one night): per-repeat values, and the statistic of the pooled per-request samples
    with the standard error of its log (None for summary-only metrics)."""

    values: np.ndarray                    # (..., repeats)
    pooled: np.ndarray | None = None      # (...,)
    pooled_se: np.ndarray | None = None   # (...,)
    n_requests: int = 0


def arm_stats(arm: Arm, metric: str, seed: int) -> ArmStats:
    """:class:`ArmStats` of one real arm (a leading axis of length 1)."""
    values = np.asarray(arm.values(metric))[None, :]     # an Arm holds floats
    registered = METRICS.get(metric)
    if registered is None or registered.statistic is None:
        return ArmStats(values)
    # (a statistic of no registered quantity finds no samples: n_requests 0, as above)
    samples = np.asarray(arm.requests.get(registered.quantity, []))
    if len(samples) < 2:
        return ArmStats(values, n_requests=len(samples))
    pooled = statistic_fn(registered.statistic)(samples[None, :])
    se = log_se_within(samples[None, :], registered.statistic, seed=seed)
    return ArmStats(values, pooled, se, len(samples))


@dataclass
class Comparison:
    """log(current/reference) with its standard error and degrees of freedom (arrays)."""

    theta: np.ndarray
    se: np.ndarray
    df: np.ndarray
    run_var: np.ndarray
    method: str
    n_current: int
    n_reference: int
    n_repeats: int


def _sum_squares(logs: np.ndarray) -> np.ndarray:
    return ((logs - logs.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1)


def compare_arms(cur: ArmStats, ref: ArmStats, *, config: JudgeConfig, paired: bool,
                 what: str = "metric") -> Comparison:
    """The judge's one rule for a ratio check, vectorised over leading axes.

    Both arms with >= ``min_repeats_for_repeat_bootstrap`` repeats: a t test over whole repeats
    (paired by repeat when asked), the repeats' spread pooled with the assumed run-to-run CV.
    Otherwise: the statistic of the pooled per-request samples, its within-run standard error,
    and a run-to-run variance term (measured spread of whichever arm has repeats, pooled with the
    assumption); Welch-Satterthwaite degrees of freedom. Raises :class:`NotJudgeable` when the
    data cannot support an interval at all.
    """
    n_c, n_r = cur.values.shape[-1], ref.values.shape[-1]
    need = config.min_repeats_for_repeat_bootstrap
    prior_var, prior_dof = config.run_to_run_cv ** 2, config.run_to_run_cv_dof
    if np.any(cur.values <= 0) or np.any(ref.values <= 0):
        raise ValueError(f"{what}: values must be positive for a ratio")
    cur_logs, ref_logs = np.log(cur.values), np.log(ref.values)
    if n_c >= need and n_r >= need:
        # The assumption covers run-to-run noise only: a repeat's variance also holds its
        # within-run noise, so the prior is the assumed CV plus that. Where the within-run part
        # cannot be estimated (summary-only metrics, a quantile the requests cannot bound) the
        # prior gets no weight and the repeats' own spread decides alone.
        within = [a.pooled_se ** 2 * a.values.shape[-1] for a in (cur, ref)
                  if a.pooled_se is not None]
        within_var = sum(within) / len(within) if within else np.nan
        known = np.isfinite(within_var)
        within_var = np.where(known, within_var, 0.0)
        paired = paired and n_c == n_r
        theta, se, df = repeats_estimate(cur_logs, ref_logs, paired=paired,
                                         prior_var=prior_var + within_var,
                                         prior_dof=np.where(known, prior_dof, 0.0))
        if not np.all(df > 0):
            raise NotJudgeable(f"{what}: no degrees of freedom for the run-to-run variance "
                               f"({n_c}/{n_r} repeats, run_to_run_cv_dof {prior_dof:g}): the "
                               "family's level is unreachable")
        # the part of se^2 that more prompts cannot shrink: se^2 less the within-run variance
        # of the two means (1/n_c + 1/n_r per repeat; paired arms have n_c == n_r, where that
        # is the 2/n of a difference)
        run_var = np.maximum(se ** 2 - within_var * (1 / n_c + 1 / n_r), 0.0)
        return Comparison(theta, se, df, run_var,
                          "repeats-paired" if paired else "repeats", n_c, n_r, n_c)
    if cur.pooled is None or ref.pooled is None or cur.pooled_se is None \
            or ref.pooled_se is None:
        if cur.n_requests or ref.n_requests or (cur.pooled is not None):
            raise NotJudgeable(f"{what}: {n_c}/{n_r} repeats and {cur.n_requests}/"
                               f"{ref.n_requests} per-request samples; needs >= {need} repeats "
                               "or >= 2 requests per arm")
        raise NotJudgeable(f"{what} has no per-request samples and only {n_c}/{n_r} repeats; "
                           f"needs >= {need} repeats per arm")
    if np.any(cur.pooled <= 0) or np.any(ref.pooled <= 0):
        raise ValueError(f"{what}: statistic is not positive; a ratio is meaningless")
    sum_sq = _sum_squares(cur_logs) + _sum_squares(ref_logs)    # 0 for a single repeat
    dof = (n_c - 1) + (n_r - 1)
    if prior_var == 0 and dof == 0:
        run_var, run_dof = 0.0, math.inf    # no run-to-run term at all (not an unknown one)
    else:
        run_var, run_dof = pooled_run_variance(sum_sq, dof, prior_var, prior_dof)
    se, df, run = requests_estimate(cur.pooled_se, ref.pooled_se, cur.n_requests,
                                    ref.n_requests, run_var, run_dof, n_c, n_r)
    if np.all(np.isnan(se)):
        raise NotJudgeable(f"{what}: {cur.n_requests}/{ref.n_requests} requests cannot bound "
                           "the statistic (its order-statistic interval runs past the sample); "
                           f"needs more prompts or >= {need} repeats per arm")
    method = "requests" + ("+run-spread" if dof else "") + \
        ("+assumed-run-cv" if prior_var > 0 else "")
    return Comparison(np.log(cur.pooled / ref.pooled), se, df, run, method, cur.n_requests,
                      ref.n_requests, n_c)


def ratio_interval(current: Arm, reference: Arm, metric: str, *, config: JudgeConfig,
                   confidence: float, key: str, paired: bool = False) -> Interval:
    """current/reference for ``metric`` (see :func:`compare_arms`), as an :class:`Interval`."""
    if not current.values(metric):
        raise NotJudgeable(f"{metric} missing from {current.label}")
    if not reference.values(metric):
        raise NotJudgeable(f"{metric} missing from {reference.label}")
    seed = check_seed(config.seed, key)
    use_pairs = paired and current.repeat_ids == reference.repeat_ids
    ref_seed = seed + 1   # pragma: no mutate (any seed but the current arm's is as good)
    comp = compare_arms(arm_stats(current, metric, seed), arm_stats(reference, metric, ref_seed),
                        config=config, paired=use_pairs,
                        what=f"{metric} ({current.label}/{reference.label})")
    theta, se, df = float(comp.theta[0]), float(comp.se[0]), float(comp.df[0])
    if not math.isfinite(se):       # e.g. a NaN repeat value in an arm built by hand
        raise NotJudgeable(f"{metric} ({current.label}/{reference.label}): no standard error "
                           "from these samples")
    interval = interval_from_log(theta, se, df, confidence, comp.method, comp.n_current,
                                 comp.n_reference, run_var=float(comp.run_var[0]))
    return replace(interval, n_repeats=comp.n_repeats)


@dataclass
class Pending:
    """A check whose interval waits for the family size (Bonferroni needs the count first)."""

    name: str
    counts: bool                                 # gating and interval-based: joins the family
    evaluate: Callable[[float], Check]           # per-check confidence -> Check
    primary: bool = True                         # in the suite's gated family (else reported)
    one_sided: bool = False                      # builds its interval at 1 - 2 alpha itself
