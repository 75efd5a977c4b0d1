"""Calibration of the claim's honesty: a runner's first night (typed priors only) against a
night judged with the priors its history taught (servegate.history.noise_profile), per world:
claim interval coverage, false refutation, claim power and the A/A rate. Why and the results:
docs/judge.md, Priors learned from the nights: the claim's honesty.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from servegate.calibration.designs import CLAIM_SIZES, BlockDesign, SimCheck, family
from servegate.calibration.in_server import (
    Learned,
    _logs,
    _night_blocks,
    decide_sequential,
    rate_interval,
)
from servegate.calibration.worlds import Noise
from servegate.history.noise_profile import night_levels, pool

HISTORY_NIGHTS = 14
BROKEN_START = 0.2      # a broken night: one server start this much slower in every mode
# the worlds judged: the claim's sizes (power), exactly the claimed size (false refutation)
# and no improvement (false confirmation)


def learn_priors(rng: np.random.Generator, design: BlockDesign, checks: list[SimCheck],
                 noise: Noise, nights: int, history: int) -> tuple[Learned, dict[str, Any]]:
    """Per check, the prior ``history`` simulated nights teach (per simulated night), and
    what they taught the claim (median learned log-sd, nights left out of profile)."""
    effect = {"on:ttft": math.log(1 - CLAIM_SIZES[-1])} if design.gated else {}
    drawn = _night_blocks(rng, design, nights * history, noise, effect)
    past = {key: value.reshape(nights, history, design.starts, design.blocks)
            for key, value in drawn.items()}
    learned: Learned = {}
    summary: dict[str, Any] = {}
    for check in checks:
        if check.kind in ("claim_accuracy", "noop_prefill"):
            continue
        if check.kind == "versus":
            assert check.mode is not None
            logs = _logs(past, check.mode, check.concs, check.metric)
        else:
            logs = (_logs(past, "on", check.concs, check.metric)
                    - _logs(past, "off", check.concs, check.metric))
        levels = night_levels(logs)
        pooled = pool(levels.var, levels.dof, levels.carried)
        learned[check.name] = (pooled.var, pooled.dof)
        if check.kind == "claim_ttft" and np.any(pooled.dof > 0):
            summary = {"learned_interaction_sd_median": round(float(np.sqrt(np.nanmedian(
                pooled.var))), 5),
                "learned_dof_median": float(np.median(pooled.dof)),
                "nights_out_of_profile": round(float(pooled.out.mean()), 5)}
    return learned, summary


def _world(design: BlockDesign, checks: list[SimCheck], rng: np.random.Generator, nights: int,
           noise: Noise, improvement: float, reference: dict, learned: Learned | None
           ) -> tuple[Any, float]:
    """One world's decisions and its true claim log ratio."""
    true = math.log(1 - improvement)
    current = _night_blocks(rng, design, nights, noise, {"on:ttft": true})
    decided, _ = decide_sequential(design, checks, current, reference, rng, nights, learned)
    return decided, true


