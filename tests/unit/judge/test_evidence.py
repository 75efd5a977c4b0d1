"""servegate.judge.evidence: run.json points and baselines -> one table of block values by
(arm, mode, concurrency, metric) and (start, block); geometric means across concurrencies block
by block; balanced and paired matrices."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from unit.judge.block_runs import write_block_run

from servegate.core.results import load_run, point_slot
from servegate.judge.baselines import baseline_from_run, upgrade_baseline
from servegate.judge.evidence import (
    Evidence,
    MissingEvidence,
    as_matrix,
    evidence_from_baseline,
    evidence_from_run,
    paired_matrices,
)


def _point(mode: str, conc: int, repeat: int, value: float, **extra: Any) -> dict[str, Any]:
    return {"mode": mode, "concurrency": conc, "repeat": repeat,
            "metrics": {"mean_ttft_ms": value, "median_tpot_ms": value / 10}, **extra}


def test_points_become_blocks_with_their_start_and_block() -> None:
    run = {"design": {"in_server": True, "starts": 2, "blocks": 2}, "points": [
        _point("off", 4, 0, 100.0, start=0, block=0),
        _point("off", 4, 1, 110.0, start=0, block=1),
        _point("off", 4, 2, 120.0, start=1, block=0),
        _point("on", 4, 3, 130.0, start=1, block=1, arm="head"),
    ]}
    ev = evidence_from_run(run)
    assert ev.in_server is True and ev.label == "run"
    assert ev.slots("", "off", 4, "mean_ttft_ms") == {(0, 0): 100.0, (0, 1): 110.0, (1, 0): 120.0}
    assert ev.slots("head", "on", 4, "median_tpot_ms") == {(1, 1): 13.0}
    assert ev.modes() == ["off"] and ev.modes("head") == ["on"]
    assert len(ev.slots("", "off", 4, "mean_ttft_ms")) == 3


def test_legacy_points_are_one_block_per_start() -> None:
    run = {"points": [_point("off", 2, 0, 10.0), _point("off", 2, 1, 11.0),
                      _point("off", 2, 2, 12.0)]}
    ev = evidence_from_run(run)
    assert ev.in_server is False
    assert ev.slots("", "off", 2, "mean_ttft_ms") == {(0, 0): 10.0, (1, 0): 11.0, (2, 0): 12.0}
    assert point_slot({"repeat": 5}) == (5, 0)
    assert point_slot({"repeat": 5, "start": 1, "block": 2}) == (1, 2)


def test_non_finite_values_are_not_blocks() -> None:
    point = _point("off", 2, 0, 10.0)
    point["metrics"]["mean_ttft_ms"] = float("nan")
    ev = evidence_from_run({"points": [point]})
    assert ev.slots("", "off", 2, "mean_ttft_ms") == {}
    assert ev.slots("", "off", 2, "median_tpot_ms") == {(0, 0): 1.0}


def test_geometric_mean_across_concurrencies_block_by_block() -> None:
    ev = Evidence("run")
    for (start, block), (c2, c8) in {(0, 0): (2.0, 8.0), (0, 1): (3.0, 12.0),
                                     (1, 0): (1.0, 1.0)}.items():
        ev.add("", "on", 2, "m", start, block, c2)
        ev.add("", "on", 8, "m", start, block, c8)
    logs = ev.logs("", "on", [2, 8], "m")
    assert logs[(0, 0)] == pytest.approx(math.log(4.0))       # sqrt(2 * 8)
    assert logs[(0, 1)] == pytest.approx(math.log(6.0))       # sqrt(3 * 12)
    assert logs[(1, 0)] == pytest.approx(0.0)
    assert ev.logs("", "on", [8], "m")[(0, 1)] == pytest.approx(math.log(12.0))


def test_slots_missing_at_one_concurrency_are_dropped() -> None:
    ev = Evidence("run")
    for slot in [(0, 0), (0, 1), (1, 0)]:
        ev.add("", "on", 2, "m", *slot, 5.0)
    ev.add("", "on", 4, "m", 0, 0, 5.0)
    ev.add("", "on", 4, "m", 1, 0, 5.0)
    ev.add("", "on", 4, "m", 1, 1, 5.0)                        # not at c2
    assert set(ev.logs("", "on", [2, 4], "m")) == {(0, 0), (1, 0)}
    assert set(ev.logs("", "on", [2, 4], "m", only={(1, 0), (0, 1)})) == {(1, 0)}


def test_non_positive_values_are_dropped_from_logs() -> None:
    ev = Evidence("run")
    ev.add("", "on", 2, "m", 0, 0, 0.0)
    ev.add("", "on", 2, "m", 0, 1, 2.0)
    assert set(ev.logs("", "on", [2], "m")) == {(0, 1)}
    only_zero = Evidence("run")
    only_zero.add("", "on", 2, "m", 0, 0, 0.0)
    with pytest.raises(MissingEvidence, match=r"m: no positive block values common to on"):
        only_zero.logs("", "on", [2], "m")


def test_missing_evidence_names_metric_mode_and_concurrency() -> None:
    ev = Evidence("run")
    ev.add("head", "off", 2, "mean_ttft_ms", 0, 0, 1.0)
    with pytest.raises(MissingEvidence) as err:
        ev.logs("head", "on", [2, 4], "mean_ttft_ms")
    assert "mean_ttft_ms" in str(err.value) and "head-on" in str(err.value)
    with pytest.raises(MissingEvidence, match=r"median_tpot_ms: no blocks for off at "
                                               r"concurrency \[4\]"):
        ev2 = Evidence("run")
        ev2.add("", "off", 2, "median_tpot_ms", 0, 0, 1.0)
        ev2.logs("", "off", [2, 4], "median_tpot_ms")
    with pytest.raises(MissingEvidence, match="no block measured in the same start and round"):
        paired_matrices({(0, 0): 1.0}, {(0, 1): 1.0})


def test_as_matrix_orders_starts_and_blocks_and_balances() -> None:
    values = {(1, 1): 11.0, (0, 2): 2.0, (1, 0): 10.0, (0, 0): 0.0, (0, 1): 1.0,
              (2, 0): 20.0, (2, 3): 23.0, (2, 1): 21.0}
    matrix = as_matrix(values)
    assert matrix.shape == (1, 3, 2)                           # the smallest start has 2
    np.testing.assert_array_equal(matrix[0], [[0.0, 1.0], [10.0, 11.0], [20.0, 21.0]])


def test_paired_matrices_use_only_common_slots() -> None:
    current = {(0, 0): 1.0, (0, 1): 2.0, (1, 0): 3.0, (1, 1): 4.0, (1, 2): 5.0}
    reference = {(0, 1): 20.0, (1, 0): 30.0, (1, 2): 50.0, (2, 0): 99.0}
    a, b = paired_matrices(current, reference)
    # common: (0, 1), (1, 0), (1, 2); balanced to one block per start (start 0 has one)
    np.testing.assert_array_equal(a[0], [[2.0], [3.0]])
    np.testing.assert_array_equal(b[0], [[20.0], [30.0]])


def _baseline_point(mode: str, conc: int, blocks: list[float],
                    starts: list[int]) -> dict[str, Any]:
    """A schema-3 baseline point: every block's value with the start it ran in."""
    return {"mode": mode, "concurrency": conc,
            "metrics": {"mean_ttft_ms": {"n_blocks": len(blocks), "blocks": blocks,
                                         "starts": starts}}}


