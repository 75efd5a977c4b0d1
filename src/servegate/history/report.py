"""``history report``: change points per series, their sglang commit range, and the noise budget
(the JSON form is a contract: docs/history.md, Change points)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from servegate.config.judge import gated_floors
from servegate.core import stack
from servegate.history.changepoints import Detection, detect
from servegate.history.noise import Budget, budget, measure_levels
from servegate.history.records import ACCURACY_METRIC, Record
from servegate.history.store import Problem, SeriesKey, group_series


@dataclass(frozen=True)
class SeriesReport:
    key: SeriesKey
    nights: tuple[Record, ...]
    detection: Detection
    budget: Budget | None = None
    budget_note: str = ""

    @property
    def label(self) -> str:
        runner, model, suite, mode, conc, metric = self.key
        point = mode if conc is None else f"{mode}@c{conc}"
        return f"{runner}/{model}/{suite} {point} {metric}"


def effect(metric: str, ratio: float) -> str:
    """regression / improvement by the metric's direction (``change`` when it has none)."""
    from servegate.core.metrics import direction

    try:
        better = direction(metric)
    except ValueError:
        return "change"
    worse = ratio > 1 if better == "lower" else ratio < 1
    return "regression" if worse else "improvement"


def stable_nights(report: Detection, nights: Sequence[Record]) -> list[Record]:
    """Nights at the current level: after the last confirmed change point, before a suspected
    one, transients left out (the run-to-run spread of the present, not of old steps)."""
    start, end = 0, len(nights)
    for cp in report.change_points:
        if cp.status == "confirmed":
            start = cp.index
        else:
            end = min(end, cp.index)
    return [night for i, night in enumerate(nights)
            if start <= i < end and i not in set(report.transients)]


def _minutes_per_block(durations: Sequence[Record] | None) -> float | None:
    """The latest night's mean client ``duration`` of a block, in minutes."""
    if not durations:
        return None
    latest = durations[-1].values
    return sum(latest) / len(latest) / 60.0


def analyse(records: Sequence[Record], *, alpha: float = 0.05,
            metrics: Sequence[str] | None = None) -> list[SeriesReport]:
    """Detect change points in every series and, for gated metrics, the noise budget."""
    grouped = group_series(records)
    floors_by_suite: dict[str, tuple[dict[str, float], str]] = {}
    reports = []
    for key, nights in grouped.items():
        runner, model, suite, mode, conc, metric = key
        if metrics and metric not in metrics:
            continue
        detection = detect([night.values for night in nights])
        if suite not in floors_by_suite:
            floors_by_suite[suite] = gated_floors(suite)
        floors, why = floors_by_suite[suite]
        found: Budget | None = None
        note = ""
        if metric == ACCURACY_METRIC:
            note = "accuracy: judged on questions (binomial), not on repeats"
        elif metric not in floors:
            note = why or "not a gated metric of the suite"
        elif not detection.analysed:
            note = detection.reason
        else:
            levels = measure_levels([night.by_start()
                                     for night in stable_nights(detection, nights)])
            if levels is None:
                note = "fewer than 2 server starts at the current level"
            else:
                today = nights[-1].by_start()
                durations = grouped.get((runner, model, suite, mode, conc, "duration"))
                found = budget(levels, floors[metric], len(today),
                               min(len(v) for v in today.values()),
                               _minutes_per_block(durations), alpha)
        reports.append(SeriesReport(key, tuple(nights), detection, found, note))
    return reports


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


def changed_components(before: Record, after: Record) -> list[dict[str, str]]:
    """Every component recorded on both nights with another value, as a range."""
    return [{"component": key, "label": stack.label(key), "before": old, "after": new}
            for key, old, new in stack.changed(before.components(), after.components())]


def change_point_json(report: SeriesReport) -> list[dict[str, Any]]:
    nights = report.nights
    out = []
    for cp in report.detection.change_points:
        previous = max((i for i in range(cp.index) if i not in report.detection.transients),
                       default=cp.index - 1)
        out.append({
            "index": cp.index, "run_id": nights[cp.index].run_id,
            "time": nights[cp.index].time,
            "before": _round(cp.before), "after": _round(cp.after), "ratio": _round(cp.ratio),
            "sglang_commits": [nights[previous].sglang_commit, nights[cp.index].sglang_commit],
            "sglang_versions": [nights[previous].sglang_version,
                                nights[cp.index].sglang_version],
            "status": cp.status, "nights_after": cp.nights_after,
            "effect": effect(report.key[5], cp.ratio),
            "components": changed_components(nights[previous], nights[cp.index]),
        })
    return out


