"""``history health``: per runner class x model x suite, the noise profile its nights taught
(servegate.history.profile) and the sustained-shift rule (servegate.history.sustained) on each
gated aggregate, the whole picture a runner's owner needs (docs/history.md, Learned noise profile)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from servegate.core.metrics import direction
from servegate.history.profile import DEFAULT_PROFILE_NIGHTS, LearnedProfile, learn_profile
from servegate.history.records import Record
from servegate.history.sustained import Flags, NightValue, cusum, night_value
from servegate.judge.evidence import MissingEvidence, as_matrix

AGGREGATE_METRICS = ("mean_ttft_ms", "median_tpot_ms")
REFERENCE_NIGHTS = 14


@dataclass(frozen=True)
class Aggregate:
    """One gated aggregate's nights and what the rule said about them."""

    mode: str
    metric: str
    concs: tuple[int, ...]
    run_ids: tuple[str, ...]
    values: tuple[float, ...]          # per night, geometric mean (not log)
    flagged: tuple[str, ...]           # run ids of the nights the rule flagged
    spread: str = ""                   # where the rule's night-to-night spread came from


def _concs(profile: LearnedProfile, mode: str, metric: str) -> tuple[int, ...]:
    sets = [set(n.evidence.concurrencies("", mode, metric)) for n in profile.nights]
    sets = [s for s in sets if s]
    return tuple(sorted(set.intersection(*sets))) if sets else ()


def aggregate(profile: LearnedProfile, mode: str, metric: str,
              reference: int = REFERENCE_NIGHTS) -> Aggregate | None:
    """The nights' aggregate of ``mode`` and ``metric`` and the nights the rule flagged (none
    until ``reference`` + 1 nights). A night out of profile at this mode's start level (the
    runner-health signal) is left out: its value is not evidence of the code, and in the
    reference it would hide a shift."""
    concs = _concs(profile, mode, metric)
    if not concs:
        return None
    profile.start(mode, metric, concs)
    tail = " ".join([metric, *map(str, concs)])
    skip = {run for key, runs in profile.out_of_profile.items() if key.endswith(tail)
            and f" {mode} " in f" {key} " for run in runs}
    ids, nights = [], []
    for night in profile.nights:
        if night.run_id in skip:
            continue
        try:
            matrix = as_matrix(night.evidence.logs("", mode, list(concs), metric))
        except MissingEvidence:
            continue
        ids.append(night.run_id)
        nights.append(night_value(matrix))
    values = NightValue(*(np.array([float(np.asarray(getattr(n, f)).reshape(-1)[0])
                                    for n in nights]) for f in ("value", "var", "dof")))
    flagged: tuple[str, ...] = ()
    spread = ""
    if len(nights) > reference >= 3:
        worse = "higher" if direction(metric) == "lower" else "lower"
        hits, first = _alarms(values, reference, worse)
        flagged = tuple(ids[reference + i] for i in hits)
        spread = first.source()
    return Aggregate(mode, metric, concs, tuple(ids),
                     tuple(math.exp(v) for v in values.value), flagged, spread)


def _alarms(nights: NightValue, reference: int, worse: str) -> tuple[list[int], Flags]:
    """Every monitored night that starts a shift (indices after the ``reference`` nights), and the
    rule's flags on the first reference (its spread's source; each night brings its own starts'
    error). After an alarm the nights from it on are the new reference (3 up to the first's
    size) and monitoring resumes after them, else a real step would be flagged again and again
    while the old level still weighs in the reference."""
    def rule(lo: int, mid: int) -> Flags:
        return cusum(nights.value[lo:mid], nights.value[mid:], worse=worse,
                     within_var=nights.var[lo:], within_dof=nights.dof[lo:])

    first = rule(0, reference)
    flags, lo, mid = first, 0, reference
    hits: list[int] = []
    total = nights.value.size
    while mid < total:
        if int(flags.first) < 0:
            break
        night = mid + int(flags.first)
        hits.append(night - reference)
        size = max(3, min(reference, total - night))
        lo, mid = night, night + size
        if mid > total:
            break
        flags = rule(lo, mid)
    return hits, first


def health(records: Sequence[Record], *, nights: int = DEFAULT_PROFILE_NIGHTS,
           metrics: Sequence[str] = AGGREGATE_METRICS,
           reference: int = REFERENCE_NIGHTS) -> list[dict[str, Any]]:
    """One entry per identity in the store: its learned levels and its aggregates."""
    identities = sorted({r.identity for r in records})
    out = []
    for runner, model, suite in identities:
        profile = learn_profile(records, runner, model, suite, nights=nights + reference)
        if profile is None:
            continue
        modes = sorted({m for n in profile.nights for m in n.evidence.modes("")})
        entry: dict[str, Any] = {"runner": runner, "model": model, "suite": suite,
                                 "nights": len(profile.nights), "levels": [],
                                 "aggregates": [], "out_of_profile": {},
                                 "load_changes": [c.to_json() for c in profile.load_changes]}
        for metric in metrics:
            for mode in modes:
                found = aggregate(profile, mode, metric, reference)
                if found is None:
                    continue
                entry["aggregates"].append({
                    "mode": mode, "metric": metric, "concurrencies": list(found.concs),
                    "nights": len(found.values), "latest": round(found.values[-1], 6),
                    "flagged": list(found.flagged), "spread": found.spread})
                start = profile.start(mode, metric, found.concs)
                if start is not None:
                    entry["levels"].append(_level("start", mode, metric, start))
                if mode != "off" and "off" in modes:
                    inter = profile.interaction(mode, "off", metric, found.concs)
                    if inter is not None:
                        entry["levels"].append(_level("interaction", f"{mode}-off", metric,
                                                      inter))
        entry["out_of_profile"] = dict(profile.out_of_profile)
        out.append(entry)
    return out


def _level(level: str, what: str, metric: str, prior: Any) -> dict[str, Any]:
    return {"level": level, "of": what, "metric": metric,
            "log_sd": round(math.sqrt(max(prior.var, 0.0)), 6), "dof": prior.dof,
            "source": prior.source}


def render(entries: Sequence[dict[str, Any]]) -> str:
    """The text form: one block per identity."""
    lines = []
    for entry in entries:
        lines.append(f"{entry['runner']}/{entry['model']}/{entry['suite']}: "
                     f"{entry['nights']} night(s)")
        for level in entry["levels"]:
            lines.append(f"  {level['level']} {level['of']} {level['metric']}: log-sd "
                         f"{level['log_sd']:.4f} ({level['dof']:g} dof, {level['source']})")
        for change in entry.get("load_changes", []):
            lines.append(f"  load changed at {change['run_id']} ({change['time']}): "
                         f"{change['changed']}; nights before it not compared")
        for key, runs in entry["out_of_profile"].items():
            lines.append(f"  out of profile ({key}): {', '.join(runs)}")
        for agg in entry["aggregates"]:
            state = (f"sustained shift flagged at {', '.join(agg['flagged'])}"
                     if agg["flagged"] else "no sustained shift")
            lines.append(f"  {agg['mode']} {agg['metric']} (c{agg['concurrencies']}): "
                         f"{agg['nights']} nights, {state}"
                         + (f"; {agg['spread']}" if agg.get("spread") else ""))
    return "\n".join(lines) + "\n" if lines else "no nights in the store\n"
