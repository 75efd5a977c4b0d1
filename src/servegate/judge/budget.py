"""The noise budget: the cheapest server starts x blocks that would decide a check.

Kalibera & Jones (ISMM 2013): a mean over S starts of B blocks has variance ``var_start / S +
var_block / (S B)`` and costs ``S (cost_start + B cost_round)``; the target is 80 % power at the
check's level for the distance to the nearest decision boundary."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from scipy import stats as sps

POWER = 0.8
MAX_STARTS, MAX_BLOCKS = 12, 40
EFFICIENCY = 0.6              # blocks left after 20 % trimming at each end


@dataclass(frozen=True)
class Plan:
    starts: int
    blocks: int
    seconds: float
    se: float


def variance(noise: dict[str, Any], starts: int, blocks: int) -> float:
    """The check's squared standard error with the current side at ``starts`` x ``blocks``
    (the reference side, when there is one, stays as measured)."""
    between = float(noise["between_var"]) / starts
    within = float(noise["block_var"]) / (EFFICIENCY * starts * blocks)
    return between + within + float(noise.get("fixed_var", 0.0))


def cheapest(noise: dict[str, Any], target_se: float, start_s: float,
             round_s: float) -> Plan | None:
    """The cheapest (starts, blocks) whose standard error is at most ``target_se``."""
    best: Plan | None = None
    for starts in range(1, MAX_STARTS + 1):
        for blocks in range(2, MAX_BLOCKS + 1):
            se = math.sqrt(variance(noise, starts, blocks))
            if se > target_se:
                continue
            seconds = starts * (start_s + blocks * round_s)
            if best is None or seconds < best.seconds:
                best = Plan(starts, blocks, seconds, se)
            break                         # more blocks at this many starts only cost more
    return best


def target_se(distance: float, alpha: float, df: float, one_sided: bool) -> float:
    """The standard error at which a true effect ``distance`` from the boundary is decided
    with 80 % power at level ``alpha``."""
    tail = alpha if one_sided else alpha / 2.0
    df = df if math.isfinite(df) and df > 0 else math.inf
    return distance / (float(sps.t.ppf(1 - tail, df)) + float(sps.norm.ppf(POWER)))


def costs(run: dict[str, Any]) -> tuple[float, float] | None:
    """(seconds per server start, seconds per block round of every mode and concurrency),
    measured in the run; None before the run recorded them."""
    design = run.get("design") or {}
    starts = design.get("start_seconds") or []
    block = design.get("block_seconds")
    if not starts or not block:
        return None
    points = run.get("points") or []
    per_round = len({(p.get("arm", ""), p["mode"], p["concurrency"]) for p in points})
    return sum(starts) / len(starts), float(block) * max(per_round, 1)


def plan_for(check: Any, run: dict[str, Any]) -> dict[str, Any] | None:
    """The budget of one inconclusive check (its ``noise`` record from the block judge)."""
    noise = check.noise
    iv = check.interval
    bounds = check.decision_boundaries()
    cost = costs(run)
    if noise is None or iv is None or not bounds or cost is None:
        return None
    theta = iv.to_model(iv.estimate)
    distance = min(abs(theta - iv.to_model(b)) for b in bounds)
    if distance <= 1e-9:
        return {"check": check.name, "decidable": False,
                "why": "the estimate sits on the decision boundary"}
    # a one-sided check at level a has its interval at 1 - 2a: its two-sided alpha gives the
    # quantile t(1 - a) either way
    target = target_se(distance, 1.0 - iv.confidence, iv.df, one_sided=False)
    fixed_var = float(noise["fixed_var"])
    if fixed_var >= target * target:
        return {"check": check.name, "decidable": False, "target_se": round(target, 5),
                "why": (f"the reference alone (se {math.sqrt(fixed_var):.3f}, "
                        f"target {target:.3f}) is too noisy whatever this run does: record "
                        "the baseline from more server starts")}
    plan = cheapest(noise, target, *cost)
    record: dict[str, Any] = {"check": check.name, "target_se": round(target, 5),
                              "start_level": noise["between_source"],
                              "this_run": {"starts": noise["starts"], "blocks": noise["blocks"]}}
    if plan is None:
        start_only = float(noise["between_var"]) / MAX_STARTS + fixed_var
        if start_only >= target * target:
            why = (f"the start level alone (log-sd {math.sqrt(float(noise['between_var'])):.3f},"
                   f" {noise['between_source']}) needs more than {MAX_STARTS} starts")
        else:
            why = (f"the block level (log-sd {math.sqrt(float(noise['block_var'])):.3f}) needs "
                   f"more than {MAX_STARTS} starts x {MAX_BLOCKS} blocks")
        record.update(decidable=False, why=why)
        return record
    record.update(decidable=True, starts=plan.starts, blocks=plan.blocks,
                  serving_minutes=round(plan.seconds / 60.0, 1))
    return record


def budget_text(plans: list[dict[str, Any]]) -> str | None:
    """One line for the verdict block: the largest design any undecided gated check needs."""
    decidable = [p for p in plans if p.get("decidable")]
    if decidable:
        worst = max(decidable, key=lambda p: p["serving_minutes"])
        return (f"noise budget: {worst['starts']} start(s) x {worst['blocks']} blocks "
                f"(~{worst['serving_minutes']:g} serving min) would decide {worst['check']} "
                f"(this run {worst['this_run']['starts']} x {worst['this_run']['blocks']}; "
                f"start level {worst['start_level']})")
    if plans:
        return f"noise budget: {plans[0]['check']}: {plans[0]['why']}"
    return None
