"""Replay and check a suite's scenarios: the plain matrix and the ledger scenarios.

Ledger scenarios run in ``off`` and ``forced`` (``on`` equals ``off`` off gfx95; the matrix
checks that) and are checked by their ledger invariants. One this tree cannot build (an older
sglang without the tile budget, SWA or unified mamba pools) is listed with the reason instead of
stopping the suite, so ``admission ab`` still compares the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from servegate.admission import checks
from servegate.admission.ledger_checks import LedgerReport, check_ledger
from servegate.admission.ledger_replay import replay_ledger
from servegate.admission.replay import Sglang, Trace, replay
from servegate.admission.scenario import Scenario, ScenarioError

LEDGER_MODES: tuple[str, ...] = ("off", "forced")


@dataclass
class MatrixResult:
    traces: list[Trace] = field(default_factory=list)
    checked: checks.CheckResult = field(default_factory=checks.CheckResult)
    ledger: list[LedgerReport] = field(default_factory=list)
    not_built: list[dict[str, Any]] = field(default_factory=list)


def run_matrix(scenarios: tuple[Scenario, ...], modes: tuple[str, ...] | list[str],
               sg: Sglang) -> MatrixResult:
    out = MatrixResult()
    for scenario in scenarios:
        if scenario.ledger is None:
            per_mode = {mode: replay(scenario, mode, sg) for mode in modes}
            for trace in per_mode.values():
                out.checked.extend(checks.check_trace(trace))
            out.checked.extend(checks.check_modes(per_mode))
            out.traces += per_mode.values()
            continue
        ledger_modes = [m for m in LEDGER_MODES if m in modes]
        if not ledger_modes:
            continue
        try:
            per_mode = {mode: replay_ledger(scenario, mode, sg) for mode in ledger_modes}
        except (ScenarioError, ImportError, AttributeError, TypeError) as err:
            # an older tree without these pools or budgets (0.5.20 names them differently)
            out.not_built.append({"scenario": scenario.scenario_id, "kind": scenario.ledger.kind,
                                  "why": f"{type(err).__name__}: {err}"})
            continue
        report = check_ledger(per_mode)
        out.ledger.append(report)
        out.checked.failures += report.failures
        out.checked.findings += [f.detail for f in report.findings]
        out.traces += per_mode.values()
    return out