def test_baseline_blocks_with_their_starts() -> None:
    baseline = {"design": {"in_server": True}, "points": [
        _baseline_point("off", 4, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [0, 0, 0, 1, 1, 1])]}
    ev = evidence_from_baseline(baseline)
    assert ev.in_server is True and ev.label == "baseline"
    assert ev.slots("", "off", 4, "mean_ttft_ms") == {
        (0, 0): 1.0, (0, 1): 2.0, (0, 2): 3.0, (1, 0): 4.0, (1, 1): 5.0, (1, 2): 6.0}
    assert as_matrix(ev.logs("", "off", [4], "mean_ttft_ms")).shape == (1, 2, 3)


def test_a_baseline_blocks_are_numbered_within_their_own_start() -> None:
    ev = evidence_from_baseline({"points": [
        _baseline_point("on", 2, [1.0, 2.0, 3.0, 4.0, 5.0], [1, 0, 1, 0, 3])]})
    assert ev.in_server is False                           # no design: before blocks
    assert ev.slots("", "on", 2, "mean_ttft_ms") == {
        (1, 0): 1.0, (0, 0): 2.0, (1, 1): 3.0, (0, 1): 4.0, (3, 0): 5.0}


def test_a_non_finite_baseline_block_is_not_evidence_and_keeps_the_numbering() -> None:
    ev = evidence_from_baseline({"points": [
        _baseline_point("on", 2, [1.0, float("nan"), 3.0], [0, 0, 0])]})
    assert ev.slots("", "on", 2, "mean_ttft_ms") == {(0, 0): 1.0, (0, 2): 3.0}


