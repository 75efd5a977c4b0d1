"""The history store: a directory with one JSON-lines file per accepted run (a contract).

``<store>/<run_id>.jsonl``, one line per (mode, concurrency, metric)::

    {"schema_version": 2, "run_id", "time", "runner_class", "model", "suite", "mode",
     "concurrency", "metric", "values": [one per block], "starts": [its server start],
     "blocks": [its block within that start], "design": {"in_server", "starts", "blocks"},
     "sglang_version", "sglang_commit", "servegate_commit"}

plus one GSM8K line per mode: ``metric = "gsm8k_accuracy"``, ``values = [accuracy]`` and ``n``.

Why every value keeps its start and block: the noise lives at two levels (server start, block
within a start; servegate.judge.nested), and a history that flattens them counts the blocks of
one start as independent repeats. ``design`` is the night's: its starts, blocks per start and
whether every mode ran inside the same server starts.

Schema 1 stored ``values`` alone (in repeat order). Reading upgrades such a line in memory
(servegate.core.versioned) the way the judge reads a run or a baseline from before blocks
(servegate.judge.evidence.point_slot): each value its own server start (start = its index,
the repeat), block 0, ``design = {"in_server": false, "starts": len(values), "blocks": 1}``.
A schema-1 line written from an in-server run cannot be told apart: its blocks become starts
(what schema 1 claimed anyway).

Why one file per run: parallel nightly cells never write the same file, so merging two stores
is copying files (a git push of one never conflicts with another's). Files are written
atomically and not rewritten: adding the same run again is a no-op when the content is
identical, an upgrade when the file is the same run at an older schema (the values agree; the
file is rewritten at the current schema, gaining the levels), and a refusal when it differs.
Reading skips a malformed line but names it (``file:line: what``); ``strict`` reading turns it
into an error.
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
from servegate.core.versioned import Schema, SchemaVersionError
from servegate.judge.baselines import group_points, point_sort_key, run_identity
from servegate.judge.evidence import point_slot

# 2: every value with its server start and block, and the night's design (schema 1: values only)
STORE_SCHEMA_VERSION = 2
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
class Design:
    """A night's design: server starts, blocks per start and mode, every mode in each start."""

    in_server: bool
    starts: int
    blocks: int

    def to_json(self) -> dict[str, Any]:
        return {"in_server": self.in_server, "starts": self.starts, "blocks": self.blocks}


