"""Golden admission traces under ``baselines/admission/``: one file per prompt mix.

A stored trace pins what sglang's admission decided for each scenario and mode, so a future
sglang that redefines the budget semantics shows up as a readable diff (scenario, round,
old -> new) instead of a silent change. Files keep one round per line so reviews read well.
"""

from __future__ import annotations

import datetime as dt
import json
import platform
from collections import defaultdict
from pathlib import Path
from typing import Any

from servegate.admission.replay import Trace, _ledger_keys
from servegate.core import atomic
from servegate.core.errors import ServegateError
from servegate.core.versioned import Schema, SchemaVersionError

GOLDEN_SCHEMA = 1
GOLDEN_FILE_SCHEMA = Schema("golden trace", "schema", GOLDEN_SCHEMA, {})


class GoldenError(ServegateError, ValueError):
    """A golden file is missing or malformed; the message names the file and field."""


def round_record(trace: Trace) -> list[dict[str, Any]]:
    return [
        {"extend": r.extend_lens, "prefix": [a.prefix_len for a in r.admissions],
         "kv": [a.kv_reserved for a in r.admissions], "tokens": r.batch_tokens,
         "saturated": r.saturated, "rem_chunk": r.rem_chunk_tokens,
         "rem_input": r.rem_input_tokens, "stop": r.stop, **_ledger_keys(r)}
        for r in trace.rounds
    ]


def _render(provenance: dict[str, Any], scenarios: dict[str, dict[str, Any]]) -> str:
    """JSON with sorted keys and one round per line (valid JSON, diff-friendly)."""
    lines = ["{", f'  "provenance": {json.dumps(provenance, sort_keys=True)},',
             f'  "schema": {GOLDEN_SCHEMA},', '  "scenarios": {']
    ids = sorted(scenarios)
    for i, sid in enumerate(ids):
        lines.append(f"    {json.dumps(sid)}: {{")
        modes = sorted(scenarios[sid])
        for j, mode in enumerate(modes):
            entry = scenarios[sid][mode]
            lines.append(f'      {json.dumps(mode)}: {{"effective": '
                         f'{json.dumps(entry["effective"])}, "rounds": [')
            rounds = entry["rounds"]
            for k, rnd in enumerate(rounds):
                comma = "," if k < len(rounds) - 1 else ""
                lines.append(f"        {json.dumps(rnd, sort_keys=True)}{comma}")
            lines.append("      ]}" + ("," if j < len(modes) - 1 else ""))
        lines.append("    }" + ("," if i < len(ids) - 1 else ""))
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


def write_golden(directory: Path, traces: list[Trace], sglang_version: str,
                 command: list[str]) -> list[Path]:
    """Rewrite every mix file atomically from ``traces``."""
    by_mix: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for trace in traces:
        by_mix[trace.scenario.mix].setdefault(trace.scenario.scenario_id, {})[trace.mode] = entry(trace)
    provenance = {
        "sglang_version": sglang_version,
        "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(command),
        "host": platform.node(),
        "python": platform.python_version(),
    }
    written = []
    for mix, scenarios in sorted(by_mix.items()):
        path = Path(directory) / f"{mix}.json"
        atomic.write_text(path, _render(provenance, scenarios))
        written.append(path)
    return written


def load_golden(directory: Path) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """All stored traces keyed by scenario id, plus the provenance of each file."""
    directory = Path(directory)
    files = sorted(directory.glob("*.json"))
    if not files:
        raise GoldenError(
            f"{directory}: no golden traces; create them with `nox -s admission -- --update`")
    scenarios: dict[str, dict[str, Any]] = {}
    provenance: dict[str, Any] = {}
    for path in files:
        data = read_golden_file(path)
        scenarios.update(data["scenarios"])
        provenance[path.name] = data.get("provenance", {})
    return scenarios, provenance


def read_golden_file(path: Path) -> dict[str, Any]:
    """One golden trace file, through the versioned loader (an older schema is upgraded)."""
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as err:
        raise GoldenError(f"{path}: not valid JSON ({err})") from err
    try:
        data, _ = GOLDEN_FILE_SCHEMA.upgrade(data, Path(path))
    except SchemaVersionError as err:
        raise GoldenError(str(err)) from err
    if not isinstance(data.get("scenarios"), dict):
        raise GoldenError(f"{path}: 'scenarios' must be an object")
    for sid, modes in data["scenarios"].items():
        if not isinstance(modes, dict) or not all(
                isinstance(m, dict) and isinstance(m.get("rounds"), list)
                for m in modes.values()):
            raise GoldenError(f"{path}: scenarios.{sid}: each mode needs a 'rounds' list")
    return data


def diff_traces(golden: dict[str, dict[str, Any]], traces: list[Trace]) -> list[str]:
    """Readable differences: scenario [mode] round N: field old -> new."""
    diffs: list[str] = []
    for trace in traces:
        sid, mode = trace.scenario.scenario_id, trace.mode
        stored = golden.get(sid, {}).get(mode)
        if stored is None:
            diffs.append(f"{sid} [{mode}]: not in the golden traces (new scenario?)")
            continue
        diffs += diff_entry(sid, mode, stored, entry(trace))
    return diffs


def entry(trace: Trace) -> dict[str, Any]:
    """One scenario and mode as stored: what ``diff_entry`` compares."""
    return {"effective": trace.effective, "rounds": round_record(trace)}


def diff_entry(sid: str, mode: str, old_entry: dict[str, Any], new_entry: dict[str, Any]) -> list[str]:
    """``scenario [mode] round N: field old -> new`` for every round that moved (golden or A/B)."""
    diffs: list[str] = []
    if old_entry.get("effective") != new_entry.get("effective"):
        diffs.append(f"{sid} [{mode}]: effective {old_entry.get('effective')} -> "
                     f"{new_entry.get('effective')}")
    old_rounds, new_rounds = old_entry["rounds"], new_entry["rounds"]
    for index in range(max(len(old_rounds), len(new_rounds))):
        old = old_rounds[index] if index < len(old_rounds) else None
        new = new_rounds[index] if index < len(new_rounds) else None
        if old == new:
            continue
        if old is None or new is None:
            diffs.append(f"{sid} [{mode}] round {index}: {old} -> {new}")
            continue
        changed = [f"{key} {old.get(key)} -> {new.get(key)}"
                   for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]
        diffs.append(f"{sid} [{mode}] round {index}: " + "; ".join(changed))
    return diffs
