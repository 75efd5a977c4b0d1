"""Calibration of paired designs: a mode pair inside the same starts (how large an effect a
design catches), and head vs base in live pairs (``servegate ab``), both through the judge's own
paired estimator and decisions, with the in-server simulation's noise model
(:mod:`servegate.calibration`)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import stats as sps

from servegate.calibration.designs import SLOWDOWNS
from servegate.calibration.in_server import family_levels, rate_interval
from servegate.calibration.worlds import Noise, bursty_blocks
from servegate.config.judge import JudgeConfig
from servegate.history.noise_profile import PAIR_OUT_LEVEL, pair_levels, pool
from servegate.judge import sequential
from servegate.judge.family import decision_alpha
from servegate.judge.nested import design_se, paired_difference
from servegate.judge.stats import classify, resolution


def paired_effect_power(starts: int, blocks: int, effect: float, noise: Noise, *,
                        floor: float, prior_cv: float, prior_dof: float, nights: int = 4000,
                        seed: int = 20261201, confidence: float = 0.95) -> dict[str, float]:
    """Power of one reported mode-vs-mode check (e.g. the forced-vs-off experiment) in a
    ``starts`` x ``blocks`` design: the share of nights whose interval (at ``confidence``)
    excludes no change, and whose verdict is a regression past ``floor``, when the true
    slowdown is ``effect``. The same bursty block model and the judge's paired estimator."""
    rng = np.random.default_rng([seed, starts, blocks, int(abs(effect) * 1e6), int(effect < 0)])

    def blocks_of(shift: float) -> np.ndarray:
        block = bursty_blocks(rng, (nights, starts, blocks), noise.block_cv)
        interaction = rng.normal(0.0, noise.per_mode_interaction, (nights, starts, 1))
        return block + interaction + shift

    start = rng.normal(0.0, noise.run_cv, (nights, starts, 1))
    diff = paired_difference(start + blocks_of(math.log1p(effect)), start + blocks_of(0.0),
                             interaction_var=prior_cv ** 2, interaction_dof=prior_dof)
    q = sps.t.ppf(0.5 + confidence / 2, diff.df)
    low, high = diff.theta - q * diff.se, diff.theta + q * diff.se
    codes = classify(np.expm1(low), np.expm1(high), floor, "lower")
    return {"excludes_no_change": float(np.mean(low > 0)),
            "regression": float(np.mean(codes == 1))}


def smallest_paired_effect(starts: int, blocks: int, noise: Noise, *, floor: float,
                           prior_cv: float, prior_dof: float, power: float = 0.8,
                           grid: tuple[float, ...] = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4,
                                                      0.5, 0.75, 1.0)) -> float | None:
    """The smallest slowdown on ``grid`` a mode-vs-mode check calls a regression past its
    floor in at least ``power`` of nights (None: beyond the grid)."""
    for effect in grid:
        result = paired_effect_power(starts, blocks, effect, noise, floor=floor,
                                     prior_cv=prior_cv, prior_dof=prior_dof)
        if result["regression"] >= power:
            return effect
    return None


def _pair_nights(rng: np.random.Generator, nights: int, starts: int, blocks: int, noise: Noise,
                 shift: float) -> np.ndarray:
    """One tree's blocks in a live pair: its own server start factor (each tree has its own
    start), its own bursty block noise, and ``shift`` (the true change, log scale)."""
    block = bursty_blocks(rng, (nights, starts, blocks), noise.block_cv)
    return rng.normal(0.0, noise.run_cv, (nights, starts, 1)) + block + shift


CHANGE = 0.2       # a stored pair that was a real change: head this much slower, every metric
PAIR_SLOWDOWNS = tuple(sorted({*SLOWDOWNS, 0.08, 0.12}))      # finer: a learned pair resolves


def learned_start(config: JudgeConfig, rng: np.random.Generator, nights: int, blocks: int,
                  noise: Noise, stored: int, changes: int) -> tuple[np.ndarray, np.ndarray]:
    """Per night, the live pair's start-level prior (var, dof) as Judge.pair_prior picks it:
    learned from ``stored`` earlier pairs (``changes`` of them real ``CHANGE`` slowdowns) as
    the history store learns it, where worth more dof than 2 x ``pair_cv``^2."""
    var, dof = 2 * config.pair_cv ** 2, config.run_to_run_cv_dof
    if stored < 1:
        return np.full(nights, var), np.full(nights, dof)
    moved = np.where(np.arange(stored) < changes, math.log1p(CHANGE), 0.0)[:, None]
    diffs = (_pair_nights(rng, nights, stored, blocks, noise, 0.0) + moved
             - _pair_nights(rng, nights, stored, blocks, noise, 0.0))
    measured, carried = pair_levels(diffs)
    pooled = pool(measured, np.ones_like(measured), carried, out_level=PAIR_OUT_LEVEL)
    use = pooled.dof > dof
    return np.where(use, pooled.var, var), np.where(use, pooled.dof, dof)


