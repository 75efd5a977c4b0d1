"""Stored baselines: ``baselines/<runner_class>/<model_profile>/<suite>.json``, with provenance.

Per point: every metric's reference value, spread, block values with their starts (the nested
evidence) and a seeded sample of per-request values; accuracy per mode. Keys sorted and number
lists on one line, so a baseline update reads as a short diff."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from servegate.core import hardware, runner_classes
from servegate.core.atomic import write_text
from servegate.core.errors import ServegateError
from servegate.core.metrics import QUANTITIES, finite_number
from servegate.core.paths import BASELINES_DIR, local_baselines_root
from servegate.core.results import MODES, Run, point_slot
from servegate.core.versioned import Schema, SchemaVersionError

# 2: runner_class is a registered GPU model (servegate.core.runner_classes), no longer an architecture.
# 3: blocks named as blocks: every metric's ``blocks`` (values) and ``starts`` (the start of each)
#    with ``n_blocks``, where 2 had ``repeats`` / ``n_repeats`` (and starts only in-server).
BASELINE_SCHEMA_VERSION = 3
REQUEST_SAMPLE_CAP = 512
_SECRET = re.compile(r"(hf_[A-Za-z0-9]{8,}|(TOKEN|SECRET|PASSWORD|KEY)=\S+)", re.IGNORECASE)


class BaselineError(ServegateError, ValueError):
    """A baseline file is missing or malformed; the message names file and field."""


class BaselineMismatchError(BaselineError):
    """The baseline belongs to another runner class / model profile / suite than the run."""


def baseline_path(runner_class: str, model_profile: str, suite: str,
                  root: Path | None = None) -> Path:
    """``baselines/<runner_class>/<model_profile>/<suite>.json``."""
    for name, value in (("runner_class", runner_class), ("model_profile", model_profile),
                        ("suite", suite)):
        if not value or "/" in value or value.startswith("."):
            raise BaselineError(f"run.json: {name} {value!r} cannot name a baseline file")
    return (root or BASELINES_DIR) / runner_class / model_profile / f"{suite}.json"


def is_cpu_tier(run: Run) -> bool:
    """A run of a class without a real GPU (``cpu``, an emulated class): the CPU is its
    hardware, so its baseline is this machine's own (:func:`local_baseline_path`)."""
    runner = run_identity(run)[0]
    return runner in runner_classes.REGISTRY and not runner_classes.is_gpu(runner)


def local_baseline_path(run: Run) -> Path | None:
    """A CPU-tier run's machine-local baseline: ``<local baselines>/<hardware>/<runner_class>/
    <model_profile>/<suite>.json``; None off the CPU tier or for unknown hardware."""
    digest = hardware.of(run.get("fingerprint"))
    if not is_cpu_tier(run) or digest is None:
        return None
    return baseline_path(*run_identity(run), root=local_baselines_root() / digest)


def stored_baseline_path(run: Run, root: Path | None = None) -> Path:
    """The baseline a run is judged against by default: this machine's own (CPU tier) when
    there is one, else the stored file for its identity (``root``: the repository's)."""
    local = local_baseline_path(run)
    if local is not None and local.is_file():
        return local
    return baseline_path(*run_identity(run), root=root)


def run_identity(run: Run) -> tuple[str, str, str]:
    """(runner_class, model_profile, suite) of a run, falling back to its fingerprint."""
    runner = run.get("runner_class") or run.get("fingerprint", {}).get("runner_class", "")
    return str(runner), str(run.get("model_profile", "")), str(run.get("suite", ""))


def _scrub(text: str) -> str:
    return _SECRET.sub("<redacted>", text)


