"""Calibration of the sustained-shift rule (servegate.history.sustained) on simulated runner
histories judged as the judge estimates each night: false alarms per runner-quarter, detection
within 3 and 7 nights, and one night against ``history:N`` (docs/judge.md, Nights as evidence)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import numpy as np

from servegate.calibration.designs import BlockDesign, family
from servegate.calibration.in_server import _logs, _night_blocks, decide_nights
from servegate.calibration.worlds import Noise
from servegate.core.metrics import direction
from servegate.history.sustained import (
    ARL0,
    DESIGN_SHIFT,
    GUARD,
    NIGHT_LEVEL,
    Flags,
    NightValue,
    cusum,
    night_value,
)

REFERENCE_NIGHTS = 14
QUARTER = 90
SHIFTS = (0.03, 0.05)
ONE_NIGHT = (0.04, 0.06, 0.08, 0.10, 0.15)
# the guard's world: a night-level factor the nights' own starts cannot see (log-sd)
NIGHT_CV = 0.01


def night_values(rng: np.random.Generator, design: BlockDesign, nights: int, noise: Noise,
                 effects: dict[str, float]) -> dict[tuple[str, str], NightValue]:
    """Each night's nested estimate (log) per (mode, aggregate metric), as the judge's
    aggregate check estimates a run's side, with its squared standard error from the night's
    own starts (servegate.history.sustained.night_value, as ``history health`` reads a stored night)."""
    blocks = _night_blocks(rng, design, nights, noise, effects)
    config = design.config
    out = {}
    for mode in design.modes:
        for metric in config.aggregate_metrics:
            out[(mode, metric)] = night_value(_logs(blocks, mode, design.concurrencies, metric))
    return out


def _shifted(value: NightValue, size: int, nights: int, reference: int,
             shift: float) -> NightValue:
    """Histories (size, nights) of one series, ``shift`` from the first monitored night on."""
    shaped = [np.asarray(a).reshape(size, nights).copy() for a in
              (value.value, value.var, value.dof)]
    if shift:
        shaped[0][:, reference:] += math.log1p(shift)
    return NightValue(*shaped)


def _flags(value: NightValue, reference: int, worse: str, within: bool, arl0: float,
           stated_level: float | None, guard: int = GUARD) -> Flags:
    return cusum(value.value[:, :reference], value.value[:, reference:], worse=worse,
                 within_var=value.var if within else None,
                 within_dof=value.dof if within else None, arl0=arl0,
                 stated_level=stated_level, guard=guard)


def sustained_world(design: BlockDesign, noise: Noise, *, histories: int, seed: int,
                    reference: int = REFERENCE_NIGHTS, monitored: int = QUARTER,
                    shifts: tuple[float, ...] = SHIFTS, batch: int = 50,
                    arl0: float = ARL0, within: bool = True,
                    stated_level: float | None = NIGHT_LEVEL, guard: int = GUARD
                    ) -> dict[str, Any]:
    """False alarms per runner-quarter and detection of sustained TTFT slowdowns of one mode
    (the first in the design's modes, the PR's effect on ``on`` in every night as in the
    in-server calibration) in one world of noise. ``within``: the rule uses each night's
    starts (servegate.history.sustained.night_spread); False: the nights' spread alone (the rule
    before issue 33's within-night spread, for comparison)."""
    seeds = [seed, int(noise.run_cv * 1e6), int(noise.block_cv * 1e6),
             int(noise.interaction_cv * 1e6), reference, monitored]
    if noise.night_cv > 0:
        seeds.append(int(noise.night_cv * 1e6))
    rng = np.random.default_rng(seeds)
    base = {"on:ttft": math.log(1 - 0.095)} if design.gated else {}
    target = next(m for m in design.config.aggregate_metrics if "ttft" in m)
    mode = design.modes[0]
    nights = reference + monitored
    alarms: list[np.ndarray] = []
    alarm_nights: list[np.ndarray] = []
    widened: list[np.ndarray] = []
    first: dict[float, list[np.ndarray]] = {s: [] for s in shifts}
    done = 0
    while done < histories:
        size = min(batch, histories - done)
        quiet = night_values(rng, design, size * nights, noise, base)
        per_history = np.zeros(size, int)
        any_series = np.zeros((size, monitored), bool)
        for (_, metric), value in quiet.items():
            flags = _flags(_shifted(value, size, nights, reference, 0.0), reference,
                           "higher" if direction(metric) == "lower" else "lower", within,
                           arl0, stated_level, guard)
            per_history += flags.alarms
            any_series |= flags.hits
            widened.append(np.asarray(flags.widened))
        alarms.append(per_history)
        alarm_nights.append(any_series.sum(axis=-1))
        for shift in shifts:
            value = night_values(rng, design, size * nights, noise, base)[(mode, target)]
            flags = _flags(_shifted(value, size, nights, reference, shift), reference,
                           "higher", within, arl0, stated_level, guard)
            first[shift].append(flags.first)
        done += size
    count = np.concatenate(alarms)
    out: dict[str, Any] = {
        "histories": histories, "reference_nights": reference, "monitored_nights": monitored,
        "series": len(design.modes) * len(design.config.aggregate_metrics),
        "design_shift": DESIGN_SHIFT, "arl0": arl0, "night_cv": noise.night_cv,
        "spread": ("each night's starts pooled with the nights' spread, the nights' alone "
                   f"when an F test at {stated_level:g} refutes the starts" if within
                   and stated_level is not None else "each night's starts pooled with the "
                   "nights' spread" if within else "the nights' spread alone"),
        "false_alarms_per_quarter": round(float(count.mean()) * QUARTER / monitored, 4),
        "quarters_with_a_false_alarm": round(float((count > 0).mean()), 4),
        # nights on which any of the runner's series alarmed: one bad night counted once
        "false_alarm_nights_per_quarter": round(
            float(np.concatenate(alarm_nights).mean()) * QUARTER / monitored, 4),
        "reference_widened": round(float(np.concatenate(widened).mean()), 4),
        "shifted": f"{mode} {target}"}
    for shift in shifts:
        hit = np.concatenate(first[shift])
        delay = np.where(hit >= 0, hit + 1, np.inf)
        out[f"{shift:g}"] = {
            "flagged_within_3_nights": round(float((delay <= 3).mean()), 4),
            "flagged_within_7_nights": round(float((delay <= 7).mean()), 4),
            "median_delay_nights": None if not np.isfinite(np.median(delay))
            else float(np.median(delay))}
    return out


