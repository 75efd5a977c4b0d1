"""Rolling baseline: the last N accepted nights at the current level, pooled per series, walking
back to the latest *confirmed* change point over nights of the judged run's load and hardware
(why, and the rule: docs/history.md, Rolling baseline)."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from servegate.core.results import MODES, Run
from servegate.history.changepoints import detect
from servegate.history.load import comparable, load_id
from servegate.history.records import ACCURACY_METRIC, Record
from servegate.history.store import HistoryError, Problem, group_series, read_store
from servegate.judge.baselines import BASELINE_SCHEMA_VERSION, point_sort_key

DEFAULT_NIGHTS = 5


@dataclass(frozen=True)
class PooledSeries:
    """One (mode, concurrency, metric) over the window, oldest night first."""

    mode: str
    concurrency: int | None
    metric: str
    run_ids: tuple[str, ...]
    values: tuple[float, ...]           # every block of every night in the window
    starts: tuple[int, ...]             # each value's server start, numbered across the window
    night_means: tuple[float, ...]
    cv: float | None                    # log-sd of the night means (ddof 1); None with 1 night
    cv_dof: int                         # nights - 1
    stopped_at: str | None              # run id of the confirmed change point that bounded it
    n: tuple[int, ...] = ()             # GSM8K questions per night (accuracy series only)

    @property
    def mean(self) -> float:
        return float(np.mean(self.values))


@dataclass(frozen=True)
class RollingBaseline:
    runner_class: str
    model: str
    suite: str
    nights: int                         # N asked for
    series: tuple[PooledSeries, ...]
    problems: tuple[Problem, ...] = field(default_factory=tuple)
    # series with fewer than ``nights`` nights on the judged run's load: "on@c64: 2 night(s)"
    short: tuple[str, ...] = ()
    hardware: str | None = None         # the pooled nights' (None: one is unknown)

    @property
    def run_ids(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for series in self.series:
            seen.update(dict.fromkeys(series.run_ids))
        return tuple(seen)


def night_cv(night_means: Sequence[float]) -> float | None:
    """Night-to-night log-sd with N - 1 degrees of freedom (None below two positive nights)."""
    array = np.asarray(night_means, dtype=float)
    if array.size < 2 or np.any(array <= 0):
        return None
    return float(np.std(np.log(array), ddof=1))


def window(nights: Sequence[Record], count: int) -> tuple[list[Record], str | None]:
    """The last ``count`` accepted nights after the latest confirmed change point."""
    detection = detect([night.values for night in nights])
    start, stopped_at = 0, None
    for cp in detection.change_points:
        if cp.status == "confirmed":
            start, stopped_at = cp.index, nights[cp.index].run_id
    transients = set(detection.transients)
    accepted = [night for i, night in enumerate(nights) if i >= start and i not in transients]
    return accepted[-count:], stopped_at


def window_starts(nights: Sequence[Record]) -> tuple[int, ...]:
    """Each value's server start numbered across the nights (night after night, each night's
    starts in their order): every night's starts are server starts of their own."""
    numbers: dict[tuple[int, int], int] = {}
    return tuple(numbers.setdefault((i, start), len(numbers))
                 for i, night in enumerate(nights) for start in night.starts)


def rolling_baseline(records: Iterable[Record], runner_class: str, model: str, suite: str, *,
                     nights: int = DEFAULT_NIGHTS, exclude_run_ids: Iterable[str] = (),
                     problems: Sequence[Problem] = (),
                     loads: Mapping[int, str] | None = None,
                     hardware: str | None = None) -> RollingBaseline:
    """Pool the last ``nights`` accepted nights of every series of (runner, model, suite);
    with ``loads`` (the judged run's load id per concurrency) only nights of that load, with
    ``hardware`` (its digest) only nights of that hardware or of unknown hardware."""
    if nights < 1:
        raise HistoryError(f"history:{nights}: the number of nights must be >= 1")
    excluded = set(exclude_run_ids)
    mine = [r for r in records if r.identity == (runner_class, model, suite)
            and r.run_id not in excluded and comparable(r.hardware, hardware)]
    pooled, short, unknown = [], [], False
    for key, series in group_series(mine).items():
        want = (loads or {}).get(key[4]) if key[4] is not None else None
        if want is not None:
            series = [night for night in series if comparable(load_id(night), want)]
            if len(series) < nights:
                point = f"{key[3]}@c{key[4]}"
                short.append(f"{point} {key[5]}: {len(series)} night(s) on load {want}")
            if not series:
                continue
        chosen, stopped_at = window(series, nights)
        unknown = unknown or any(night.hardware is None for night in chosen)
        means = [float(np.mean(night.values)) for night in chosen]
        cv = night_cv(means)
        pooled.append(PooledSeries(
            mode=key[3], concurrency=key[4], metric=key[5],
            run_ids=tuple(night.run_id for night in chosen),
            values=tuple(v for night in chosen for v in night.values),
            starts=window_starts(chosen),
            night_means=tuple(means), cv=cv, cv_dof=len(chosen) - 1, stopped_at=stopped_at,
            n=tuple(night.n or 0 for night in chosen) if key[5] == ACCURACY_METRIC else ()))
    if not pooled:
        raise HistoryError(f"history has no accepted nights for runner_class {runner_class!r}, "
                           f"model {model!r}, suite {suite!r}"
                           + (f" on the judged run's load ({'; '.join(short)})" if short else ""))
    return RollingBaseline(runner_class, model, suite, nights, tuple(pooled), tuple(problems),
                           tuple(short), None if unknown else hardware)


