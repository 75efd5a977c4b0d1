"""Calibration of the in-server design: simulated nights of starts x blocks through the real
judge code (block_checks' primary family, the nested estimators, family's Holm levels and the
judge's boundary rules), so false-alarm rate and power are measured, not assumed. The simulated
world (start factor, start x mode interaction, bursty blocks measured on this VM, the GSM8K
outcomes) and why the no-op's Fisher test is not simulated: docs/judge.md, Calibration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats as sps

from servegate.accuracy.paired import agresti_min
from servegate.calibration.designs import (
    CLAIM_SIZES,
    SLOWDOWNS,
    BlockDesign,
    SimCheck,
    design_row,
    family,
)
from servegate.calibration.worlds import ACCURACY, BURST_P, BURST_SDS, FLAKY, Noise, bursty_blocks
from servegate.config.judge import JudgeConfig
from servegate.core.metrics import direction
from servegate.judge import sequential
from servegate.judge.family import decision_alpha, holm_levels_array
from servegate.judge.nested import design_se, independent_difference, paired_difference
from servegate.judge.stats import classify, classify_equivalence, resolution, tost_power


def rate_interval(count: int, nights: int) -> list[float]:
    """A rate's exact 95 % (Clopper-Pearson) interval over ``nights``, as every row reports it."""
    low, high = sps.binomtest(count, nights).proportion_ci()
    return [round(float(low), 5), round(float(high), 5)]


def family_levels(p: np.ndarray, alpha: float, config: JudgeConfig) -> np.ndarray:
    """Each check's level as the judge sets it (``evaluate._decide``): Holm's step-down for a
    suite that names its ``[judge] family``, else Bonferroni over every counted check."""
    if config.family and config.family_method == "holm":
        return holm_levels_array(p, alpha)
    return np.full(p.shape, alpha / p.shape[-1])


def _night_blocks(rng: np.random.Generator, design: BlockDesign, nights: int, noise: Noise,
                  effects: dict[str, float]) -> dict[tuple[str, int, str], np.ndarray]:
    """Log block values (nights, starts, blocks) per (mode, concurrency, metric)."""
    shape = (nights, design.starts, 1)
    start = rng.normal(0.0, noise.run_cv, shape)
    if noise.night_cv > 0:          # drawn only then: the other worlds' draws stay as they were
        start = start + rng.normal(0.0, noise.night_cv, (nights, 1, 1))
    halves = design.start_halves(design.starts)
    if halves and noise.half_cv > 0:    # each half's own level through the night
        start = start + rng.normal(0.0, noise.half_cv, (nights, 2, 1))[:, halves]
    out = {}
    metrics = ("ttft", "tpot")
    for mode in design.modes:
        interaction = rng.normal(0.0, noise.per_mode_interaction, shape)
        for conc in design.concurrencies:
            for metric in metrics:
                block = bursty_blocks(rng, (nights, design.starts, design.blocks),
                                      noise.block_cv, noise.heavy)
                effect = effects.get(f"{mode}:{metric}", 0.0)
                out[(mode, conc, metric)] = start + interaction + block + effect
    return out


def _metric_kind(metric: str) -> str:
    return "tpot" if "tpot" in metric or "itl" in metric else "ttft"


def _logs(blocks: dict[tuple[str, int, str], np.ndarray], mode: str, concs: tuple[int, ...],
          metric: str) -> np.ndarray:
    kind = _metric_kind(metric)
    return np.mean([blocks[(mode, c, kind)] for c in concs], axis=0)


@dataclass
class Decided:
    codes: np.ndarray                       # (nights, m) verdict codes (stats.CODES)
    gating: np.ndarray                      # (nights, m) bool
    p_values: np.ndarray                    # (nights, m) decision p-values (Holm's input)
    low: np.ndarray | None = None           # (nights, m) interval bounds at each check's
    high: np.ndarray | None = None          # level, log scale (NaN: no interval)
    widened: np.ndarray | None = None       # (nights, m) the run refuted the check's prior
    resolution: np.ndarray | None = None    # (nights, m) a versus check's (else NaN)


# a learned prior per check name: (variance, dof) per night (servegate.calibration.history)
Learned = dict[str, tuple[np.ndarray, np.ndarray]]


