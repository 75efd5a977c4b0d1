"""The history store: a directory with one JSON-lines file per accepted run (a contract).

``<store>/<run_id>.jsonl``, one line per (mode, concurrency, metric)::

    {"schema_version": 1, "run_id", "time", "runner_class", "model", "suite", "mode",
     "concurrency", "metric", "values": [one per repeat], "sglang_version", "sglang_commit",
     "servegate_commit"}

plus one GSM8K line per mode: ``metric = "gsm8k_accuracy"``, ``values = [accuracy]`` and ``n``.

Why one file per run: parallel nightly cells never write the same file, so merging two stores
is copying files (a git push of one never conflicts with another's). Files are written
atomically and never rewritten: adding the same run again is a no-op when the content is
identical and a refusal when it differs. Reading skips a malformed line but names it
(``file:line: what``); ``strict`` reading turns it into an error.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from servegate.core.atomic import write_text
from servegate.core.errors import ServegateError
from servegate.core.metrics import finite_number
from servegate.core.results import Run, load_run, unusable_reasons
from servegate.judge.baselines import group_points, point_sort_key, run_identity

STORE_SCHEMA_VERSION = 1
ACCURACY_METRIC = "gsm8k_accuracy"
SUFFIX = ".jsonl"
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_OPTIONAL_TEXT = ("sglang_version", "sglang_commit", "servegate_commit")
_TEXT = ("run_id", "time", "runner_class", "model", "suite", "mode", "metric")


class HistoryError(ServegateError, ValueError):
    """Bad input to the history store (a path, a run, a line); the message names which."""


class RunRefusedError(HistoryError):
    """The run must not enter the history (incomplete, failed, fault-injected, ...)."""

    def __init__(self, run_dir: Path, reasons: list[str]) -> None:
        self.reasons = reasons
        super().__init__(f"refusing to add {run_dir} to the history: " + "; ".join(reasons))


@dataclass(frozen=True)
class Record:
    """One store line: one metric of one (mode, concurrency) of one run, per repeat."""

    run_id: str
    time: str
    runner_class: str
    model: str
    suite: str
    mode: str
    concurrency: int | None
    metric: str
    values: tuple[float, ...]
    sglang_version: str | None = None
    sglang_commit: str | None = None
    servegate_commit: str | None = None
    n: int | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "schema_version": STORE_SCHEMA_VERSION, "run_id": self.run_id, "time": self.time,
            "runner_class": self.runner_class, "model": self.model, "suite": self.suite,
            "mode": self.mode, "concurrency": self.concurrency, "metric": self.metric,
            "values": list(self.values), "sglang_version": self.sglang_version,
            "sglang_commit": self.sglang_commit, "servegate_commit": self.servegate_commit,
        }
        if self.n is not None:
            data["n"] = self.n
        return data

    @property
    def identity(self) -> tuple[str, str, str]:
        return (self.runner_class, self.model, self.suite)


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
    status: Literal["added", "unchanged"]


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


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def records_from_run(run: Run, run_id: str) -> list[Record]:
    """The store lines of a run (pure): every metric finite in every repeat, then accuracy."""
    runner, model, suite = run_identity(run)
    fingerprint = run.get("fingerprint") or {}
    common: dict[str, Any] = {
        "run_id": run_id, "time": str(run.get("started_at") or run.get("finished_at")),
        "runner_class": runner, "model": model, "suite": suite,
        "sglang_version": _text(fingerprint.get("sglang")),
        "sglang_commit": _text(fingerprint.get("sglang_commit")),
        "servegate_commit": _text(run.get("servegate_commit"))     # type: ignore[arg-type]
        or _text(fingerprint.get("servegate_commit")),
    }
    records = []
    for (mode, concurrency), points in sorted(group_points(run).items(),
                                              key=lambda kv: point_sort_key(kv[0])):
        names = sorted({name for point in points for name in point.get("metrics", {})})
        for name in names:
            values = [point["metrics"].get(name) for point in points]
            if all(finite_number(v) for v in values):
                records.append(Record(mode=mode, concurrency=concurrency, metric=name,
                                      values=tuple(float(v) for v in values), **common))
    for mode, result in sorted((run.get("accuracy") or {}).items()):
        n, correct = result.get("n"), result.get("correct")
        if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
            continue
        counted = isinstance(correct, int) and not isinstance(correct, bool)
        accuracy: Any = correct / n if counted and correct is not None else result.get("accuracy")
        if finite_number(accuracy):
            conc = result.get("concurrency")
            records.append(Record(mode=mode, concurrency=conc if isinstance(conc, int) else None,
                                  metric=ACCURACY_METRIC, values=(float(accuracy),), n=n,
                                  **common))
    return records


def dumps_records(records: Iterable[Record]) -> str:
    return "".join(json.dumps(r.to_json(), sort_keys=True, allow_nan=False) + "\n"
                   for r in records)


def check_store_dir(store: Path, *, must_exist: bool) -> None:
    """A store is a directory: a file at that path (or a missing store when reading) is an error."""
    if store.exists() and not store.is_dir():
        raise HistoryError(f"{store}: history store is a file, expected a directory "
                           "(one <run_id>.jsonl per run)")
    if must_exist and not store.exists():
        raise HistoryError(f"{store}: history store does not exist (`servegate history add "
                           "RUN_DIR --store DIR` creates it)")


def add_run(run_dir: Path, store: Path) -> AddResult:
    """Add a complete run to the store; idempotent for the same run, never rewrites a file."""
    run_dir, store = Path(run_dir), Path(store)
    check_store_dir(store, must_exist=False)
    run = load_run(run_dir)             # RunFolderError (exit 2) for another schema version
    # bench records the run folder's own name; a downloaded CI artifact is renamed after its
    # cell (the same name every night), so run.json's id wins over the folder's.
    run_id = str(run.get("run_id") or run_dir.resolve().name)
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
        if target.read_text(encoding="utf-8") == text:
            return AddResult(target, len(records), "unchanged")
        raise HistoryError(f"{target}: a different run with id {run_id!r} is already in the "
                           "store; nothing was rewritten (rename the run folder to add it)")
    write_text(target, text)
    return AddResult(target, len(records), "added")


# ---------------------------------------------------------------- reading


def _parse_line(raw: str, path: Path) -> Record | str:
    """A Record, or what is wrong with the line."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        return f"not valid JSON ({err.msg} at column {err.colno})"
    if not isinstance(data, dict):
        return f"expected a JSON object, got {type(data).__name__}"
    version = data.get("schema_version")
    if version != STORE_SCHEMA_VERSION:
        return f"schema_version {version!r}, expected {STORE_SCHEMA_VERSION}"
    for key in _TEXT:
        if not isinstance(data.get(key), str) or not data[key]:
            return f"{key} must be a non-empty string, got {data.get(key)!r}"
    for key in _OPTIONAL_TEXT:
        if data.get(key) is not None and not isinstance(data[key], str):
            return f"{key} must be a string or null, got {data[key]!r}"
    conc = data.get("concurrency")
    if conc is not None and (isinstance(conc, bool) or not isinstance(conc, int) or conc < 1):
        return f"concurrency must be an integer >= 1 or null, got {conc!r}"
    values = data.get("values")
    if not isinstance(values, list) or not values or not all(finite_number(v) for v in values):
        return f"values must be a non-empty list of numbers, got {values!r}"
    n = data.get("n")
    if data["metric"] == ACCURACY_METRIC and (isinstance(n, bool) or not isinstance(n, int)
                                              or n < 1):
        return f"n must be an integer >= 1 on a {ACCURACY_METRIC} line, got {n!r}"
    if data["run_id"] != path.name[: -len(SUFFIX)]:
        return f"run_id {data['run_id']!r} does not match the file name"
    return Record(run_id=data["run_id"], time=data["time"], runner_class=data["runner_class"],
                  model=data["model"], suite=data["suite"], mode=data["mode"], concurrency=conc,
                  metric=data["metric"], values=tuple(float(v) for v in values),
                  sglang_version=data.get("sglang_version"),
                  sglang_commit=data.get("sglang_commit"),
                  servegate_commit=data.get("servegate_commit"),
                  n=n if isinstance(n, int) and not isinstance(n, bool) else None)


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
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            parsed = _parse_line(raw, path)
            if isinstance(parsed, str):
                contents.problems.append(Problem(path, number, parsed))
            else:
                contents.records.append(parsed)
    if strict and contents.problems:
        first = contents.problems[0]
        more = len(contents.problems) - 1
        raise HistoryError(f"{first}" + (f" (and {more} more problem line(s))" if more else ""))
    return contents


SeriesKey = tuple[str, str, str, str, int | None, str]


def series_key(record: Record) -> SeriesKey:
    """(runner_class, model, suite, mode, concurrency, metric)."""
    return (record.runner_class, record.model, record.suite, record.mode, record.concurrency,
            record.metric)


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
