"""``tests/contention.py``: a real-server test's statistical assertion always runs; a failure is
excused (skipped, naming the measured share) only when its run's own interference record says
the machine was busy; an assertion that holds passes however busy the machine was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from contention import CONTENDED_SHARE, Contention, excused_if_contended, measured
from judge_runs import make_run

from servegate.measure.interference import BUSY_PCT

BLOCKS = 12                     # make_run: 2 modes x 2 concurrencies x 3 repeats


def _run(tmp_path: Path, name: str, machines: list[dict[str, Any] | None]) -> Path:
    """A synthetic run folder whose blocks carry these interference records (None: none)."""
    run_dir = make_run(tmp_path / name, repeats=3, n_requests=5)
    path = run_dir / "run.json"
    run = json.loads(path.read_text())
    assert len(run["points"]) == len(machines) == BLOCKS
    for point, machine in zip(run["points"], machines, strict=True):
        if machine is not None:
            point["machine"] = machine
    path.write_text(json.dumps(run))
    return run_dir


def _quiet(other: float = 0.4) -> dict[str, Any]:
    return {"wall_s": 8.0, "other_cpu_pct": other, "cpu_steal_pct": 0.1, "server_cpu_pct": 90.0}


def _busy(other: float) -> dict[str, Any]:
    return {"wall_s": 8.0, "other_cpu_pct": other, "cpu_steal_pct": 0.0, "server_cpu_pct": 50.0}


def _skip_message(*run_dirs: Path, what: str = "the slowdown's interval") -> str:
    """The skip of a failing assertion on these runs (fails the test if it was not skipped)."""
    with pytest.raises(pytest.skip.Exception) as skipped, \
            excused_if_contended(*run_dirs, what=what):
        raise AssertionError("x1.02 [0.97, 1.08] includes 1")
    return str(skipped.value)


def _holds(*run_dirs: Path, what: str = "the verdict") -> Contention:
    """The measurement of an assertion that held on these runs (it must not skip or raise)."""
    with excused_if_contended(*run_dirs, what=what) as found:
        assert found.blocks > 0
    return found


def test_an_assertion_that_holds_on_a_contended_run_passes_and_prints_the_contention(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = _run(tmp_path, "busy", [_busy(80.0)] * 12)
    found = _holds(run_dir, what="the slowdown is caught")
    assert found.contended and found.busy == BLOCKS
    assert "contention (the assertion held): other processes or CPU steal took" in \
        capsys.readouterr().out


def test_a_failing_assertion_on_a_contended_run_is_skipped_naming_share_and_failure(
        tmp_path: Path) -> None:
    run_dir = _run(tmp_path, "busy", [_busy(80.0)] * 12)
    message = _skip_message(run_dir, what="the slowdown is caught")
    assert "in 12 of 12 blocks of busy (100 %" in message
    assert message.endswith("and it failed: the slowdown is caught: x1.02 [0.97, 1.08] includes 1")


def test_a_failing_assertion_on_a_quiet_run_fails(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, "quiet", [_quiet()] * 12)
    with pytest.raises(AssertionError, match="includes 1"), \
            excused_if_contended(run_dir, what="the slowdown is caught"):
        raise AssertionError("x1.02 [0.97, 1.08] includes 1")


def test_other_errors_are_never_excused(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, "busy", [_busy(80.0)] * 12)
    with pytest.raises(KeyError), excused_if_contended(run_dir, what="the verdict"):
        raise KeyError("checks")


def test_a_quiet_run_holding_passes_and_its_figures_are_returned(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, "quiet", [_quiet(0.4)] * 6 + [_quiet(2.9)] * 6)
    found = _holds(run_dir, what="the slowdown's interval")
    assert (found.busy, found.blocks, found.share, found.contended) == (0, BLOCKS, 0.0, False)
    assert found.worst_pct == pytest.approx(3.0)
    assert found.mean_pct == pytest.approx((6 * 0.5 + 6 * 3.0) / 12)


def test_a_failure_busy_past_the_share_skips_naming_the_measured_share(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, "busy", [_busy(48.0), _busy(97.5), _busy(20.0), _busy(6.0)]
                   + [_quiet()] * 8)
    message = _skip_message(run_dir, what="forced/off interval excludes no change")
    assert message == (
        f"contention: other processes or CPU steal took >= {BUSY_PCT:g} % of the CPU in 4 of 12 "
        "blocks of busy (33 %; worst 98 %, mean 15 %), past the 25 % of blocks a statistical "
        "assertion tolerates, and it failed: forced/off interval excludes no change: "
        "x1.02 [0.97, 1.08] includes 1")


def test_exactly_a_quarter_busy_still_fails_one_more_block_excuses(tmp_path: Path) -> None:
    assert CONTENDED_SHARE == 0.25           # 3 of 12 blocks is exactly the share
    at_share = _run(tmp_path, "at", [_busy(60.0)] * 3 + [_quiet()] * 9)
    found = measured(at_share)
    assert (found.busy, found.share, found.contended) == (3, 0.25, False)
    with pytest.raises(AssertionError), excused_if_contended(at_share, what="A/A"):
        raise AssertionError("a regression")                # at the share: a failure fails
    past = _run(tmp_path, "past", [_busy(60.0)] * 4 + [_quiet()] * 8)
    assert "in 4 of 12 blocks of past (33 %" in _skip_message(past)


def test_a_block_is_busy_by_the_judges_rule_steal_and_other_gpu_users_included(
        tmp_path: Path) -> None:
    below = {"other_cpu_pct": BUSY_PCT - 2.0, "cpu_steal_pct": 1.9}     # 4.9 %: quiet
    at_line = {"other_cpu_pct": BUSY_PCT - 2.0, "cpu_steal_pct": 2.0}   # 5 % together: busy
    gpu = {"other_cpu_pct": 0.0, "other_gpu_processes": 1}
    run_dir = _run(tmp_path, "rule", [below] * 8 + [at_line] * 2 + [gpu] * 2)
    found = measured(run_dir)
    assert (found.busy, found.gpu_busy, found.contended) == (4, 2, True)
    message = _skip_message(run_dir)
    assert "in 4 of 12 blocks of rule (33 %; worst 5 %, mean 4 %, other GPU processes in 2)" \
        in message


def test_blocks_without_a_record_count_as_quiet(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, "old", [None] * 9 + [_busy(80.0)] * 3)
    found = _holds(run_dir, what="the verdict")
    assert (found.busy, found.blocks, found.contended) == (3, BLOCKS, False)
    assert found.mean_pct == pytest.approx(20.0)


def test_runs_judged_together_are_pooled_and_named(tmp_path: Path) -> None:
    baseline = _run(tmp_path, "baseline", [_quiet()] * 12)
    six = _run(tmp_path, "six", [_busy(30.0)] * 6 + [_quiet()] * 6)
    seven = _run(tmp_path, "seven", [_busy(30.0)] * 7 + [_quiet()] * 5)
    assert "in 6 of 12 blocks of six (50 %" in _skip_message(six)   # alone: past the share
    pooled = measured(baseline, six)
    assert (pooled.busy, pooled.blocks, pooled.share) == (6, 24, 0.25)
    assert pooled.runs == ("baseline", "six")
    assert "in 7 of 24 blocks of baseline, seven (29 %;" in _skip_message(baseline, seven)
