"""The history store: a directory with one JSON-lines file per accepted run (the contract:
docs/history.md, Store layout; a line: servegate.history.records).

One file per run, so parallel nightly cells never write the same file and merging stores is
copying files. Written atomically, never rewritten; a malformed line is skipped and named
(``strict``: an error)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from servegate.core.atomic import write_text
from servegate.core.errors import ServegateError
from servegate.core.results import Run, load_run, unusable_reasons
from servegate.history.records import (
    STORE_SCHEMA_VERSION,
    Record,
    dumps_records,
    parse_line,
    records_from_run,
)
from servegate.judge.baselines import point_sort_key, run_identity

SUFFIX = ".jsonl"
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class HistoryError(ServegateError, ValueError):
    """Bad input to the history store (a path, a run, a line); the message names which."""


class RunRefusedError(HistoryError):
    """The run must not enter the history (incomplete, failed, fault-injected, ...)."""

    def __init__(self, run_dir: Path, reasons: list[str]) -> None:
        self.reasons = reasons
        super().__init__(f"refusing to add {run_dir} to the history: " + "; ".join(reasons))


@dataclass(frozen=True)
class Problem:
    """A line (or file) that could not be read; ``str()`` is ``file:line: what``."""

    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


@dataclass
class StoreContents:
    records: list[Record] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


@dataclass(frozen=True)
class AddResult:
    path: Path
    lines: int
    status: Literal["added", "unchanged", "upgraded"]


# ---------------------------------------------------------------- writing


def refusal_reasons(run: Run) -> list[str]:
    """Why a run must not enter the history (empty: fine); update-baselines' rules plus an
    identity and a time."""
    reasons = unusable_reasons(run)
    for name, value in zip(("runner_class", "model_profile", "suite"), run_identity(run),
                           strict=True):
        if not value:
            reasons.append(f"run.json has no {name}")
    if not isinstance(run.get("started_at") or run.get("finished_at"), str):
        reasons.append("run.json has no started_at/finished_at time")
    return reasons


def check_store_dir(store: Path, *, must_exist: bool) -> None:
    """A store is a directory: a file at that path (or a missing store when reading) is an error."""
    if store.exists() and not store.is_dir():
        raise HistoryError(f"{store}: history store is a file, expected a directory "
                           "(one <run_id>.jsonl per run)")
    if must_exist and not store.exists():
        raise HistoryError(f"{store}: history store does not exist (`servegate history add "
                           "RUN_DIR --store DIR` creates it)")


def run_id_of(run: Run, run_dir: Path) -> str:
    """The id a run is stored under: bench records the run folder's own name; a downloaded CI
    artifact is renamed after its cell (the same name every night), so run.json's id wins."""
    return str(run.get("run_id") or Path(run_dir).resolve().name)


def add_run(run_dir: Path, store: Path) -> AddResult:
    """Add a complete run to the store; idempotent for the same run, never rewrites a file."""
    run_dir, store = Path(run_dir), Path(store)
    check_store_dir(store, must_exist=False)
    run = load_run(run_dir)             # RunFolderError (exit 2) for another schema version
    run_id = run_id_of(run, run_dir)
    reasons = refusal_reasons(run)
    if not _RUN_ID.match(run_id):
        reasons.append(f"run folder name {run_id!r} cannot be a run id ([A-Za-z0-9._-])")
    if reasons:
        raise RunRefusedError(run_dir, reasons)
    records = records_from_run(run, run_id)
    if not records:
        raise RunRefusedError(run_dir, ["run has no finite metric values"])
    text = dumps_records(records)
    target = store / f"{run_id}{SUFFIX}"
    if target.exists():
        existing = target.read_text(encoding="utf-8")
        if existing == text:
            return AddResult(target, len(records), "unchanged")
        if not _older_copy(existing, target, records):
            raise HistoryError(f"{target}: a different run with id {run_id!r} is already in the "
                               "store; nothing was rewritten (rename the run folder to add it)")
        write_text(target, text)
        return AddResult(target, len(records), "upgraded")
    write_text(target, text)
    return AddResult(target, len(records), "added")


def _content(record: Record) -> tuple[Any, ...]:
    """What a line says about the run apart from the levels (what schema 1 could hold)."""
    return (series_key(record), record.run_id, record.time, record.values, record.n,
            record.sglang_version, record.sglang_commit, record.servegate_commit)