def check_prior(check: SimCheck, config: JudgeConfig, learned: Learned | None
                ) -> tuple[float | np.ndarray, float | np.ndarray]:
    """The prior a check is judged with, as the judge picks it (judge.priors.choose, and
    block_checks' rule that a learned start level only widens): the suite's figure, or per
    night the learned one where it is worth more degrees of freedom."""
    if check.kind == "versus":
        var, dof = config.run_to_run_cv ** 2, config.run_to_run_cv_dof
    else:
        var, dof = config.interaction_cv ** 2, config.interaction_cv_dof
    if not learned or check.name not in learned or dof <= 0:
        return var, dof
    l_var, l_dof = learned[check.name]
    use = l_dof > dof
    if check.kind == "versus":
        use &= l_var >= var
    return np.where(use, l_var, var), np.where(use, l_dof, dof)


@dataclass
class Estimates:
    theta: list[np.ndarray] = field(default_factory=list)
    se: list[np.ndarray] = field(default_factory=list)
    df: list[np.ndarray] = field(default_factory=list)


def _accuracy(rng: np.random.Generator, nights: int, questions: int
              ) -> tuple[np.ndarray, np.ndarray]:
    shared = rng.random((nights, questions)) < ACCURACY
    flaky = rng.random((nights, questions)) < FLAKY
    base = np.where(flaky, rng.random((nights, questions)) < 0.5, shared)
    cur = np.where(flaky, rng.random((nights, questions)) < 0.5, shared)
    a_only = (cur & ~base).sum(axis=1)
    b_only = (base & ~cur).sum(axis=1)
    return agresti_min(a_only, b_only, questions)


def decide_nights(design: BlockDesign, checks: list[SimCheck], current: dict, reference: dict,
                  rng: np.random.Generator, nights: int, *, alpha: float | None = None,
                  accuracy: tuple[np.ndarray, np.ndarray] | None = None,
                  learned: Learned | None = None) -> Decided:
    """Every primary check on every night, Holm over the family, verdict codes at each level
    (``alpha``: a sequential look's family level; ``accuracy``: the night's GSM8K, drawn once
    for all its looks; ``learned``: per check, the priors a history taught, else the suite's)."""
    config = design.config
    alpha = 1.0 - config.confidence if alpha is None else alpha
    est = Estimates()
    widened = np.zeros((nights, len(checks)), bool)
    bounds: list[list[float]] = []
    design_ses: dict[int, np.ndarray] = {}      # a versus check's design se (its resolution)
    for check in checks:
        if check.kind == "claim_accuracy":
            diff, se = accuracy if accuracy is not None else _accuracy(rng, nights,
                                                                       design.questions)
            est.theta.append(diff)
            est.se.append(se)
            est.df.append(np.full(nights, np.inf))
            bounds.append([-check.floor])
            continue
        if check.kind == "noop_prefill":
            est.theta.append(np.full(nights, np.nan))
            est.se.append(np.full(nights, np.nan))
            est.df.append(np.full(nights, np.nan))
            bounds.append([0.0])
            continue
        prior_var, prior_dof = check_prior(check, config, learned)
        if check.kind == "versus":
            assert check.mode is not None
            cur = _logs(current, check.mode, check.concs, check.metric)
            ref = _logs(reference, check.mode, check.concs, check.metric)
            d = independent_difference(cur, ref, start_var=prior_var, start_dof=prior_dof,
                                       halves=(design.start_halves(cur.shape[-2]),
                                               design.start_halves(ref.shape[-2])))
            worse_high = direction(check.metric) == "lower"
            bounds.append([math.log1p(check.floor) if worse_high
                           else math.log1p(-check.floor)])
            design_ses[len(bounds) - 1] = design_se(d, prior_var, prior_dof)
        else:
            d = paired_difference(_logs(current, "on", check.concs, check.metric),
                                  _logs(current, "off", check.concs, check.metric),
                                  interaction_var=prior_var, interaction_dof=prior_dof)
            bounds.append([math.log(1 - check.floor)] if check.kind == "claim_ttft"
                          else [math.log(1 - check.floor), math.log(1 + check.floor)])
        est.theta.append(d.theta)
        est.se.append(d.se)
        est.df.append(d.df)
        if d.parts[0].widened is not None:
            widened[:, len(est.theta) - 1] = d.parts[0].widened
    p = np.stack([decision_alpha(t, s, f, b, c.one_sided) for t, s, f, b, c in
                  zip(est.theta, est.se, est.df, bounds, checks, strict=True)], axis=-1)
    levels = family_levels(p, alpha, config)
    codes = np.full(p.shape, 3, dtype=np.int8)
    gating = np.ones(p.shape, dtype=bool)
    lows, highs = np.full(p.shape, np.nan), np.full(p.shape, np.nan)
    resolutions = np.full(p.shape, np.nan)
    for i, check in enumerate(checks):
        level = levels[:, i]
        tails = 2.0 * level if check.one_sided else level     # two-sided interval's alpha
        q = sps.t.ppf(1.0 - tails / 2.0, est.df[i])
        low, high = est.theta[i] - q * est.se[i], est.theta[i] + q * est.se[i]
        lows[:, i], highs[:, i] = low, high
        if check.kind == "versus":
            resolutions[:, i] = resolution(design_ses[i], est.df[i], 1.0 - level, check.floor)
            codes[:, i] = classify(np.expm1(low), np.expm1(high), check.floor,
                                   direction(check.metric), resolutions[:, i])
        elif check.kind == "claim_ttft":
            target = math.log(1 - check.floor)
            codes[:, i] = np.where(high <= target, 0, np.where(low > target, 1, 3))
        elif check.kind == "noop_tost":
            codes[:, i] = classify_equivalence(np.expm1(low), np.expm1(high), check.floor)
            power = tost_power(est.se[i], est.df[i], 1.0 - tails, check.floor)
            gating[:, i] = np.nan_to_num(power) >= config.noop_min_power
        elif check.kind == "claim_accuracy":
            lowest = resolution(est.se[i], est.df[i], 1.0 - tails, check.floor, "difference")
            codes[:, i] = np.where(high < -check.floor, 1, np.where(low >= -lowest, 0, 3))
        else:                                   # noop_prefill: never rejects (see docstring)
            codes[:, i] = 0
    return Decided(codes, gating, p, lows, highs, widened, resolutions)