def _budget_json(found: Budget | None, note: str) -> dict[str, Any] | None:
    if found is None:
        return {"note": note} if note else None
    levels = found.levels
    return {
        "sigma": _round(found.sigma), "dof": _round(found.dof, 2),
        "nights": levels.nights, "floor": found.floor,
        "repeats_today": found.repeats_today, "repeats_needed": found.repeats_needed,
        "blocks_today": found.blocks, "blocks_needed": found.blocks_needed,
        "reachable_floor": _round(found.reachable_floor),
        "minutes_per_repeat": _round(found.minutes_per_repeat, 3),
        "minutes_needed": _round(found.minutes_needed, 3),
        "levels": {
            "start": {"sigma": _round(math.sqrt(levels.start_var)), "dof": levels.start_dof,
                      "starts": levels.starts},
            "block": {"sigma": _round(math.sqrt(levels.block_var)),
                      "dof": _round(levels.block_dof, 2), "blocks_per_start": levels.blocks},
        },
    }


def to_json(reports: Sequence[SeriesReport], problems: Sequence[Problem],
            alpha: float = 0.05) -> dict[str, Any]:
    """The ``--json`` document (issue 12 contract, plus status/transients/noise/problems)."""
    series = []
    for report in reports:
        runner, model, suite, mode, conc, metric = report.key
        detection = report.detection
        series.append({
            "runner": runner, "model": model, "suite": suite, "mode": mode,
            "concurrency": conc, "metric": metric, "n": detection.n,
            "change_points": change_point_json(report),
            "transients": [{"index": i, "run_id": report.nights[i].run_id}
                           for i in detection.transients],
            "analysed": detection.analysed,
            **({"reason": detection.reason} if detection.reason else {}),
            "sigma": _round(detection.sigma),
            "noise": _budget_json(report.budget, report.budget_note),
        })
    return {"series": series, "problems": [str(p) for p in problems],
            "noise_design": {"power": 0.8, "alpha": alpha, "two_sided": True,
                             "arms": "n server starts of b blocks vs as many, log scale; "
                                     "start and block levels measured apart"}}


def other_changes(components: Sequence[Mapping[str, str]]) -> tuple[str, ...]:
    """``aiter 0.1.9 -> 0.1.10``, ...: what changed besides sglang (its range is shown apart)."""
    return tuple(f"{c['label']} {c['before']} -> {c['after']}" for c in components
                 if c["component"] not in ("sglang", "sglang_commit"))


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f} %"


def render_text(reports: Sequence[SeriesReport], problems: Sequence[Problem],
                alpha: float = 0.05) -> str:
    """The human report: change points first, then the noise budget of gated metrics."""
    lines = []
    runs = {night.run_id for report in reports for night in report.nights}
    with_cp = [r for r in reports if r.detection.change_points]
    lines.append(f"history: {len(reports)} series, {len(runs)} runs; change points in "
                 f"{len(with_cp)} series")
    for report in with_cp:
        for cp in change_point_json(report):
            before, after = cp["sglang_commits"]
            others = ", ".join(other_changes(cp["components"]))
            lines.append(
                f"  {report.label}: night {cp['index']} ({cp['run_id']}) "
                f"{cp['before']:.4g} -> {cp['after']:.4g} (x{cp['ratio']:.3f}, {cp['effect']}) "
                f"{cp['status']} after {cp['nights_after']} night(s); sglang {before} -> {after}"
                + (f"; {others}" if others else ""))
    blips = [r for r in reports if r.detection.transients]
    for report in blips:
        ids = ", ".join(report.nights[i].run_id for i in report.detection.transients)
        lines.append(f"  {report.label}: one-off night(s) set aside: {ids}")
    budgets = [r for r in reports if r.budget is not None]
    if budgets:
        lines.append("")
        lines.append(f"noise budget (80 % power, two-sided alpha {alpha}, n server starts of "
                     "b blocks vs as many; levels of the nights at the current level):")
        lines.append(f"  {'series':<58} {'start sd':>8} {'df':>4} {'block sd':>8} {'df':>5} "
                     f"{'floor':>7} {'today':>6} {'reach':>8} {'starts':>6} {'minutes':>8}")
        for report in budgets:
            found = report.budget
            assert found is not None
            levels = found.levels
            needed = "-" if found.repeats_needed is None else str(found.repeats_needed)
            minutes = found.minutes_needed
            block = (f"{_pct(math.sqrt(levels.block_var)):>8} {levels.block_dof:>5.0f}"
                     if levels.block_dof > 0 else f"{'-':>8} {'-':>5}")
            lines.append(
                f"  {report.label:<58} {_pct(math.sqrt(levels.start_var)):>8} "
                f"{levels.start_dof:>4} {block} {_pct(found.floor):>7} "
                f"{f'{found.repeats_today}x{found.blocks}':>6} "
                f"{_pct(found.reachable_floor):>8} {needed:>6} "
                f"{'-' if minutes is None else f'{minutes:.1f}':>8}")
    if problems:
        lines.append("")
        lines.append(f"{len(problems)} unreadable store line(s):")
        lines.extend(f"  {problem}" for problem in problems)
    return "\n".join(lines) + "\n"