def group_points(run: Run) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """Points of a run grouped by (mode, concurrency), each group in (start, block) order."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for point in run.get("points", []):
        groups[(point["mode"], int(point["concurrency"]))].append(dict(point))
    return {key: sorted(val, key=point_slot) for key, val in groups.items()}


def point_sort_key(key: tuple[str, int]) -> tuple[int, int]:
    mode, concurrency = key
    return (MODES.index(mode) if mode in MODES else len(MODES), concurrency)


def _metric_entry(values: list[float], starts: list[int]) -> dict[str, Any]:
    array = np.asarray(values, dtype=float)
    mean = float(array.mean())
    spread = float(array.std(ddof=1)) if len(array) > 1 else None
    return {
        "value": round(mean, 6),
        "spread": None if spread is None else round(spread, 6),
        "cv": None if spread is None or mean == 0 else round(spread / abs(mean), 6),
        "n_blocks": len(array),
        "blocks": [round(float(v), 6) for v in array],
        "starts": [int(s) for s in starts],
    }


def _request_sample(points: list[dict[str, Any]], key: str, cap: int,
                    rng: np.random.Generator) -> tuple[list[float], int]:
    pooled = [float(v) for p in points for v in p.get("requests", {}).get(key, [])
              if finite_number(v)]
    total = len(pooled)
    if total > cap:
        keep = np.sort(rng.choice(total, size=cap, replace=False))
        pooled = [pooled[i] for i in keep]
    return [round(v, 3) for v in pooled], total


def baseline_from_run(run: Run, run_dir: Path, *, forced_reasons: list[str] | None = None,
                      request_cap: int = REQUEST_SAMPLE_CAP, seed: int = 0,
                      created_by: str = "servegate update-baselines") -> dict[str, Any]:
    """Build the baseline document for a run (pure; nothing is written)."""
    runner, model, suite = run_identity(run)
    rng = np.random.default_rng(seed)
    points_out = []
    for key, points in sorted(group_points(run).items(), key=lambda kv: point_sort_key(kv[0])):
        metric_values: dict[str, list[float]] = defaultdict(list)
        metric_starts: dict[str, list[int]] = defaultdict(list)
        for point in points:
            for name, value in point.get("metrics", {}).items():
                if finite_number(value):
                    metric_values[name].append(float(value))
                    metric_starts[name].append(point_slot(point)[0])
        requests: dict[str, Any] = {}
        for req_key in QUANTITIES:
            sample, total = _request_sample(points, req_key, request_cap, rng)
            if sample:
                requests[req_key] = sample
                requests[f"n_{req_key}"] = total
        points_out.append({"mode": key[0], "concurrency": key[1], "requests": requests,
                           "metrics": {name: _metric_entry(vals, metric_starts[name])
                                       for name, vals in metric_values.items()}})
    accuracy = {}
    for mode, result in (run.get("accuracy") or {}).items():
        if finite_number(result.get("n")) and finite_number(result.get("correct")):
            accuracy[mode] = {"n": int(result["n"]), "correct": int(result["correct"]),
                              "accuracy": round(int(result["correct"]) / int(result["n"]), 6)
                              if result["n"] else None}
            outcomes = read_outcomes(run_dir, mode)
            if outcomes is not None and len(outcomes) == accuracy[mode]["n"] and \
                    sum(outcomes.values()) == accuracy[mode]["correct"]:
                accuracy[mode]["outcomes"] = encode_outcomes(outcomes)
    fingerprint = dict(run.get("fingerprint") or {})
    design = {"design": {k: v for k, v in run["design"].items()
                         if k in ("in_server", "starts", "blocks", "unit", "start_halves")}} \
        if run.get("design") else {}
    return {
        **design,
        "schema_version": BASELINE_SCHEMA_VERSION,
        "runner_class": runner,
        "model_profile": model,
        "suite": suite,
        "chunk_size": run.get("chunk_size"),
        "page_size": run.get("page_size"),
        "provenance": {
            "created_at": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat(),
            "created_by": created_by,
            "source_run": str(run_dir),
            "run_started_at": run.get("started_at"),
            "run_finished_at": run.get("finished_at"),
            "run_complete": bool(run.get("complete")),
            "command": [_scrub(str(arg)) for arg in run.get("command", [])],
            "sglang": fingerprint.get("sglang"),
            "sglang_commit": fingerprint.get("sglang_commit"),
            "fingerprint": {k: _scrub(str(v)) if isinstance(v, str) else v
                            for k, v in fingerprint.items()},
            "forced": bool(forced_reasons),
            "forced_reasons": list(forced_reasons or []),
        },
        "points": points_out,
        "accuracy": accuracy,
    }


def read_outcomes(run_dir: Path, mode: str) -> dict[int, bool] | None:
    """Per-question correctness of one mode's GSM8K records (None when there are none)."""
    from servegate.accuracy.report import RecordsError, read_records

    try:
        return {qid: bool(rec["correct"]) for qid, rec in read_records(run_dir, mode).items()}
    except RecordsError:
        return None