def decide_sequential(design: BlockDesign, checks: list[SimCheck], current: dict,
                      reference: dict, rng: np.random.Generator, nights: int,
                      learned: Learned | None = None) -> tuple[Decided, np.ndarray]:
    """Each night judged at the design's looks as bench takes them (the first ``k`` blocks of
    every start, at the look's spending level), kept at the first look that stops it
    (:func:`servegate.judge.sequential.stops`), else at the final look. Returns the decisions
    at the stop and the blocks per start each night ran to."""
    if not design.looks:
        return (decide_nights(design, checks, current, reference, rng, nights,
                              learned=learned), np.full(nights, design.blocks))
    levels = design.levels()
    accuracy = _accuracy(rng, nights, design.questions)
    schedule = [*design.looks, design.blocks]
    walk = sequential.FirstStops(nights, design.blocks)
    out: Decided | None = None
    for blocks, level in zip(schedule, levels, strict=True):
        seen = {key: value[..., :blocks] for key, value in current.items()}
        decided = decide_nights(design, checks, seen, reference, rng, nights, alpha=level,
                                accuracy=accuracy, learned=learned)
        take = walk.take(blocks, decided.codes, decided.gating)
        if out is None:
            out = decided
        else:
            out.codes[take], out.gating[take] = decided.codes[take], decided.gating[take]
            out.p_values[take] = decided.p_values[take]
            for name in ("low", "high", "widened", "resolution"):
                getattr(out, name)[take] = getattr(decided, name)[take]
    assert out is not None
    return out, walk.ran