def _older_copy(existing: str, path: Path, records: list[Record]) -> bool:
    """``existing`` is this run written by an older servegate: every line readable, the same
    values as ``records``, and one line at least older than the current schema or the file
    without the run's timings, stack or loads (added before runs kept them)."""
    parsed = [parse_line(raw, path, path.name[: -len(SUFFIX)])
              for raw in existing.splitlines() if raw.strip()]
    if not parsed or any(isinstance(line, str) for line in parsed):
        return False
    lines = [line for line in parsed if not isinstance(line, str)]
    older = (any(found < STORE_SCHEMA_VERSION for _, found in lines)
             or any(all(getattr(r, key) is None for r, _ in lines)
                    and any(getattr(r, key) is not None for r in records)
                    for key in ("timings", "stack", "load")))
    return older and [_content(r) for r, _ in lines] == [_content(r) for r in records]


# ---------------------------------------------------------------- reading


def store_files(store: Path) -> list[Path]:
    """The run files, sorted (write_text's hidden temp files are not runs)."""
    return sorted(p for p in store.iterdir()
                  if p.is_file() and p.name.endswith(SUFFIX) and not p.name.startswith("."))


def read_store(store: Path, *, strict: bool = False) -> StoreContents:
    """Every readable record; each unreadable line is a Problem (``strict``: the first raises)."""
    store = Path(store)
    check_store_dir(store, must_exist=True)
    contents = StoreContents()
    for path in store_files(store):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as err:
            contents.problems.append(Problem(path, 0, f"unreadable ({err})"))
            continue
        run_records = []
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            parsed = parse_line(raw, path, path.name[: -len(SUFFIX)])
            if isinstance(parsed, str):
                contents.problems.append(Problem(path, number, parsed))
            else:
                run_records.append(parsed[0])
        contents.records.extend(_with_run_stack(run_records))
    if strict and contents.problems:
        first = contents.problems[0]
        more = len(contents.problems) - 1
        raise HistoryError(f"{first}" + (f" (and {more} more problem line(s))" if more else ""))
    return contents


def _with_run_stack(records: list[Record]) -> list[Record]:
    """The run's stack (written on its first line) on every line of the run, so each series'
    night knows it."""
    stack = next((r.stack for r in records if r.stack is not None), None)
    if stack is None:
        return records
    return [r if r.stack is not None else replace(r, stack=stack) for r in records]


SeriesKey = tuple[str, str, str, str, int | None, str]


def series_key(record: Record) -> SeriesKey:
    """(runner_class, model, suite, mode, concurrency, metric) (suite: ``Record.identity``'s)."""
    return (*record.identity, record.mode, record.concurrency, record.metric)


def group_series(records: Iterable[Record]) -> dict[SeriesKey, list[Record]]:
    """Records per series, nights oldest first (by time, then run id)."""
    series: dict[SeriesKey, list[Record]] = defaultdict(list)
    for record in records:
        series[series_key(record)].append(record)
    return {key: sorted(nights, key=lambda r: (r.time, r.run_id))
            for key, nights in sorted(series.items(), key=lambda kv: _sort_key(kv[0]))}


def _sort_key(key: SeriesKey) -> tuple[Any, ...]:
    runner, model, suite, mode, conc, metric = key
    return (runner, model, suite, metric, point_sort_key((mode, conc or 0)))


# ---------------------------------------------------------------- measured timings


def measured_timings(store_dir: Path, suite: str, runner_class: str) -> list[dict[str, Any]]:
    """``{"run_id", "timings"}`` of every stored run of ``suite`` on ``runner_class`` that kept
    its timings (run.json ``timings``), oldest first, newest last: what ``servegate plan``
    prices a suite with once the runner class has nights. The store holds complete runs only;
    runs from before timings, and unreadable lines, are left out (not an error: a plan falls
    back to its printed figures)."""
    store = Path(store_dir)
    if not store.is_dir():
        return []
    nights: dict[str, tuple[str, dict[str, Any]]] = {}
    for record in read_store(store).records:
        if (record.timings is not None and record.suite == suite
                and record.runner_class == runner_class):
            nights.setdefault(record.run_id, (record.time, record.timings))
    return [{"run_id": run_id, "timings": timings}
            for run_id, (_, timings) in sorted(nights.items(), key=lambda kv: (kv[1][0], kv[0]))]
