"""``servegate admission ab`` without sglang: the scenario-by-scenario comparison rules
(``servegate.admission.ab.compare``: off and on-off-gfx95 gate, ``--expect-change`` honoured) and
bad input refused naming the option. The two real trees' run is
tests/real_sglang/admission/test_admission_ab.py."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from repo_files import REPO_ROOT
from servegate_cli import run_servegate

from servegate.admission.ab import Expectation, compare, invariant_failures

REPO = REPO_ROOT


def _ab(*args: str | Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return run_servegate("admission", "ab", *args, timeout=timeout,
                         env={"SERVEGATE_RUNNER": "cpu"})


# ---- no sglang needed: the comparison and the gate on hand-made suite outputs ----------------

def _suite_json(traces: dict[tuple[str, str], list[int]]) -> dict[str, Any]:
    return {"traces": [{"scenario": sid, "mode": mode, "effective": mode == "forced",
                        "rounds": [{"extend": [n], "tokens": n} for n in lens]}
                       for (sid, mode), lens in traces.items()]}


def test_compare_gates_off_and_on_off_gfx95_and_honours_expect_change() -> None:
    base = _suite_json({("a", "off"): [10, 5], ("a", "on"): [10, 5], ("b", "off"): [7]})
    head = _suite_json({("a", "off"): [10, 6], ("a", "on"): [10, 6], ("b", "off"): [7],
                        ("b", "forced"): [8]})
    rows = {(r.name, r.mode): r for r in compare(base, head, gated_machine=False)}
    assert rows["a", "off"].rounds_moved == ["a [off] round 1: extend [5] -> [6]; tokens 5 -> 6"]
    assert rows["a", "off"].failing and rows["a", "on"].failing
    assert rows["b", "off"].identical is True and not rows["b", "off"].failing
    assert rows["b", "forced"].only_in == "head" and rows["b", "forced"].identical is None
    # On a gated machine (gfx95) `on` may move; `off` may not.
    gated = {(r.name, r.mode): r for r in compare(base, head, gated_machine=True)}
    assert gated["a", "off"].failing and not gated["a", "on"].failing
    expected = {(r.name, r.mode): r for r in compare(base, head, False, (Expectation("a", "off"),))}
    assert not expected["a", "off"].failing and expected["a", "on"].failing
    glob = compare(base, head, False, (Expectation("a*", None),))
    assert not any(r.failing for r in glob)


def test_bad_input_exits_2_naming_the_option(tmp_path: Path) -> None:
    proc = _ab("--base", tmp_path, "--head", tmp_path)
    assert proc.returncode == 2
    assert f"--base {tmp_path}: not an sglang tree" in proc.stderr
    proc = _ab("--base", tmp_path, "--head", tmp_path, "--expect-change", "x:sometimes")
    assert proc.returncode == 2 and "--expect-change" in proc.stderr and "MODE one of" in proc.stderr


def test_the_head_trees_own_invariant_failures_gate_and_the_bases_are_reported() -> None:
    """A head failure gates (marked pre-existing when the base has it too) unless an
    --expect-change covers its scenario and mode; the base's own failures never gate."""
    forced = "p64-c2048-x [forced] round 0: forced batch 2016 tokens, not the chunk 2048"
    leaked = "p8-c256-y [on]: exact fill effective without gfx95 (gate leaked)"
    old = "p1-c64-z [off] round 2: KV offset grew by 70, not the page-ceiled extend + a page"
    got = invariant_failures({"failures": [old, leaked]}, {"failures": [forced, leaked]})
    assert got["failing"] == [forced, leaked]
    assert [(r["pre_existing"], r["expected"]) for r in got["head"]] == [(False, False),
                                                                          (True, False)]
    assert got["base"] == [old, leaked]
    excused = invariant_failures({"failures": []}, {"failures": [forced, leaked]},
                                 (Expectation("p8-*", "on"),))
    assert excused["failing"] == [forced]
    assert invariant_failures({}, {})["failing"] == []


def test_a_ledger_scenario_the_head_cannot_build_fails_unless_the_base_cannot_either() -> None:
    """A head tree whose SWA pools (say) raise lists the scenario under not_built: that is a
    head failure, not a silent "only in base"; one neither tree builds (an older pair) is not."""
    swa = {"scenario": "p64-c2048-swa-ring", "kind": "swa", "why": "AttributeError: no pool"}
    tile = {"scenario": "p64-c2048-tile-budget", "kind": "tile-budget", "why": "ImportError: x"}
    got = invariant_failures({"not_built": [tile]}, {"not_built": [swa, tile]})
    assert got["failing"] == ["p64-c2048-swa-ring [off] ledger scenario not built on the head "
                              "tree, built on the base: AttributeError: no pool"]
    assert invariant_failures({"not_built": [swa]}, {"not_built": [swa]})["failing"] == []
    excused = invariant_failures({}, {"not_built": [swa]}, (Expectation("*swa*", None),))
    assert excused["failing"] == []