def encode_outcomes(outcomes: dict[int, bool]) -> dict[str, Any]:
    """``{"ids": [sorted question ids], "correct": "0110..."}``: one character per question,
    so 1319 questions cost ~7 kB and pair with a later run on the same ids."""
    ids = sorted(outcomes)
    return {"ids": ids, "correct": "".join("1" if outcomes[i] else "0" for i in ids)}


def decode_outcomes(entry: dict[str, Any]) -> dict[int, bool]:
    return {int(i): c == "1" for i, c in zip(entry["ids"], entry["correct"], strict=True)}


_NUMBER = r"-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|null"
_NUMBER_LIST = re.compile(rf"\[\s*\n\s*((?:{_NUMBER})(?:,\s*\n\s*(?:{_NUMBER}))*)\s*\n\s*\]")


def dumps_baseline(data: dict[str, Any]) -> str:
    """Sorted keys, 2-space indent, number lists on one line (short diffs in review)."""
    text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
    text = _NUMBER_LIST.sub(lambda m: "[" + re.sub(r",\s*\n\s*", ", ", m.group(1)) + "]", text)
    return text + "\n"


def write_baseline(path: Path, data: dict[str, Any]) -> None:
    """Validate then write atomically (a crash never leaves half a baseline)."""
    validate_baseline(data, Path(path))
    write_text(Path(path), dumps_baseline(data))


def _require(cond: bool, path: Path, field: str, expected: str, got: Any) -> None:
    if not cond:
        raise BaselineError(f"{path}: {field} must be {expected}, got {got!r}")


