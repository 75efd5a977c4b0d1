"""One line of the history store: a metric of one (mode, concurrency) of one run, every value with
its server start and block (the contract: docs/history.md, Store layout).

Why start and block: the noise lives at both levels (servegate.judge.nested); a flat history
would count one start's blocks as independent repeats. Optional keys are additive (no schema
bump); a schema-1 line (``values`` alone) is upgraded when read."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servegate.core import stack as kernel_stack
from servegate.core.hardware import HARDWARE
from servegate.core.metrics import finite_number
from servegate.core.results import Run
from servegate.core.versioned import Schema, SchemaVersionError
from servegate.judge.ab import arm_view
from servegate.judge.baselines import group_points, point_sort_key, run_identity
from servegate.judge.evidence import point_slot

# 2: every value with its server start and block, and the night's design (schema 1: values only)
STORE_SCHEMA_VERSION = 2
ACCURACY_METRIC = "gsm8k_accuracy"
_OPTIONAL_TEXT = ("sglang_version", "sglang_commit", "servegate_commit")
_TEXT = ("run_id", "time", "runner_class", "model", "suite", "mode", "metric")


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
    server start and block. Empty ``starts`` / ``blocks`` mean what schema 1 meant (each value its
    own start, block 0), a missing ``design`` is derived from them: all filled in on construction."""

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
    # the run's measured seconds (run.json ``timings``), on the run's first line only
    timings: dict[str, Any] | None = field(default=None, hash=False)
    # the run's components under sglang (servegate.core.stack), written on its first line only
    stack: dict[str, str] | None = field(default=None, hash=False)
    # the point's load (servegate.history.load), on every line of a measured point; None: unknown
    load: dict[str, Any] | None = field(default=None, hash=False)
    # head vs base: the tree ("head", "base") whose server measured it; "" a one-tree run
    arm: str = ""

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
            "values": list(self.values), "starts": list(self.starts), "blocks": list(self.blocks),
            "design": self.design.to_json(), "sglang_version": self.sglang_version,
            "sglang_commit": self.sglang_commit, "servegate_commit": self.servegate_commit,
        }
        optional = {"n": self.n, "timings": self.timings, "stack": self.stack, "load": self.load}
        data.update({key: value for key, value in optional.items() if value is not None})
        if self.arm:
            data["arm"] = self.arm
        return data

    def components(self) -> dict[str, str]:
        """Every recorded component of the night: sglang's version and commit, then its stack."""
        own = {"sglang": self.sglang_version, "sglang_commit": self.sglang_commit}
        return {**{k: v for k, v in own.items() if v}, **(self.stack or {})}

    @property
    def hardware(self) -> str | None:
        """The run's hardware digest (in its ``stack``); None: unknown (stored before)."""
        return (self.stack or {}).get(HARDWARE)

    @property
    def identity(self) -> tuple[str, str, str]:
        """(runner class, model, suite); a head-vs-base tree's lines are a series of their own
        (``premerge:head``), never a one-tree night of the suite."""
        return (self.runner_class, self.model, f"{self.suite}:{self.arm}" if self.arm
                else self.suite)