def test_an_upgraded_older_baseline_is_one_start_per_repeat() -> None:
    """A v2 baseline from before blocks (repeat numbers, no starts), upgraded as every reader
    upgrades it: each repeat its own start of one block."""
    v2 = {"schema_version": 2, "runner_class": "cpu", "model_profile": "m", "suite": "s",
          "provenance": {"created_at": "2026-11-30T00:00:00+00:00", "source_run": "r"},
          "points": [{"mode": "on", "concurrency": 2, "repeats": [3, 5, 7],
                      "metrics": {"mean_ttft_ms": {"value": 8.0, "n_repeats": 3,
                                                   "repeats": [7.0, 8.0, 9.0]}}}]}
    ev = evidence_from_baseline(upgrade_baseline(v2, Path("b.json")))
    assert ev.in_server is False
    assert ev.slots("", "on", 2, "mean_ttft_ms") == {(3, 0): 7.0, (5, 0): 8.0, (7, 0): 9.0}
    assert as_matrix(ev.logs("", "on", [2], "mean_ttft_ms")).shape == (1, 3, 1)


def test_baseline_keeps_starts_when_one_block_lacks_a_metric(tmp_path: Path) -> None:
    run_dir = write_block_run(tmp_path / "run", starts=2, blocks=3, concurrencies=(4,))
    run = json.loads((run_dir / "run.json").read_text())
    for point in run["points"]:
        if (point["mode"], point["start"], point["block"]) == ("off", 0, 1):
            del point["metrics"]["mean_ttft_ms"]
    (run_dir / "run.json").write_text(json.dumps(run))
    ev = evidence_from_baseline(baseline_from_run(load_run(run_dir), run_dir))
    assert {s for s, _ in ev.slots("", "off", 4, "median_tpot_ms")} == {0, 1}   # complete
    slots = ev.slots("", "off", 4, "mean_ttft_ms")
    assert len(slots) == 5
    assert {start for start, _ in slots} == {0, 1}


def test_a_baseline_without_points_or_metrics_is_empty_not_an_error() -> None:
    assert evidence_from_baseline({}).modes() == []
    bare = {"mode": "on", "concurrency": 2, "metrics": {}}
    assert evidence_from_baseline({"points": [bare]}).slots("", "on", 2, "mean_ttft_ms") == {}


def test_evidence_messages_name_the_arm_mode_and_concurrencies_exactly() -> None:
    ev = Evidence("run")
    ev.add("head", "on", 2, "mean_ttft_ms", 0, 0, -1.0)          # no positive value
    with pytest.raises(MissingEvidence, match=r"^mean_ttft_ms: no positive block values common "
                                               r"to head-on at concurrency \[2\]$"):
        ev.logs("head", "on", [2], "mean_ttft_ms")
    with pytest.raises(MissingEvidence, match=r"^no block measured in the same start and round "
                                               r"for both modes$"):
        paired_matrices({(0, 0): 1.0}, {(0, 1): 1.0})


def test_concurrencies_of_one_metric_are_those_that_measured_it() -> None:
    ev = Evidence("run")
    ev.add("", "on", 2, "mean_ttft_ms", 0, 0, 1.0)
    ev.add("", "on", 4, "median_tpot_ms", 0, 0, 1.0)
    assert ev.concurrencies("", "on", "mean_ttft_ms") == [2]
    assert ev.concurrencies("", "on") == [2, 4]


def test_a_run_without_points_has_no_evidence() -> None:
    assert evidence_from_run({}).modes() == []
