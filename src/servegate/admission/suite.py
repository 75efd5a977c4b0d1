"""Load ``suites/admission.toml`` into the scenario matrix (validated, errors name file and key)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servegate.admission.ledger_spec import LEDGER_KINDS, LedgerSpec
from servegate.admission.scenario import (
    EXACT_FILL_MODES,
    MIXES,
    PATHS,
    Prompt,
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
_EXTRA = {"page_size": Field(int, True), "chunk_size": Field(int, True), "mix": Field(str),
          "path": Field(str, True), "truncation_align_size": Field(int),
          "max_prefill_tokens": Field(int),
          # ledger scenarios (issue 31): a kind, its own prompts, the budget or pool it replays
          "kind": Field(str), "prompt_lens": Field(list, item=int), "tile_budget": Field(int),
          "tile_budget_mode": Field(str), "sliding_window": Field(int),
          "swa_pool_tokens": Field(int), "swa_ring": Field(bool), "dllm_block_size": Field(int)}
_LEDGER_KEYS = ("tile_budget", "tile_budget_mode", "sliding_window", "swa_pool_tokens",
                "swa_ring", "dllm_block_size")


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
        for i, extra in enumerate(extras):
            scenarios.append(_extra_scenario(f"extra[{i}]", extra))
        for scenario in scenarios:
            scenario.validate()
    except ScenarioError as err:
        raise SuiteError(f"{where}: {err}") from err
    return AdmissionSuite(path=path, scenarios=tuple(scenarios), modes=tuple(table["modes"]))


def _extra_scenario(where: str, extra: dict[str, Any]) -> Scenario:
    """A named mix with alignment options, or (``kind`` set) a ledger scenario with its prompts."""
    options = {k: extra[k] for k in ("truncation_align_size", "max_prefill_tokens") if k in extra}
    ledger_keys = [k for k in (*_LEDGER_KEYS, "prompt_lens") if k in extra]
    if "kind" not in extra:
        if "mix" not in extra:
            raise ScenarioError(f"{where}: 'mix' is required (or 'kind' for a ledger scenario)")
        if ledger_keys:
            raise ScenarioError(f"{where}: {ledger_keys} need 'kind' (one of {list(LEDGER_KINDS)})")
        return mix_scenario(extra["mix"], extra["page_size"], extra["chunk_size"], extra["path"],
                            **options)
    if "mix" in extra:
        raise ScenarioError(f"{where}: a ledger scenario ('kind') takes 'prompt_lens', not 'mix'")
    lens = extra.get("prompt_lens")
    if not lens:
        raise ScenarioError(f"{where}: 'prompt_lens' is required with 'kind'")
    if str(extra["path"]) not in ("radix", "no-radix"):
        raise ScenarioError(f"{where}: 'path' must be radix or no-radix for a ledger scenario")
    spec = LedgerSpec(kind=extra["kind"],
                      **{k: extra[k] for k in _LEDGER_KEYS if k in extra})
    return Scenario(page_size=extra["page_size"], chunk_size=extra["chunk_size"],
                    prompts=tuple(Prompt(n) for n in lens),
                    mix=spec.kind, radix=extra["path"] == "radix", ledger=spec, **options)