def validate_baseline(data: Any, path: Path) -> dict[str, Any]:
    """Check the document's shape; every error names the file and the field path."""
    _require(isinstance(data, dict), path, "top level", "a JSON object", type(data).__name__)
    _require(data.get("schema_version") == BASELINE_SCHEMA_VERSION, path, "schema_version",
             str(BASELINE_SCHEMA_VERSION), data.get("schema_version"))
    for key in ("runner_class", "model_profile", "suite"):
        _require(isinstance(data.get(key), str) and bool(data.get(key)), path, key,
                 "a non-empty string", data.get(key))
    prov = data.get("provenance")
    _require(isinstance(prov, dict), path, "provenance", "an object", prov)
    for key in ("created_at", "source_run"):
        _require(isinstance(prov.get(key), str), path, f"provenance.{key}", "a string",
                 prov.get(key))
    points = data.get("points")
    _require(isinstance(points, list), path, "points", "a list", points)
    seen = set()
    for i, point in enumerate(points):
        where = f"points[{i}]"
        _require(isinstance(point, dict), path, where, "an object", point)
        _require(point.get("mode") in MODES, path, f"{where}.mode", f"one of {MODES}",
                 point.get("mode"))
        conc = point.get("concurrency")
        _require(isinstance(conc, int) and not isinstance(conc, bool) and conc >= 1, path,
                 f"{where}.concurrency", "an integer >= 1", conc)
        _require((point["mode"], conc) not in seen, path, where, "a unique (mode, concurrency)",
                 (point["mode"], conc))
        seen.add((point["mode"], conc))
        metrics = point.get("metrics")
        _require(isinstance(metrics, dict), path, f"{where}.metrics", "an object", metrics)
        for name, entry in metrics.items():
            mwhere = f"{where}.metrics.{name}"
            _require(isinstance(entry, dict), path, mwhere, "an object", entry)
            _require(finite_number(entry.get("value")), path, f"{mwhere}.value", "a number",
                     entry.get("value"))
            n = entry.get("n_blocks")
            _require(isinstance(n, int) and not isinstance(n, bool) and n >= 1, path,
                     f"{mwhere}.n_blocks", "an integer >= 1", n)
            blocks = entry.get("blocks")
            _require(isinstance(blocks, list) and len(blocks) == n
                     and all(finite_number(v) for v in blocks), path, f"{mwhere}.blocks",
                     f"a list of {n} numbers (one per block)", blocks)
            _require(isinstance(entry.get("starts"), list) and len(entry["starts"]) == n
                     and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                             for v in entry["starts"]), path, f"{mwhere}.starts",
                     f"a list of {n} start indexes (the start of each block)",
                     entry.get("starts"))
            spread = entry.get("spread")
            _require(spread is None or finite_number(spread), path, f"{mwhere}.spread",
                     "a number or null", spread)
        requests = point.get("requests", {})
        _require(isinstance(requests, dict), path, f"{where}.requests", "an object", requests)
        for key in QUANTITIES:
            if key in requests:
                vals = requests[key]
                _require(isinstance(vals, list) and all(finite_number(v) for v in vals), path,
                         f"{where}.requests.{key}", "a list of numbers", vals)
    accuracy = data.get("accuracy", {})
    _require(isinstance(accuracy, dict), path, "accuracy", "an object", accuracy)
    for mode, entry in accuracy.items():
        awhere = f"accuracy.{mode}"
        _require(isinstance(entry, dict), path, awhere, "an object", entry)
        for key in ("n", "correct"):
            _require(isinstance(entry.get(key), int) and entry[key] >= 0, path,
                     f"{awhere}.{key}", "an integer >= 0", entry.get(key))
        _require(entry["correct"] <= entry["n"], path, f"{awhere}.correct", "<= n",
                 entry["correct"])
        if "outcomes" in entry:
            _validate_outcomes(entry, path, f"{awhere}.outcomes")
    return data


def _validate_outcomes(entry: dict[str, Any], path: Path, where: str) -> None:
    out = entry["outcomes"]
    _require(isinstance(out, dict), path, where, "an object with ids and correct", out)
    ids, correct = out.get("ids"), out.get("correct")
    _require(isinstance(ids, list) and len(ids) == entry["n"]
             and all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
             and len(set(ids)) == len(ids), path, f"{where}.ids",
             f"{entry['n']} unique integer question ids", ids if not isinstance(ids, list)
             else f"{len(ids)} ids")
    _require(isinstance(correct, str) and len(correct) == entry["n"]
             and set(correct) <= {"0", "1"}, path, f"{where}.correct",
             f"a string of {entry['n']} '0'/'1' characters", correct)
    _require(correct.count("1") == entry["correct"], path, f"{where}.correct",
             f"{entry['correct']} ones (accuracy correct)", correct.count("1"))


