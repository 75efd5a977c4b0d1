"""Load ``suites/admission.toml`` into the scenario matrix (validated, errors name file and key)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servegate.admission.scenario import (
    EXACT_FILL_MODES,
    MIXES,
    PATHS,
    Scenario,
    ScenarioError,
    mix_scenario,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_MATRIX_KEYS = {"page_sizes": int, "chunk_sizes": int, "mixes": str, "paths": str, "modes": str}
_EXTRA_KEYS = {"page_size": int, "chunk_size": int, "mix": str, "path": str,
               "truncation_align_size": int, "max_prefill_tokens": int}


class SuiteError(ValueError):
    """The admission suite file is invalid; the message names the file and key."""


@dataclass(frozen=True)
class AdmissionSuite:
    path: Path
    scenarios: tuple[Scenario, ...]
    modes: tuple[str, ...]


def _list_of(data: dict[str, Any], key: str, kind: type, where: str) -> list[Any]:
    value = data.get(key)
    if not isinstance(value, list) or not value or not all(
            isinstance(v, kind) and not isinstance(v, bool) for v in value):
        raise SuiteError(f"{where}: '{key}' must be a non-empty list of {kind.__name__}")
    return value


def load_suite(path: Path) -> AdmissionSuite:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError as err:
        raise SuiteError(f"{path}: not found") from err
    except tomllib.TOMLDecodeError as err:
        raise SuiteError(f"{path}: invalid TOML ({err})") from err
    table = data.get("admission")
    if not isinstance(table, dict):
        raise SuiteError(f"{path}: missing [admission] table")
    where = f"{path} [admission]"
    unknown = set(table) - set(_MATRIX_KEYS) - {"extra"}
    if unknown:
        raise SuiteError(f"{where}: unknown key(s) {sorted(unknown)}; "
                         f"expected {sorted([*_MATRIX_KEYS, 'extra'])}")
    lists = {key: _list_of(table, key, kind, where) for key, kind in _MATRIX_KEYS.items()}
    for key, allowed in (("mixes", MIXES), ("paths", PATHS), ("modes", EXACT_FILL_MODES)):
        bad = [v for v in lists[key] if v not in allowed]
        if bad:
            raise SuiteError(f"{where}: '{key}' has unknown {bad}; known: {list(allowed)}")
    scenarios: list[Scenario] = []
    try:
        for page in lists["page_sizes"]:
            for chunk in lists["chunk_sizes"]:
                for mix in lists["mixes"]:
                    for route in lists["paths"]:
                        scenarios.append(mix_scenario(mix, page, chunk, route))
        for index, extra in enumerate(table.get("extra", [])):
            scenarios.append(_extra(extra, f"{where} extra[{index}]"))
        for scenario in scenarios:
            scenario.validate()
    except ScenarioError as err:
        raise SuiteError(f"{where}: {err}") from err
    return AdmissionSuite(path=path, scenarios=tuple(scenarios), modes=tuple(lists["modes"]))


def _extra(entry: Any, where: str) -> Scenario:
    if not isinstance(entry, dict):
        raise SuiteError(f"{where}: must be a table")
    unknown = set(entry) - set(_EXTRA_KEYS)
    if unknown:
        raise SuiteError(f"{where}: unknown key(s) {sorted(unknown)}; expected {sorted(_EXTRA_KEYS)}")
    for key, kind in _EXTRA_KEYS.items():
        if key in entry and not isinstance(entry[key], kind):
            raise SuiteError(f"{where}: '{key}' must be {kind.__name__}, got {entry[key]!r}")
    for key in ("page_size", "chunk_size", "mix", "path"):
        if key not in entry:
            raise SuiteError(f"{where}: missing '{key}'")
    options = {k: entry[k] for k in ("truncation_align_size", "max_prefill_tokens") if k in entry}
    return mix_scenario(entry["mix"], entry["page_size"], entry["chunk_size"], entry["path"],
                        **options)
