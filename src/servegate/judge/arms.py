"""An *arm* (one side of a comparison) and the choice of interval: over repeats or requests.

Both the baseline comparison and the in-run A/B claims reduce to "ratio of one metric between two
arms", so the rule for which bootstrap applies lives here once.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from servegate.config.judge import JudgeConfig
from servegate.judge.checks import Check
from servegate.judge.stats import (
    Interval,
    check_seed,
    log_spread,
    ratio_over_repeats,
    ratio_over_requests,
    request_statistic,
    widen_for_run_spread,
)
from servegate.metrics import QUANTITIES


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


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def arm_from_points(label: str, points: list[dict[str, Any]]) -> Arm:
    """An arm from run.json points of one (mode, concurrency), in repeat order."""
    arm = Arm(label, repeat_ids=[int(p["repeat"]) for p in points])
    names = {name for p in points for name in p.get("metrics", {})}
    for name in sorted(names):
        vals = [p["metrics"].get(name) for p in points]
        if all(_finite(v) for v in vals):       # a metric missing in one repeat is unusable
            arm.metrics[name] = [float(v) for v in vals]
    for key in QUANTITIES:
        pooled = [float(v) for p in points for v in (p.get("requests") or {}).get(key, [])
                  if _finite(v)]
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


def ratio_interval(current: Arm, reference: Arm, metric: str, *, config: JudgeConfig,
                   confidence: float, key: str, paired: bool = False) -> Interval:
    """current/reference for ``metric``: over repeats if both have enough, else over requests."""
    cur, ref = current.values(metric), reference.values(metric)
    if not cur:
        raise NotJudgeable(f"{metric} missing from {current.label}")
    if not ref:
        raise NotJudgeable(f"{metric} missing from {reference.label}")
    seed = check_seed(config.seed, key)
    need = config.min_repeats_for_repeat_bootstrap
    if len(cur) >= need and len(ref) >= need:
        use_pairs = paired and current.repeat_ids == reference.repeat_ids
        return ratio_over_repeats(cur, ref, confidence=confidence,
                                  resamples=config.bootstrap_resamples, seed=seed,
                                  paired=use_pairs)
    stat = request_statistic(metric)
    if stat is None:
        raise NotJudgeable(
            f"{metric} has no per-request samples and only {len(cur)}/{len(ref)} repeats "
            f"({current.label}/{reference.label}); needs >= {need} repeats per arm")
    quantity, statistic = stat
    cur_req, ref_req = current.requests.get(quantity, []), reference.requests.get(quantity, [])
    if len(cur_req) < 2 or len(ref_req) < 2:
        raise NotJudgeable(
            f"{metric}: {len(cur)}/{len(ref)} repeats and {len(cur_req)}/{len(ref_req)} "
            f"per-request {quantity} samples ({current.label}/{reference.label}); needs >= "
            f"{need} repeats or >= 2 requests per arm")
    interval = ratio_over_requests(cur_req, ref_req, statistic, confidence=confidence,
                                   resamples=config.bootstrap_resamples, seed=seed)
    spreads = [s for s in (log_spread(cur), log_spread(ref)) if s is not None]
    if spreads:
        pooled = math.sqrt(sum(s * s for s in spreads) / len(spreads))
        interval = widen_for_run_spread(interval, pooled, len(cur), len(ref))
    elif config.run_to_run_cv > 0:
        # one repeat per side: the data cannot show run-to-run noise, so assume the suite's
        widened = widen_for_run_spread(interval, config.run_to_run_cv, len(cur), len(ref))
        interval = replace(widened, method=interval.method + "+assumed-run-cv")
    return interval


@dataclass
class Pending:
    """A check whose interval waits for the family size (Bonferroni needs the count first)."""

    name: str
    counts: bool                                 # gating and interval-based: joins the family
    evaluate: Callable[[float], Check]           # per-check confidence -> Check