def _baseline_v1_to_v2(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """v1 keyed baselines by architecture (gfx95, gfx942, nvidia); v2 by GPU model."""
    runner = data.get("runner_class")
    if runner in (None, "cpu"):
        return data
    fingerprint = (data.get("provenance") or {}).get("fingerprint") or {}
    try:
        model = runner_classes.from_schema_1(str(runner), fingerprint).name
    except runner_classes.UnknownRunner as err:
        raise BaselineError(f"{path}: runner_class {runner!r} (schema 1) cannot be named as a "
                            f"GPU model from provenance.fingerprint: {err}") from err
    return {**data, "runner_class": model}


def _v2_starts(entry: dict[str, Any], point: dict[str, Any], n: int) -> Any:
    """The start of each of a v2 metric's ``n`` values: its own ``starts`` (in-server), else the
    point's ``starts`` or repeat numbers where they count ``n`` (before blocks a repeat was its
    own start), else one start per value in order (a repeat lacked the metric)."""
    if "starts" in entry:
        return entry["starts"]
    for candidate in (point.get("starts"), point.get("repeats")):
        if isinstance(candidate, list) and len(candidate) == n:
            return candidate
    return list(range(n))


def _v2_metric(entry: dict[str, Any], point: dict[str, Any]) -> dict[str, Any]:
    """A v2 metric entry renamed: ``repeats`` -> ``blocks``, ``n_repeats`` -> ``n_blocks`` (as
    written: validation still compares it with the values), each value's start beside it."""
    values = entry.get("repeats")
    starts = _v2_starts(entry, point, len(values) if isinstance(values, list) else 0)
    rest = {k: v for k, v in entry.items() if k not in ("repeats", "n_repeats", "starts")}
    return {**rest, "n_blocks": entry.get("n_repeats"), "blocks": values, "starts": starts}


def _baseline_v2_to_v3(data: dict[str, Any], _path: Path) -> dict[str, Any]:
    """v2 kept every block under ``repeats`` (``n_repeats``), starts only in-server: each value
    becomes a block of its start (a pre-blocks repeat: its own start). Values are never coerced:
    a malformed v2 file fails validation at the field, not in here."""
    points = data.get("points")
    if not isinstance(points, list):
        return data
    upgraded = []
    for point in points:
        if isinstance(point, dict) and isinstance(point.get("metrics"), dict):
            metrics = {name: _v2_metric(entry, point) if isinstance(entry, dict) else entry
                       for name, entry in point["metrics"].items()}
            point = {**{k: v for k, v in point.items() if k not in ("repeats", "starts")},
                     "metrics": metrics}
        upgraded.append(point)
    return {**data, "points": upgraded}


BASELINE_SCHEMA = Schema("baseline", "schema_version", BASELINE_SCHEMA_VERSION,
                         {1: _baseline_v1_to_v2, 2: _baseline_v2_to_v3})


def upgrade_baseline(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """A baseline document of any known schema, validated at the current one (e.g. a rolling
    ``history:N`` document built in memory)."""
    try:
        upgraded, _ = BASELINE_SCHEMA.upgrade(data, path)
    except SchemaVersionError as err:
        raise BaselineError(str(err)) from err
    return validate_baseline(upgraded, path)


def read_baseline(path: Path) -> tuple[dict[str, Any], int]:
    """(the validated document at the current schema, the version the file has)."""
    path = Path(path)
    if not path.is_file():
        raise BaselineError(f"{path}: baseline file not found")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise BaselineError(f"{path}: not valid JSON ({err})") from err
    try:
        upgraded, found = BASELINE_SCHEMA.upgrade(data, path)
    except SchemaVersionError as err:
        raise BaselineError(str(err)) from err
    return validate_baseline(upgraded, path), found


def load_baseline(path: Path) -> dict[str, Any]:
    """Read a baseline file (an older schema is upgraded in memory) and validate it."""
    return read_baseline(path)[0]


def ensure_matches(baseline: dict[str, Any], path: Path, run: Run, run_label: str) -> None:
    """A baseline for another runner class / model profile / suite is an error naming both."""
    runner, model, suite = run_identity(run)
    mismatches = [f"{field} {baseline[field]!r} (baseline {path}) vs {mine!r} (run {run_label})"
                  for field, mine in (("runner_class", runner), ("model_profile", model),
                                      ("suite", suite)) if baseline.get(field) != mine]
    if mismatches:
        raise BaselineMismatchError("baseline does not belong to this run: "
                                    + "; ".join(mismatches))
