"""A point's load: the work its values were measured on, and where a series' load changed.

Why: when a suite's load changes a series holds nights of two loads, and comparing them would
read the change as a level shift. Readers compare a night only with nights of the same load; a
line without one is *load unknown*, comparable with any (docs/history.md, Store layout)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servegate.core import hardware
from servegate.core.results import Run
from servegate.history.records import Record, point_load

Point = tuple[str, int | None]          # (mode, concurrency)
_FIELDS = ("dataset", "input_len", "output_len", "num_prompts", "range_ratio", "chunk_size",
           "page_size")                 # what a line's load holds (servegate.history.records)


def run_load_ids(run: Run) -> dict[int, str]:
    """Each concurrency's load id in a run (empty: the run's load is unknown)."""
    load = run.get("load")
    concs = (load.get("concurrency") or []) if isinstance(load, dict) else []
    found = {conc: point_load(run, conc) for conc in concs if isinstance(conc, int)}
    return {conc: value["id"] for conc, value in found.items() if value}


def judged_run_filters(run: Run, run_dir: Path
                       ) -> tuple[list[str], dict[int, str], str | None]:
    """(run ids to leave out, load id per concurrency, hardware digest) for reading the history
    against the run being judged: the run itself is left out (it is judged before it is added)
    and only nights of its load and hardware count (unknown: comparable with any)."""
    return ([str(run.get("run_id") or Path(run_dir).resolve().name)], run_load_ids(run),
            hardware.of(run.get("fingerprint")))


def load_id(record: Record) -> str | None:
    """The line's load id; None: load unknown."""
    return record.load.get("id") if record.load else None


def comparable(a: str | None, b: str | None) -> bool:
    """Same load, or one of them unknown (an old line cannot say)."""
    return a is None or b is None or a == b


def describe(before: Mapping[str, Any], after: Mapping[str, Any]) -> str:
    """What changed between two loads: ``output_len 128 -> 32, num_prompts 64 -> 32``."""
    return ", ".join(f"{key} {before.get(key)} -> {after.get(key)}" for key in _FIELDS
                     if before.get(key) != after.get(key))


def series_changes(nights: Sequence[Record]) -> dict[int, str]:
    """Night index -> what changed, for each night whose load differs from the last known
    load before it (one series, nights oldest first)."""
    changes, last = {}, None
    for i, night in enumerate(nights):
        if night.load is None:
            continue
        if last is not None and last.get("id") != night.load.get("id"):
            changes[i] = describe(last, night.load)
        last = night.load
    return changes


@dataclass(frozen=True)
class LoadChange:
    """A night whose load differs from the nights before it (at the points both measured)."""

    run_id: str
    time: str
    changed: str                        # "c64 output_len 128 -> 32; ..."

    def to_json(self) -> dict[str, str]:
        return {"run_id": self.run_id, "time": self.time, "changed": self.changed}


def night_loads(records: Iterable[Record]) -> dict[Point, dict[str, Any]]:
    """A night's known point loads."""
    return {(r.mode, r.concurrency): r.load for r in records if r.load is not None}


def comparable_nights(a: Mapping[Point, Mapping[str, Any]],
                      b: Mapping[Point, Mapping[str, Any]]) -> bool:
    """Every point both nights know ran the same load."""
    return all(a[p].get("id") == b[p].get("id") for p in a.keys() & b.keys())


def regimes(nights: Sequence[Sequence[Record]]) -> tuple[int, list[LoadChange]]:
    """(index of the first night of the newest load regime, every load change oldest first):
    a night whose known loads differ from the regime's at a point both measured starts a new
    regime; a night of unknown load stays in the current one."""
    current: dict[Point, dict[str, Any]] = {}
    start, changes = 0, []
    for i, night in enumerate(nights):
        loads = night_loads(night)
        if not comparable_nights(current, loads):
            what = sorted({f"c{p[1]} {describe(current[p], loads[p])}"
                           for p in current.keys() & loads.keys()
                           if current[p].get("id") != loads[p].get("id")})
            changes.append(LoadChange(night[0].run_id, night[0].time, "; ".join(what)))
            start, current = i, {}
        current.update(loads)
    return start, changes
