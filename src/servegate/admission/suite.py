"""Load ``suites/admission.toml`` into the scenario matrix (validated, errors name file and key)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from servegate.admission.scenario import (
    EXACT_FILL_MODES,
    MIXES,
    PATHS,
    Scenario,
    ScenarioError,
    mix_scenario,
)
from servegate.config._schema import ConfigError, Field, check_table, load_toml

# The same declarative checker the serving suites and model profiles use.
_TOP = {"admission": Field(dict, required=True)}
_MATRIX = {"page_sizes": Field(list, True, int), "chunk_sizes": Field(list, True, int),
           "mixes": Field(list, True, str), "paths": Field(list, True, str),
           "modes": Field(list, True, str), "extra": Field(list, item=dict)}
_EXTRA = {"page_size": Field(int, True), "chunk_size": Field(int, True), "mix": Field(str, True),
          "path": Field(str, True), "truncation_align_size": Field(int),
          "max_prefill_tokens": Field(int)}


class SuiteError(ConfigError):
    """The admission suite file is invalid; the message names the file and key."""


@dataclass(frozen=True)
class AdmissionSuite:
    path: Path
    scenarios: tuple[Scenario, ...]
    modes: tuple[str, ...]


def load_suite(path: Path) -> AdmissionSuite:
    path = Path(path)
    try:
        table = check_table(path, "admission", check_table(path, "", load_toml(path), _TOP)
                            ["admission"], _MATRIX)
        extras = [check_table(path, f"admission.extra[{i}]", entry, _EXTRA)
                  for i, entry in enumerate(table.get("extra", []))]
    except ConfigError as err:
        raise SuiteError(str(err)) from err
    where = f"{path} [admission]"
    for key, allowed in (("page_sizes", None), ("chunk_sizes", None), ("mixes", MIXES),
                         ("paths", PATHS), ("modes", EXACT_FILL_MODES)):
        if not table[key]:
            raise SuiteError(f"{where}: '{key}' must not be empty")
        bad = [v for v in table[key] if allowed is not None and v not in allowed]
        if bad:
            raise SuiteError(f"{where}: '{key}' has unknown {bad}; known: {list(allowed)}")
    try:
        scenarios = [mix_scenario(mix, page, chunk, route)
                     for page in table["page_sizes"] for chunk in table["chunk_sizes"]
                     for mix in table["mixes"] for route in table["paths"]]
        for extra in extras:
            options = {k: extra[k] for k in ("truncation_align_size", "max_prefill_tokens")
                       if k in extra}
            scenarios.append(mix_scenario(extra["mix"], extra["page_size"], extra["chunk_size"],
                                          extra["path"], **options))
        for scenario in scenarios:
            scenario.validate()
    except ScenarioError as err:
        raise SuiteError(f"{where}: {err}") from err
    return AdmissionSuite(path=path, scenarios=tuple(scenarios), modes=tuple(table["modes"]))