def sustained_calibration(design: BlockDesign, noise: Noise, *, histories: int, seed: int,
                          reference: int = REFERENCE_NIGHTS, monitored: int = QUARTER,
                          shifts: tuple[float, ...] = SHIFTS, batch: int = 50,
                          arl0: float = ARL0, night_cv: float = NIGHT_CV) -> dict[str, Any]:
    """The rule in ``noise`` (its main row) and, under ``night_level``, the same world with a
    night-level factor of log-sd ``night_cv`` that the nights' starts cannot see (the guard's
    world: the F test must widen the spread there, or the false alarms pile up); 0: none."""
    out = sustained_world(design, noise, histories=histories, seed=seed, reference=reference,
                          monitored=monitored, shifts=shifts, batch=batch, arl0=arl0)
    if night_cv > 0 and noise.night_cv == 0:
        out["night_level"] = sustained_world(
            design, replace(noise, night_cv=night_cv), histories=histories, seed=seed,
            reference=reference, monitored=monitored, shifts=shifts, batch=batch, arl0=arl0)
    return out


def one_night_against_history(design: BlockDesign, noise: Noise, *, nights: int, seed: int,
                              history: int = REFERENCE_NIGHTS,
                              slowdowns: tuple[float, ...] = ONE_NIGHT,
                              batch: int = 100) -> dict[str, Any]:
    """One night judged against ``compare --baseline history:N``: the last ``history`` nights'
    starts (history/rolling.py), their spread replacing ``run_to_run_cv`` (dof 0, as compare
    does), the gated family decided as the judge does. Reported: A/A false-alarm rate, share of
    healthy nights reading PASS, the slowed aggregate's median resolution and, per TTFT slowdown
    of one mode, the share of nights its gated aggregate regresses (``one_night_mde``: the
    smallest slowdown caught on 80 %)."""
    config = replace(design.config, run_to_run_cv_dof=0.0)
    judged = replace(design, config=config)
    checks = family(judged)
    mode = design.modes[0]
    target = [i for i, c in enumerate(checks) if c.kind == "versus" and c.mode == mode
              and "ttft" in c.metric]
    rng = np.random.default_rng([seed, int(noise.run_cv * 1e6), int(noise.block_cv * 1e6),
                                 int(noise.interaction_cv * 1e6), history, 7])
    base = {"on:ttft": math.log(1 - 0.095)} if design.gated else {}
    aa, passed, stated = 0, 0, []
    caught = {s: 0 for s in slowdowns}
    done = 0
    while done < nights:
        size = min(batch, nights - done)
        past = _night_blocks(rng, design, size * history, noise, base)
        reference = {key: value.reshape(size, history * design.starts, design.blocks)
                     for key, value in past.items()}
        current = _night_blocks(rng, design, size, noise, base)
        decided = decide_nights(judged, checks, current, reference, rng, size)
        aa += int(((decided.codes == 1) & decided.gating).any(axis=1).sum())
        passed += int(((decided.codes == 0) | ~decided.gating).all(axis=1).sum())
        assert decided.resolution is not None
        stated.append(decided.resolution[:, target[0]])
        for slowdown in slowdowns:
            slowed = {key: value + (math.log1p(slowdown) if key[0] == mode
                                    and key[2] == "ttft" else 0.0)
                      for key, value in current.items()}
            decided = decide_nights(judged, checks, slowed, reference, rng, size)
            hit = ((decided.codes == 1) & decided.gating)[:, target].any(axis=1)
            caught[slowdown] += int(hit.sum())
        done += size
    curve = {f"{s:.2f}": round(caught[s] / nights, 4) for s in slowdowns}
    reach = [s for s in slowdowns if caught[s] / nights >= 0.8]
    return {"history_nights": history, "nights": nights, "slowed": f"{mode} TTFT",
            "aa_false_alarm": round(aa / nights, 5), "power_curve": curve,
            "aa_pass_share": round(passed / nights, 4),
            "resolution": round(float(np.median(np.concatenate(stated))), 4),
            "one_night_mde": reach[0] if reach else None}
