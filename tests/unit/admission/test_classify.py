"""``servegate.admission.classify``: a candidate tree against a good one by the admission stage
alone (what a bisect step asks first), on hand-made suite outputs compared by the real
``admission ab`` code. The real trees' run is the bisect's (tests/real_sglang/serving/test_bisect_e2e.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from servegate.admission.ab import AbError, compare, invariant_failures
from servegate.admission.classify import (
    DOES_NOT_IMPORT,
    IDENTICAL,
    INVARIANT_FAILED,
    MOVED,
    classify,
    classify_tree,
)
from servegate.serve.trees import TreeError

FAILURE = ("p64-c2048-x [forced] round 0: exact-fill-fills-chunk: saturated forced batch is "
           "2047 tokens, expected exactly the chunk size 2048")


def _suite(traces: dict[tuple[str, str], list[int]], **extra: Any) -> dict[str, Any]:
    return {"traces": [{"scenario": sid, "mode": mode, "effective": mode == "forced",
                        "rounds": [{"extend": [n], "tokens": n} for n in lens]}
                       for (sid, mode), lens in traces.items()], **extra}


def _ab(good: dict[str, Any], candidate: dict[str, Any]) -> dict[str, Any]:
    """The parts of ``admission ab --json`` classify reads, built by ab's own code."""
    rows = compare(good, candidate, gated_machine=False)
    return {"scenarios": [row.to_json() for row in rows],
            "head_invariant_failures": invariant_failures(good, candidate)["head"]}


GOOD = {("a", "off"): [2048, 10], ("a", "forced"): [2048, 10], ("b", "off"): [7]}


def test_a_candidate_replaying_the_same_traces_is_identical_and_left_to_serving() -> None:
    got = classify(_ab(_suite(GOOD), _suite(GOOD)))
    assert (got.verdict, got.moved, got.invariant_failures) == (IDENTICAL, (), ())
    assert not got.decided


def test_a_moved_trace_in_any_mode_is_moved_naming_scenario_and_mode() -> None:
    moved = GOOD | {("a", "forced"): [2047, 11]}
    got = classify(_ab(_suite(GOOD), _suite(moved)))
    assert (got.verdict, got.moved) == (MOVED, ("a [forced]",)) and got.decided


def test_a_failing_invariant_outranks_a_move_and_is_listed() -> None:
    moved = GOOD | {("a", "forced"): [2047, 11]}
    got = classify(_ab(_suite(GOOD), _suite(moved, failures=[FAILURE])))
    assert got.verdict == INVARIANT_FAILED and got.decided
    assert got.invariant_failures == (FAILURE,) and got.moved == ("a [forced]",)


def test_an_invariant_the_good_tree_fails_too_does_not_classify_the_candidate() -> None:
    got = classify(_ab(_suite(GOOD, failures=[FAILURE]), _suite(GOOD, failures=[FAILURE])))
    assert got.verdict == IDENTICAL and got.invariant_failures == ()


def test_a_ledger_scenario_the_candidate_no_longer_builds_is_an_invariant_failure() -> None:
    lost = {"scenario": "b", "kind": "swa", "why": "AttributeError: no SWA pool"}
    candidate = {k: v for k, v in GOOD.items() if k[0] != "b"}
    got = classify(_ab(_suite(GOOD), _suite(candidate, not_built=[lost])))
    assert got.verdict == INVARIANT_FAILED
    assert got.invariant_failures == ("b [off] ledger scenario not built on the head tree, built "
                                      "on the base: AttributeError: no SWA pool",)
    assert got.moved == ("b [off]: not replayed on the candidate: AttributeError: no SWA pool",)


def test_a_mode_only_the_good_tree_runs_is_moved_and_one_only_the_candidate_runs_is_not() -> None:
    gateless = {k: v for k, v in GOOD.items() if k[1] == "off"}
    older = _suite(gateless, modes=["off"], sglang_version="0.5.19",
                   sglang_src={"has_gate": False})
    got = classify(_ab(_suite(GOOD, modes=["off", "forced"]), older))
    assert got.verdict == MOVED
    assert got.moved == ("a [forced]: not replayed on the candidate: mode forced not run: sglang "
                         "0.5.19 has no exact-fill gate (schedule_policy._use_exact_chunk_fill, "
                         "sglang >= 0.5.20)",)
    assert classify(_ab(older, _suite(GOOD))).verdict == IDENTICAL


def _fake_tree(path: Path) -> Path:
    """A folder that resolves as an sglang tree (no import needed) but cannot replay."""
    (path / "sglang").mkdir(parents=True)
    (path / "sglang" / "__init__.py").write_text("raise ImportError('broken on purpose')\n")
    return path


def test_a_candidate_that_is_not_an_sglang_tree_does_not_import(tmp_path: Path) -> None:
    good = _fake_tree(tmp_path / "good")
    got = classify_tree(good, tmp_path, runner="cpu")
    assert got.verdict == DOES_NOT_IMPORT and not got.decided
    assert got.reason is not None and f"--head {tmp_path}: not an sglang tree" in got.reason
    with pytest.raises(TreeError, match="--base"):
        classify_tree(tmp_path, good, runner="cpu")


def test_a_good_tree_that_does_not_replay_raises_rather_than_judging(tmp_path: Path) -> None:
    with pytest.raises(AbError) as err:
        classify_tree(_fake_tree(tmp_path / "good"), _fake_tree(tmp_path / "bad"), runner="cpu")
    assert "base" in err.value.sides and "does not import" in err.value.sides["base"]