# ---------------------------------------------------------------- a run's lines


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _with_id(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` plus ``id``: the first 12 hex digits of the sha256 of their sorted JSON."""
    body = {k: v for k, v in fields.items() if k != "id"}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    return {**body, "id": digest[:12]}


def point_load(run: Run, concurrency: int) -> dict[str, Any] | None:
    """The load of ``concurrency``'s points as run.json records it (``load``, ``chunk_size``,
    ``page_size``); None for a run from before run.json recorded it, or an unlisted concurrency."""
    load = run.get("load")
    if not isinstance(load, dict) or concurrency not in (load.get("concurrency") or []):
        return None
    index = list(load["concurrency"]).index(concurrency)
    shaped = load.get("shaped_output_len") or []
    prompts = load.get("num_prompts") or []
    return _with_id({
        "dataset": load.get("dataset"), "input_len": load.get("input_len"),
        "output_len": shaped[index] if index < len(shaped) else load.get("output_len"),
        "num_prompts": prompts[index] if index < len(prompts) else None,
        "range_ratio": load.get("range_ratio"), "chunk_size": run.get("chunk_size"),
        "page_size": run.get("page_size")})


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
    for arm in sorted({str(point.get("arm") or "") for point in run.get("points", [])} or {""}):
        view = arm_view(run, arm) if arm else run       # head vs base: each tree's own lines
        for (mode, concurrency), points in sorted(group_points(view).items(),
                                                  key=lambda kv: point_sort_key(kv[0])):
            slots = [point_slot(point) for point in points]
            names = sorted({name for point in points for name in point.get("metrics", {})})
            load = point_load(run, concurrency)
            for name in names:
                values = [point["metrics"].get(name) for point in points]
                if all(finite_number(v) for v in values):
                    records.append(Record(mode=mode, concurrency=concurrency, metric=name,
                                          values=tuple(float(v) for v in values),
                                          starts=tuple(start for start, _ in slots),
                                          blocks=tuple(block for _, block in slots),
                                          load=load, arm=arm, **common))
        for mode, result in sorted((view.get("accuracy") or {}).items()):
            n, correct = result.get("n"), result.get("correct")
            if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
                continue
            counted = isinstance(correct, int) and not isinstance(correct, bool)
            accuracy: Any = (correct / n if counted and correct is not None
                             else result.get("accuracy"))
            if finite_number(accuracy):
                conc = result.get("concurrency")
                records.append(Record(mode=mode,
                                      concurrency=conc if isinstance(conc, int) else None,
                                      metric=ACCURACY_METRIC, values=(float(accuracy),), n=n,
                                      arm=arm, **common))
    timings = run.get("timings")
    if records and isinstance(timings, dict):
        records[0] = dataclasses.replace(records[0], timings=dict(timings))
    components = kernel_stack.components(fingerprint)
    if fingerprint.get(HARDWARE):
        components[HARDWARE] = str(fingerprint[HARDWARE])
    if records and components:
        records[0] = dataclasses.replace(records[0], stack=components)
    return records


def dumps_records(records: Iterable[Record]) -> str:
    return "".join(json.dumps(r.to_json(), sort_keys=True, allow_nan=False) + "\n"
                   for r in records)


# ---------------------------------------------------------------- reading a line


def _line_v1_to_v2(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """Schema 1 kept ``values`` alone, in repeat order: each value its own server start
    (start = repeat), block 0, as the judge reads a run from before blocks."""
    values = data.get("values")
    count = len(values) if isinstance(values, list) else 0
    return {**data, "starts": list(range(count)), "blocks": [0] * count,
            "design": {"in_server": False, "starts": max(count, 1), "blocks": 1}}


SCHEMA = Schema("history store line", "schema_version", STORE_SCHEMA_VERSION, {1: _line_v1_to_v2})


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


def parse_line(raw: str, path: Path, run_id: str) -> tuple[Record, int] | str:
    """(the Record, the schema version the line was written at), or what is wrong with it
    (``path`` names the file in a schema error; ``run_id`` is the one its file name gives)."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as err:
        return f"not valid JSON ({err.msg} at column {err.colno})"
    if not isinstance(data, dict):
        return f"expected a JSON object, got {type(data).__name__}"
    try:
        data, found = SCHEMA.upgrade(data, path)
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
    if data["run_id"] != run_id:
        return f"run_id {data['run_id']!r} does not match the file name"
    timings = data.get("timings")
    if timings is not None and not isinstance(timings, dict):
        return f"timings must be an object or absent, got {timings!r:.80}"
    stack = data.get("stack")
    if stack is not None and not (isinstance(stack, dict) and all(
            isinstance(k, str) and isinstance(v, str) for k, v in stack.items())):
        return f"stack must be an object of strings or absent, got {stack!r:.80}"
    load = data.get("load")
    if load is not None and not (isinstance(load, dict) and isinstance(load.get("id"), str)):
        return f"load must be an object with a string id or absent, got {load!r:.80}"
    arm = data.get("arm", "")
    if arm not in ("", "head", "base"):
        return f"arm must be head, base or absent, got {arm!r:.40}"
    return Record(run_id=data["run_id"], time=data["time"], runner_class=data["runner_class"],
                  model=data["model"], suite=data["suite"], mode=data["mode"], concurrency=conc,
                  metric=data["metric"], values=tuple(float(v) for v in values),
                  starts=tuple(data["starts"]), blocks=tuple(data["blocks"]), design=design,
                  sglang_version=data.get("sglang_version"), sglang_commit=data.get("sglang_commit"),
                  servegate_commit=data.get("servegate_commit"),
                  n=n if isinstance(n, int) and not isinstance(n, bool) else None,
                  timings=timings, stack=stack, load=load, arm=arm), found
