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

from servegate.admission.ab import Expectation, compare, invariant_failures, print_table, summary

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


# ---- why a scenario was not replayed: named per tree, in the rows, the JSON and the table ------

SWA_WHY = ("TypeError: CacheInitParams.__init__() got an unexpected keyword argument "
           "'swa_gates_prefix_match'\n  (raised in servegate's SWA pools)")


def _one_sided_pair(gateless_base: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
    """A base that could not build the SWA ledger scenario (0.5.22's shape) or, gateless, ran only
    ``off`` (0.5.19's); the head replayed everything."""
    base_traces = {("m", "off"): [8], ("swa", "off"): [4]}
    head_traces = {("m", "off"): [8], ("m", "forced"): [9], ("swa", "off"): [4],
                   ("swa", "forced"): [4], ("ledger-swa", "off"): [3],
                   ("ledger-swa", "forced"): [3]}
    if not gateless_base:
        base_traces[("m", "forced")] = [9]
        base_traces[("swa", "forced")] = [4]
    base = _suite_json(base_traces) | {
        "sglang_version": "0.5.19" if gateless_base else "0.5.22",
        "sglang_src": {"has_gate": not gateless_base},
        "modes": ["off"] if gateless_base else ["off", "forced"],
        "not_built": [{"scenario": "ledger-swa", "kind": "swa", "why": SWA_WHY},
                      {"kind": "mamba", "what": "no scenario key: a general limit"}]}
    head = _suite_json(head_traces) | {"modes": ["off", "forced"], "not_built": []}
    return base, head


def test_a_scenario_one_tree_did_not_replay_carries_that_trees_reason() -> None:
    base, head = _one_sided_pair()
    rows = {(r.name, r.mode): r for r in compare(base, head, gated_machine=False)}
    for mode in ("off", "forced"):
        row = rows["ledger-swa", mode]
        assert (row.only_in, row.identical) == ("head", None)
        # the first line of the error the base's ledger scenario raised, nothing after it
        assert row.to_json()["not_replayed"] == {
            "tree": "base", "reason": "TypeError: CacheInitParams.__init__() got an unexpected "
                                      "keyword argument 'swa_gates_prefix_match'"}
    assert "not_replayed" not in rows["m", "off"].to_json()
    # the other way round: a scenario only the base replayed names the head's reason
    flipped = {(r.name, r.mode): r for r in compare(head, base, gated_machine=False)}
    assert flipped["ledger-swa", "off"].to_json()["not_replayed"]["tree"] == "head"


def test_a_mode_a_gateless_tree_cannot_run_names_the_missing_gate() -> None:
    base, head = _one_sided_pair(gateless_base=True)
    rows = {(r.name, r.mode): r for r in compare(base, head, gated_machine=False)}
    assert rows["m", "forced"].reason == (
        "mode forced not run: sglang 0.5.19 has no exact-fill gate "
        "(schedule_policy._use_exact_chunk_fill, sglang >= 0.5.20)")
    assert rows["ledger-swa", "forced"].reason.startswith("TypeError: CacheInitParams")
    assert all(r.reason for r in rows.values() if r.only_in)


def _table(base: dict[str, Any], head: dict[str, Any], capsys: Any) -> str:
    rows = compare(base, head, gated_machine=False)
    side = {"version": "x", "commit": None}
    print_table({"base": side, "head": side, "summary": summary(rows)}, rows)
    return capsys.readouterr().out


def test_the_table_lists_each_one_sided_scenario_with_the_reason(capsys: Any) -> None:
    out = _table(*_one_sided_pair(), capsys)
    line = next(line for line in out.splitlines() if "ledger-swa" in line)
    assert "off/forced" in line and "only in head" in line
    assert "not replayed on base: TypeError: CacheInitParams.__init__() got an unexpected" in out
    assert "(2 scenarios)" in out and "identical" in out       # m and swa, per mode


def test_the_table_counts_many_scenarios_sharing_one_reason(capsys: Any) -> None:
    base, head = _one_sided_pair(gateless_base=True)
    for index in range(12):
        head["traces"].append({"scenario": f"s{index}", "mode": "forced", "effective": True,
                               "rounds": []})
        base["traces"].append({"scenario": f"s{index}", "mode": "off", "effective": False,
                               "rounds": []})
        head["traces"].append(base["traces"][-1])
    out = _table(base, head, capsys)
    assert "(14 scenarios)" in out and "s11" not in out        # 12 + m + swa share the reason
    assert "not replayed on base: mode forced not run: sglang 0.5.19 has no exact-fill gate" in out
    assert "ledger-swa" in out                                  # its own reason: listed apart