def rolling_from_store(store: Path, runner_class: str, model: str, suite: str, *,
                       nights: int = DEFAULT_NIGHTS, exclude_run_ids: Iterable[str] = (),
                       full_window: bool = False,
                       loads: Mapping[int, str] | None = None,
                       hardware: str | None = None) -> RollingBaseline:
    """Read the store (malformed lines skipped and listed in ``problems``) and pool.

    ``full_window``: refuse (HistoryError) unless ``nights`` accepted nights are there, on the
    judged run's ``loads`` at every point - what ``compare --baseline history:N`` requires
    before it replaces the reviewed baseline."""
    contents = read_store(store)
    rolling = rolling_baseline(contents.records, runner_class, model, suite, nights=nights,
                               exclude_run_ids=exclude_run_ids, problems=contents.problems,
                               loads=loads, hardware=hardware)
    if full_window and len(rolling.run_ids) < nights:
        raise HistoryError(f"history:{nights}: only {len(rolling.run_ids)} accepted night(s) for "
                           f"{runner_class}/{model}/{suite} in {store}")
    if full_window and rolling.short:
        raise HistoryError(f"history:{nights}: too few nights on the judged run's load for "
                           f"{runner_class}/{model}/{suite} in {store} (the suite's load changed; "
                           f"older nights measured another): {'; '.join(rolling.short)}")
    return rolling


def rolling_for_run(store: Path, run: Run, run_dir: Path, *, nights: int = DEFAULT_NIGHTS
                    ) -> RollingBaseline:
    """``history:N`` for ``run`` (read from ``run_dir``; ``compare --baseline`` and ``history
    baseline``): its series' last ``nights`` accepted nights on its load and hardware, itself
    left out (the run is judged before it is added), refused unless the window is full."""
    from servegate.history.load import judged_run_filters
    from servegate.judge.baselines import run_identity

    excluded, loads, hardware = judged_run_filters(run, run_dir)
    return rolling_from_store(store, *run_identity(run), nights=nights, full_window=True,
                              exclude_run_ids=excluded, loads=loads, hardware=hardware)


def _entry(series: PooledSeries, all_runs: tuple[str, ...]) -> dict[str, Any]:
    values = np.asarray(series.values, dtype=float)
    spread = float(values.std(ddof=1)) if values.size > 1 else None
    return {
        "value": round(float(values.mean()), 6),
        "spread": None if spread is None else round(spread, 6),
        "cv": None if series.cv is None else round(series.cv, 6),
        "cv_dof": series.cv_dof,
        "n_blocks": int(values.size),
        "blocks": [round(float(v), 6) for v in values],
        "starts": list(series.starts),
        # only when this series' window differs from provenance.run_ids (a change point)
        **({"nights": list(series.run_ids)} if series.run_ids != all_runs else {}),
    }


def as_baseline(rolling: RollingBaseline) -> dict[str, Any]:
    """The window as a baseline document (same shape as ``judge.baselines``; validates there).

    Per metric: ``value`` the pooled mean, ``blocks`` every pooled block with its ``starts``
    (numbered across nights, :func:`window_starts`) so the judge measures both levels from it,
    ``spread`` their sd, ``cv`` the night-to-night log-sd with ``cv_dof`` = N - 1 (replacing
    ``run_to_run_cv``). ``requests`` is empty (not in the history); accuracy pools the nights."""
    points: dict[tuple[str, int], dict[str, Any]] = {}
    accuracy: dict[str, dict[str, Any]] = {}
    for series in rolling.series:
        if series.metric == ACCURACY_METRIC:
            n = sum(series.n)
            correct = sum(round(v * k) for v, k in zip(series.values, series.n, strict=True))
            if n > 0:
                accuracy[series.mode] = {"n": n, "correct": correct,
                                         "accuracy": round(correct / n, 6),
                                         "nights": list(series.run_ids)}
            continue
        if series.mode not in MODES or series.concurrency is None:
            continue
        point = points.setdefault((series.mode, series.concurrency), {
            "mode": series.mode, "concurrency": series.concurrency,
            "metrics": {}, "requests": {}})
        point["metrics"][series.metric] = _entry(series, rolling.run_ids)
    cvs = [s.cv for s in rolling.series if s.cv is not None and math.isfinite(s.cv)]
    return {
        "schema_version": BASELINE_SCHEMA_VERSION,
        "runner_class": rolling.runner_class,
        "model_profile": rolling.model,
        "suite": rolling.suite,
        "chunk_size": None,
        "page_size": None,
        "provenance": {
            "created_at": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
            "created_by": "servegate history (rolling baseline)",
            "source_run": f"history:{rolling.nights}",
            "run_ids": list(rolling.run_ids),
            "nights_requested": rolling.nights,
            "stopped_at_change_points": sorted({s.stopped_at for s in rolling.series
                                                if s.stopped_at}),
            "max_night_cv": None if not cvs else round(max(cvs), 6),
            "skipped_store_lines": [str(p) for p in rolling.problems],
            "forced": False,
            "forced_reasons": [],
            "fingerprint": {"hardware": rolling.hardware} if rolling.hardware else {},
        },
        "points": [points[key] for key in sorted(points, key=point_sort_key)],
        "accuracy": accuracy,
    }