def claim_honesty(design: BlockDesign, noise: Noise, *, nights: int, seed: int,
                  history: int = HISTORY_NIGHTS, batch: int = 200) -> dict[str, Any] | None:
    """Per prior source (``first_night``: the suite's; ``with_history``: learned from
    ``history`` nights), on the design's claim: A/A false alarm, claim power at the PR's sizes,
    coverage of the claim's interval (two-sided at its Holm level) and the share of nights
    that understate the improvement (the interval wholly above the true ratio), the false
    refutation rate at exactly the claimed size, false confirmation at no improvement, and
    the share of nights whose run refuted the prior. None for a design without a claim."""
    checks = family(design)
    kinds = [c.kind for c in checks]
    if "claim_ttft" not in kinds:
        return None
    claim = kinds.index("claim_ttft")
    claimed = checks[claim].floor
    sizes = (*CLAIM_SIZES, claimed)
    rng = np.random.default_rng([seed, int(noise.run_cv * 1e6), int(noise.block_cv * 1e6),
                                 int(noise.interaction_cv * 1e6), history])
    pr = math.log(1 - CLAIM_SIZES[-1])
    keys = ("first_night", "with_history")
    tally: dict[str, dict[str, int]] = {k: {} for k in keys}
    taught: list[dict[str, Any]] = []
    done = 0
    while done < nights:
        size = min(batch, nights - done)
        learned, summary = learn_priors(rng, design, checks, noise, size, history)
        taught.append(summary)
        reference = _night_blocks(rng, design, size, noise, {"on:ttft": pr})
        aa_current = _night_blocks(rng, design, size, noise, {"on:ttft": pr})
        for key, priors in zip(keys, (None, learned), strict=True):
            count = tally[key]

            def add(name: str, hits: np.ndarray, count: dict[str, int] = count) -> None:
                count[name] = count.get(name, 0) + int(hits.sum())

            aa, _ = decide_sequential(design, checks, aa_current, reference, rng, size, priors)
            add("aa", ((aa.codes == 1) & aa.gating).any(axis=1))
            for improvement in (*sizes, 0.0):
                decided, true = _world(design, checks, rng, size, noise, improvement,
                                       reference, priors)
                assert decided.low is not None and decided.high is not None
                assert decided.widened is not None
                low, high = decided.low[:, claim], decided.high[:, claim]
                code = decided.codes[:, claim]
                tag = f"{improvement:g}"
                add(f"pass {tag}", code == 0)
                add(f"refuted {tag}", code == 1)
                add(f"covered {tag}", (low <= true) & (true <= high))
                add(f"understated {tag}", low > true)
                add(f"widened {tag}", decided.widened[:, claim])
        done += size

    def rate(count: dict[str, int], name: str) -> float:
        return round(count.get(name, 0) / nights, 5)

    out: dict[str, Any] = {"history_nights": history, "claimed_improvement": claimed,
                           "nights": nights}
    for key in keys:
        count = tally[key]
        out[key] = {
            "aa_false_alarm": rate(count, "aa"),
            "aa_false_alarm_ci": rate_interval(count.get("aa", 0), nights),
            "claim_power": {f"{s:g}": rate(count, f"pass {s:g}") for s in CLAIM_SIZES},
            "claim_coverage": {f"{s:g}": rate(count, f"covered {s:g}") for s in sizes},
            "claim_understated": {f"{s:g}": rate(count, f"understated {s:g}")
                                  for s in sizes},
            "false_refutation_at_claim": rate(count, f"refuted {claimed:g}"),
            "false_refutation_at_claim_ci": rate_interval(
                count.get(f"refuted {claimed:g}", 0), nights),
            "claim_false_confirmation": rate(count, "pass 0"),
            "prior_refuted": {f"{s:g}": rate(count, f"widened {s:g}") for s in sizes},
        }
    out["first_night"]["interaction_prior"] = {
        "cv": design.config.interaction_cv, "dof": design.config.interaction_cv_dof,
        "source": f"[judge] interaction_cv of suite {design.suite}"}
    weights = [min(batch, nights - i * batch) for i in range(len(taught))]
    if taught and taught[0]:
        out["with_history"]["learned"] = {
            name: round(float(np.average([t[name] for t in taught], weights=weights)), 5)
            for name in taught[0]}
    else:          # one start a night: nothing in the history measures the interaction
        out["with_history"]["learned"] = {
            "learned_interaction_sd_median": None, "learned_dof_median": 0.0,
            "why": f"{design.starts} start a night measures no start x mode interaction: "
                   "the typed prior stays"}
    return out


def runner_health(design: BlockDesign, noise: Noise, *, nights: int, seed: int,
                  history: int = HISTORY_NIGHTS) -> dict[str, Any] | None:
    """The runner-health signal (a night out of profile at a mode's start level, as
    servegate.history.profile names it) over ``nights`` simulated histories of ``history``
    nights: the share of healthy nights named, and of nights whose first start ran
    ``BROKEN_START`` slower in every mode (its last night). None with one start a night."""
    if design.starts < 2:
        return None
    rng = np.random.default_rng([seed, int(noise.run_cv * 1e6), int(noise.block_cv * 1e6),
                                 int(noise.heavy), history, 11])
    effect = {"on:ttft": math.log(1 - CLAIM_SIZES[-1])} if design.gated else {}
    drawn = _night_blocks(rng, design, nights * history, noise, effect)
    healthy = {k: v.reshape(nights, history, design.starts, design.blocks)
               for k, v in drawn.items()}
    broken = {k: v.copy() for k, v in healthy.items()}
    for value in broken.values():
        value[:, -1, 0] += math.log1p(BROKEN_START)     # the last night's first start
    named = np.zeros((2, nights, history), bool)
    for i, world in enumerate((healthy, broken)):
        for mode in design.modes:               # each gated aggregate's start level
            for metric in design.config.aggregate_metrics:
                concs = tuple(design.config.aggregate_concs(metric, list(design.concurrencies)))
                levels = night_levels(_logs(world, mode, concs, metric))
                named[i] |= pool(levels.var, levels.dof, levels.carried).out
    return {"history_nights": history, "healthy_nights_named": round(float(named[0].mean()), 5),
            "broken_start_named": round(float(named[1][:, -1].mean()), 4),
            "broken_start_slowdown": BROKEN_START}