def calibrate_design(design: BlockDesign, noise: Noise, *, nights: int, seed: int,
                     batch: int = 500) -> dict[str, Any]:
    """A/A false alarms, no-op false failures, claim power and false confirmation, and the
    power against TTFT slowdowns, for one in-server design at one true noise level."""
    checks = family(design)
    names = [c.kind for c in checks]
    claim = names.index("claim_ttft") if "claim_ttft" in names else None
    rng = np.random.default_rng([seed, int(noise.run_cv * 1e6), int(noise.block_cv * 1e6),
                                 len(design.suite), int(design.gated)])
    pr_effect = math.log(1 - CLAIM_SIZES[-1]) if design.gated else 0.0
    tally: dict[str, int] = {"aa": 0, "noop_fail": 0, "false_confirmation": 0,
                             "noop_gating": 0, "aa_pass": 0, "noop_pass": 0}
    resolutions: list[np.ndarray] = []
    claim_pass = {size: 0 for size in CLAIM_SIZES}
    caught = {s: 0 for s in SLOWDOWNS}
    ran: dict[str, list[np.ndarray]] = {}       # blocks per start each world's nights ran to
    done = 0
    while done < nights:
        size = min(batch, nights - done)

        def night(effects: dict[str, float], size: int = size) -> dict:
            return _night_blocks(rng, design, size, noise, effects)

        base_effects = {"on:ttft": pr_effect}
        reference = night(base_effects)
        current = night(base_effects)
        aa, aa_ran = decide_sequential(design, checks, current, reference, rng, size)
        ran.setdefault("aa", []).append(aa_ran)
        alarm = ((aa.codes == 1) & aa.gating).any(axis=1)
        tally["aa"] += int(alarm.sum())
        tally["aa_pass"] += int(((aa.codes == 0) | ~aa.gating).all(axis=1).sum())
        assert aa.resolution is not None
        resolutions.append(aa.resolution)
        noop = np.array([c.kind in ("noop_tost", "noop_prefill") for c in checks])
        tally["noop_fail"] += int((((aa.codes == 1) & aa.gating)[:, noop]).any(axis=1).sum())
        tost = np.array([c.kind == "noop_tost" for c in checks])
        tally["noop_gating"] += int(aa.gating[:, tost].any(axis=1).sum()) if tost.any() else 0
        # the TOST's power: every no-op TOST gated and passed (on is off here)
        tally["noop_pass"] += int(((aa.codes == 0) & aa.gating)[:, tost].all(axis=1).sum())
        if claim is not None:
            for claim_size in CLAIM_SIZES:
                cur = night({"on:ttft": math.log(1 - claim_size)})
                decided, claim_ran = decide_sequential(design, checks, cur, reference, rng,
                                                       size)
                ran.setdefault(f"claim {claim_size:g}", []).append(claim_ran)
                claim_pass[claim_size] += int((decided.codes[:, claim] == 0).sum())
            null, _ = decide_sequential(design, checks, night({}), reference, rng, size)
            tally["false_confirmation"] += int((null.codes[:, claim] == 0).sum())
        for slowdown in SLOWDOWNS:
            shift = math.log1p(slowdown)
            slowed = {key: value + shift if key[2] == "ttft" else value
                      for key, value in current.items()}
            decided, slowed_ran = decide_sequential(design, checks, slowed, reference, rng,
                                                    size)
            ran.setdefault(f"slowdown {slowdown:.2f}", []).append(slowed_ran)
            versus = np.array([c.kind == "versus" for c in checks])
            caught[slowdown] += int(((decided.codes == 1) & decided.gating)[:, versus]
                                    .any(axis=1).sum())
        done += size

    def ci(k: int) -> list[float]:
        return rate_interval(k, nights)

    curve = {f"{s:.2f}": round(caught[s] / nights, 4) for s in SLOWDOWNS}
    reach = [s for s in SLOWDOWNS if caught[s] / nights >= 0.8]
    parts: dict[str, Any] = {
        "repeats": design.starts * design.blocks, "halves": design.halves,
        "half_cv": noise.half_cv,
        "family": [c.name for c in checks], "family_method": design.config.family_method,
        "noop_false_failure": round(tally["noop_fail"] / nights, 5),
        "noop_false_failure_ci": ci(tally["noop_fail"]),
        "noop_gating_nights": round(tally["noop_gating"] / nights, 4),
        "noop_tost_power": round(tally["noop_pass"] / nights, 4) if tost.any() else None,
        # a healthy night's overall verdict PASS; the median resolution its aggregates state
        "aa_pass_share": round(tally["aa_pass"] / nights, 4),
        "one_night_resolution": round(float(np.nanmedian(np.concatenate(resolutions))), 4),
        "burst": {"probability": BURST_P, "size_in_block_cv": list(BURST_SDS)},
        "assumed_run_cv": design.config.run_to_run_cv,
        "assumed_run_cv_dof": design.config.run_to_run_cv_dof,
        "assumed_interaction_cv": design.config.interaction_cv, "seed": seed,
    }
    if design.looks:
        # the blocks a night ran: every earlier start in full, the last one to its stop
        parts["looks"] = [*design.looks, design.blocks]
        parts["look_levels"] = [round(x, 6) for x in design.levels()]
        parts["blocks_run_fraction"] = {
            world: round(float(np.mean(((design.starts - 1) * design.blocks
                                        + np.concatenate(arrays))
                                       / (design.starts * design.blocks))), 4)
            for world, arrays in ran.items()}
        parts["stopped_early"] = {
            world: round(float(np.mean(np.concatenate(arrays) < design.blocks)), 4)
            for world, arrays in ran.items()}
    if claim is not None:
        parts["claim_power"] = {f"{s:g}": round(claim_pass[s] / nights, 4) for s in CLAIM_SIZES}
        parts["claim_false_confirmation"] = round(tally["false_confirmation"] / nights, 5)
        parts["claim_false_confirmation_ci"] = ci(tally["false_confirmation"])
    return design_row(design.suite, design.runner, "in-server", starts=design.starts,
                      blocks=design.blocks, server_starts=design.starts, noise=noise,
                      nights=nights, family_size=len(checks),
                      aa=(round(tally["aa"] / nights, 5), ci(tally["aa"])), power_curve=curve,
                      slowdown_80=reach[0] if reach else None, **parts)