def live_pair_calibration(config: JudgeConfig, starts: int, blocks: int, modes: int,
                          noise: Noise, *, nights: int, seed: int,
                          looks: tuple[int, ...] = (),
                          slowdowns: tuple[float, ...] = PAIR_SLOWDOWNS, stored: int = 0,
                          changes: int = 0, crossover: bool = False) -> dict[str, Any]:
    """Head vs base in live pairs (``servegate ab``): A/A false alarms per run and the power
    against a head-only TTFT slowdown, through the judge's live-pair estimator (start difference
    from the prior 2 x ``pair_cv``^2 or :func:`learned_start`, measured too with two starts or
    more) and Holm over the primary family (a mode's metrics simulated independent:
    conservative). ``looks``: each night judged at every look and kept where it stops, as bench
    runs it; ``crossover`` (one start): a second start on the nights the first leaves undecided."""
    rng = np.random.default_rng([seed, starts, blocks, int(noise.run_cv * 1e6),
                                 int(noise.block_cv * 1e6), stored, changes, int(crossover)])
    metrics = list(config.aggregate_metrics or config.metrics)
    m = modes * len(metrics)
    floors = [config.floor(metric) for _ in range(modes) for metric in metrics]
    slowed = ["ttft" in metric for _ in range(modes) for metric in metrics]
    alpha = 1.0 - config.confidence
    priors = [learned_start(config, rng, nights, blocks, noise, stored, changes)
              for _ in range(m)]
    if crossover:               # looks over starts: the first, then both (halves swapped)
        starts, looks, total = 2, (1,), 2
        cut = [lambda x: x[..., :1, :], lambda x: x]
    else:
        total = blocks
        cut = [lambda x, k=k: x[..., :k] for k in [*looks, blocks]]
    schedule = [*looks, total]
    levels = sequential.nominal_levels(looks, total, alpha) if looks else [alpha]

    def judged(pairs: list[tuple[np.ndarray, np.ndarray]], level: float) -> np.ndarray:
        """(nights, m) verdict codes of the family at family level ``level``."""
        theta, se, df, design = [], [], [], []
        for (head, base), (start_var, start_dof) in zip(pairs, priors, strict=True):
            d = paired_difference(head, base, interaction_var=start_var,
                                  interaction_dof=start_dof)
            theta.append(d.theta)
            se.append(d.se)
            df.append(d.df)
            design.append(design_se(d, start_var, start_dof))
        p = np.stack([decision_alpha(t, s, f, [math.log1p(fl)], False)
                      for t, s, f, fl in zip(theta, se, df, floors, strict=True)], axis=-1)
        family_alpha = family_levels(p, level, config)
        codes = np.empty(p.shape, dtype=np.int8)
        for i in range(m):
            q = sps.t.ppf(1.0 - family_alpha[:, i] / 2.0, df[i])
            low, high = theta[i] - q * se[i], theta[i] + q * se[i]
            codes[:, i] = classify(np.expm1(low), np.expm1(high), floors[i], "lower",
                                   resolution(design[i], df[i], 1.0 - family_alpha[:, i],
                                              floors[i]))
        return codes

    def regressions(shift: float) -> tuple[np.ndarray, np.ndarray]:
        """Per night: a gated regression at its stop, and the blocks it ran to."""
        pairs = [(_pair_nights(rng, nights, starts, blocks, noise,
                               shift if slowed[i] else 0.0),
                  _pair_nights(rng, nights, starts, blocks, noise, 0.0)) for i in range(m)]
        hit = np.zeros(nights, dtype=bool)
        walk = sequential.FirstStops(nights, total)
        for k, level, seen in zip(schedule, levels, cut, strict=True):
            codes = judged([(seen(h), seen(b)) for h, b in pairs], level)
            take = walk.take(k, codes, np.ones_like(codes, bool))
            hit[take] = (codes[take] == 1).any(axis=-1)
        return hit, walk.ran

    aa_hit, aa_ran = regressions(0.0)
    aa = int(aa_hit.sum())
    worlds = {f"{s:.2f}": regressions(math.log1p(s)) for s in slowdowns}
    curve = {name: round(float(hit.mean()), 4) for name, (hit, _) in worlds.items()}
    reach = [s for s in slowdowns if curve[f"{s:.2f}"] >= 0.8]
    out: dict[str, Any] = {
        "design": "live-pair", "starts": starts, "blocks": blocks,
        "server_starts": 2 * starts, "family_size": m, "nights": nights,
        "aa_false_alarm": round(aa / nights, 5),
        "aa_false_alarm_ci": rate_interval(aa, nights),
        "power_curve": curve, "slowdown_80": reach[0] if reach else None,
        "assumed_run_cv": config.pair_cv,
        "assumed_run_cv_dof": config.run_to_run_cv_dof,
        "stored_pairs": stored, "stored_changes": changes, "crossover": crossover,
        "learned_nights": round(float(np.mean([d > config.run_to_run_cv_dof for _, d in priors])),
                                4)}
    if crossover:
        out["crossover_run"] = {"aa": round(float((aa_ran == 2).mean()), 4), **{
            name: round(float((ran == 2).mean()), 4) for name, (_, ran) in worlds.items()}}
    elif looks:
        def fraction(ran: np.ndarray) -> float:
            return round(float(np.mean(((starts - 1) * blocks + ran) / (starts * blocks))), 4)

        out["looks"] = schedule
        out["look_levels"] = [round(x, 6) for x in levels]
        out["aa_stopped_early_on_regression"] = round(float(
            (aa_hit & (aa_ran < blocks)).mean()), 5)
        out["blocks_run_fraction"] = {"aa": fraction(aa_ran), **{
            name: fraction(ran) for name, (_, ran) in worlds.items()}}
        out["stopped_at_first_look"] = {name: round(float((ran == schedule[0]).mean()), 4)
                                        for name, (_, ran) in worlds.items()}
        out["stopped_early"] = {name: round(float((ran < blocks).mean()), 4)
                                for name, (_, ran) in worlds.items()}
    return out