@dataclass(frozen=True)
class Record:
    """One store line: one metric of one (mode, concurrency) of one run, every value with its
    server start and its block within that start.

    ``starts`` / ``blocks`` left empty mean what schema 1 meant: each value its own start
    (start = its index), block 0; ``design`` left out is then derived from them. Both are
    filled in on construction."""

    run_id: str
    time: str
    runner_class: str
    model: str
    suite: str
    mode: str
    concurrency: int | None
    metric: str
    values: tuple[float, ...]
    starts: tuple[int, ...] = ()
    blocks: tuple[int, ...] = ()
    design: Design | None = None
    sglang_version: str | None = None
    sglang_commit: str | None = None
    servegate_commit: str | None = None
    n: int | None = None

    def __post_init__(self) -> None:
        if not self.starts:
            object.__setattr__(self, "starts", tuple(range(len(self.values))))
        if not self.blocks:
            object.__setattr__(self, "blocks", (0,) * len(self.values))
        if not len(self.values) == len(self.starts) == len(self.blocks):
            raise ValueError(f"{self.metric}: {len(self.values)} values, {len(self.starts)} "
                             f"starts, {len(self.blocks)} blocks: expected one of each per value")
        if self.design is None:
            per_start = max((len(v) for v in self.by_start().values()), default=1)
            object.__setattr__(self, "design", Design(False, len(set(self.starts)), per_start))

    def by_start(self) -> dict[int, tuple[float, ...]]:
        """The values of each server start, starts in order, each start's blocks in order."""
        grouped: dict[int, list[tuple[int, float]]] = defaultdict(list)
        for start, block, value in zip(self.starts, self.blocks, self.values, strict=True):
            grouped[start].append((block, value))
        return {start: tuple(v for _, v in sorted(grouped[start], key=lambda bv: bv[0]))
                for start in sorted(grouped)}

    def to_json(self) -> dict[str, Any]:
        assert self.design is not None          # filled in by __post_init__
        data: dict[str, Any] = {
            "schema_version": STORE_SCHEMA_VERSION, "run_id": self.run_id, "time": self.time,
            "runner_class": self.runner_class, "model": self.model, "suite": self.suite,
            "mode": self.mode, "concurrency": self.concurrency, "metric": self.metric,
            "values": list(self.values), "starts": list(self.starts),
            "blocks": list(self.blocks), "design": self.design.to_json(),
            "sglang_version": self.sglang_version,
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


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def night_design(run: Run) -> Design:
    """The run's design as run.json records it (``[design]``); before that, read from its
    points: each repeat its own server start, one block each."""
    recorded = run.get("design") or {}
    starts, blocks = recorded.get("starts"), recorded.get("blocks")
    if isinstance(starts, int) and isinstance(blocks, int) and starts >= 1 and blocks >= 1:
        return Design(bool(recorded.get("in_server")), starts, blocks)
    slots = [point_slot(dict(point)) for point in run.get("points", [])]
    return Design(False, len({start for start, _ in slots}) or 1,
                  max((block for _, block in slots), default=0) + 1)


def records_from_run(run: Run, run_id: str) -> list[Record]:
    """The store lines of a run (pure): every metric finite in every block, then accuracy."""
    runner, model, suite = run_identity(run)
    fingerprint = run.get("fingerprint") or {}
    common: dict[str, Any] = {
        "run_id": run_id, "time": str(run.get("started_at") or run.get("finished_at")),
        "runner_class": runner, "model": model, "suite": suite, "design": night_design(run),
        "sglang_version": _text(fingerprint.get("sglang")),
        "sglang_commit": _text(fingerprint.get("sglang_commit")),
        "servegate_commit": _text(run.get("servegate_commit"))     # type: ignore[arg-type]
        or _text(fingerprint.get("servegate_commit")),
    }
    records = []
    for (mode, concurrency), points in sorted(group_points(run).items(),
                                              key=lambda kv: point_sort_key(kv[0])):
        slots = [point_slot(point) for point in points]
        names = sorted({name for point in points for name in point.get("metrics", {})})
        for name in names:
            values = [point["metrics"].get(name) for point in points]
            if all(finite_number(v) for v in values):
                records.append(Record(mode=mode, concurrency=concurrency, metric=name,
                                      values=tuple(float(v) for v in values),
                                      starts=tuple(start for start, _ in slots),
                                      blocks=tuple(block for _, block in slots), **common))
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
    """``existing`` is this run written at an older schema: every line readable, one at least
    older than the current schema, and the same values as ``records``."""
    parsed = [_parse_line(raw, path) for raw in existing.splitlines() if raw.strip()]
    if not parsed or any(isinstance(line, str) for line in parsed):
        return False
    lines = [line for line in parsed if not isinstance(line, str)]
    return (any(found < STORE_SCHEMA_VERSION for _, found in lines)
            and [_content(r) for r, _ in lines] == [_content(r) for r in records])


# ---------------------------------------------------------------- reading


def _line_v1_to_v2(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """Schema 1 kept ``values`` alone, in repeat order: each value its own server start
    (start = repeat), block 0, as the judge reads a run from before blocks."""
    values = data.get("values")
    count = len(values) if isinstance(values, list) else 0
    return {**data, "starts": list(range(count)), "blocks": [0] * count,
            "design": {"in_server": False, "starts": max(count, 1), "blocks": 1}}


STORE_SCHEMA = Schema("history store line", "schema_version", STORE_SCHEMA_VERSION,
                      {1: _line_v1_to_v2})


def _index_list(value: Any, count: int) -> bool:
    return isinstance(value, list) and len(value) == count and all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)


def _design(value: Any) -> Design | str:
    if not isinstance(value, dict) or not isinstance(value.get("in_server"), bool):
        return f"design must be an object with in_server, starts and blocks, got {value!r}"
    for key in ("starts", "blocks"):
        number = value.get(key)
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            return f"design.{key} must be an integer >= 1, got {number!r}"
    return Design(value["in_server"], value["starts"], value["blocks"])


def _parse_line(raw: str, path: Path) -> tuple[Record, int] | str:
    """(the Record, the schema version the line was written at), or what is wrong with it."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        return f"not valid JSON ({err.msg} at column {err.colno})"
    if not isinstance(data, dict):
        return f"expected a JSON object, got {type(data).__name__}"
    try:
        data, found = STORE_SCHEMA.upgrade(data, path)
    except SchemaVersionError as err:
        return str(err).removeprefix(f"{path}: ")
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
    for key in ("starts", "blocks"):
        if not _index_list(data.get(key), len(values)):
            return (f"{key} must be a list of {len(values)} integers >= 0 (one per value), "
                    f"got {data.get(key)!r}")
    design = _design(data.get("design"))
    if isinstance(design, str):
        return design
    n = data.get("n")
    if data["metric"] == ACCURACY_METRIC and (isinstance(n, bool) or not isinstance(n, int)
                                              or n < 1):
        return f"n must be an integer >= 1 on a {ACCURACY_METRIC} line, got {n!r}"
    if data["run_id"] != path.name[: -len(SUFFIX)]:
        return f"run_id {data['run_id']!r} does not match the file name"
    return Record(run_id=data["run_id"], time=data["time"], runner_class=data["runner_class"],
                  model=data["model"], suite=data["suite"], mode=data["mode"], concurrency=conc,
                  metric=data["metric"], values=tuple(float(v) for v in values),
                  starts=tuple(data["starts"]), blocks=tuple(data["blocks"]), design=design,
                  sglang_version=data.get("sglang_version"),
                  sglang_commit=data.get("sglang_commit"),
                  servegate_commit=data.get("servegate_commit"),
                  n=n if isinstance(n, int) and not isinstance(n, bool) else None), found


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
                contents.records.append(parsed[0])
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
