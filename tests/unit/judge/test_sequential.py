"""Looks of a sequential design: O'Brien-Fleming spending turned into per-look levels (their
joint crossing probability is the family's alpha), the judge at a look, and the stop rule."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps
from unit.judge.block_runs import write_block_run

from servegate.judge import sequential
from servegate.judge.evaluate import judge


def test_no_looks_is_the_plain_level() -> None:
    assert sequential.nominal_levels([], 4, 0.05) == [0.05]


def test_the_first_look_spends_obrien_fleming_and_later_looks_grow_below_alpha() -> None:
    levels = sequential.nominal_levels([2, 3], 4, 0.05)
    assert levels[0] == pytest.approx(sequential.spent(0.5, 0.05))
    assert levels[0] < levels[1] < levels[2] < 0.05
    assert levels[0] == pytest.approx(2 * sps.norm.sf(1.96 / np.sqrt(0.5)), rel=1e-3)


@pytest.mark.parametrize("power", [None, 1.25])
@pytest.mark.parametrize("looks", [[2], [2, 3], [1, 2, 3]])
def test_the_looks_together_cross_with_probability_alpha(looks: list[int],
                                                          power: float | None) -> None:
    """Brownian motion observed at the looks' information fractions (seeded Monte Carlo), for
    O'Brien-Fleming and the power family's spending."""
    fractions = np.array(sequential.look_fractions(looks, 4))
    bounds = sps.norm.isf(np.array(sequential.nominal_levels(looks, 4, 0.05, power)) / 2)
    rng = np.random.default_rng(7)
    steps = np.diff(np.concatenate([[0.0], fractions]))
    paths = np.cumsum(rng.normal(size=(400_000, len(fractions))) * np.sqrt(steps), axis=1)
    crossed = (np.abs(paths / np.sqrt(fractions)) >= bounds).any(axis=1).mean()
    assert crossed == pytest.approx(0.05, abs=0.0015)


def test_a_spending_power_gives_the_first_look_alpha_t_to_that_power_and_the_look_says_so(
        ) -> None:
    levels = sequential.nominal_levels([8, 12], 40, 0.05, 1.25)
    assert levels[0] == pytest.approx(0.05 * 0.2 ** 1.25)
    assert levels[0] > 100 * sequential.nominal_levels([8, 12], 40, 0.05)[0]  # kinder early
    look = sequential.look_at({"in_server": True, "blocks": 40, "looks": [8, 12],
                               "spending_power": 1.25}, 0.05, 8)
    assert look is not None and look.level == pytest.approx(levels[0])
    assert "(alpha t^1.25 alpha spending over looks at (8, 12, 40) blocks)" in look.note()


def test_a_look_is_known_by_its_blocks_and_a_design_without_looks_has_none() -> None:
    design = {"in_server": True, "blocks": 4, "looks": [2, 3]}
    look = sequential.look_at(design, 0.05, 3)
    assert look is not None and (look.index, look.count, look.blocks) == (1, 3, 3)
    final = sequential.look_at(design, 0.05, None)
    assert final is not None and final.final and final.blocks == 4
    assert sequential.look_at({"in_server": True, "blocks": 4}, 0.05, None) is None
    with pytest.raises(ValueError, match=r"no look after 1 blocks \(looks: \[2, 3, 4\]\)"):
        sequential.look_at(design, 0.05, 1)


def test_a_night_stops_on_a_gated_regression_or_when_nothing_is_undecided() -> None:
    # regression / pass+? / decided / an underpowered TOST + pass / an underpowered one + a
    # gated regression: a check short of the power to gate is undecided (more blocks may let
    # it gate), a gated regression fails the run whatever the rest
    codes = np.array([[1, 3], [0, 3], [0, 2], [3, 0], [0, 0], [0, 1]])
    gating = np.array([[True, True], [True, True], [True, True], [False, True],
                       [False, True], [False, True]])
    assert sequential.stops(codes, gating).tolist() == [True, False, True, False, False, True]


def _with_looks(run_dir: Path, looks: list[int], stopped: int | None = None) -> Path:
    run = json.loads((run_dir / "run.json").read_text())
    run["design"]["looks"] = looks
    if stopped is not None:
        run["sequential"] = {"looks": [*looks, run["design"]["blocks"]],
                             "stopped_at_blocks": stopped, "minutes_saved": 3.5}
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


def test_the_judge_at_a_look_sees_its_blocks_only_at_the_looks_level(tmp_path: Path) -> None:
    run_dir = _with_looks(write_block_run(tmp_path / "run", starts=1, blocks=4), [2, 3])
    at_two = judge(run_dir, at_blocks=2)
    level = sequential.nominal_levels([2, 3], 4, 0.05)[0]
    assert at_two.config.confidence == pytest.approx(1 - level)
    assert {p["block"] for p in at_two.run["points"]} == {0, 1}
    assert any("look 1 of 3 (the first 2 of 4 blocks" in n for n in at_two.notes)
    final = judge(run_dir)
    assert final.config.confidence == pytest.approx(1 - sequential.nominal_levels([2, 3], 4,
                                                                                 0.05)[-1])
    assert {p["block"] for p in final.run["points"]} == {0, 1, 2, 3}


def test_a_run_that_stopped_is_judged_at_its_stop(tmp_path: Path) -> None:
    run_dir = _with_looks(write_block_run(tmp_path / "run", starts=1, blocks=4), [2, 3],
                          stopped=3)
    stopped = judge(run_dir)
    assert stopped.config.confidence == pytest.approx(
        1 - sequential.nominal_levels([2, 3], 4, 0.05)[1])
    assert any("look 2 of 3" in n for n in stopped.notes)


def test_a_look_the_design_does_not_have_is_an_error_naming_it(tmp_path: Path) -> None:
    run_dir = _with_looks(write_block_run(tmp_path / "run", starts=1, blocks=4), [2])
    judgement = judge(run_dir, at_blocks=3)
    assert judgement.exit_code == 2
    assert any("no look after 3 blocks" in c.reason for c in judgement.checks)


def test_each_simulated_night_is_kept_at_the_first_look_that_stops_it() -> None:
    walk = sequential.FirstStops(3, blocks=4)
    gating = np.ones((3, 1), dtype=bool)
    assert walk.take(2, np.array([[1], [3], [3]]), gating).tolist() == [True, False, False]
    assert walk.take(3, np.array([[0], [0], [3]]), gating).tolist() == [False, True, False]
    assert walk.take(4, np.array([[3], [3], [3]]), gating).tolist() == [False, False, True]
    assert walk.ran.tolist() == [2, 3, 4]


def test_a_crossover_looks_after_its_first_start_then_at_both() -> None:
    """A one-start live pair's crossover: two looks over starts at O'Brien-Fleming levels,
    the first judging start 0 alone."""
    design = {"in_server": True, "blocks": 4, "starts": 1, "crossover": True}
    first = sequential.look_at(design, 0.05, 1)
    assert first is not None and (first.index, first.count, first.unit) == (0, 2, "starts")
    assert first.level == pytest.approx(sequential.nominal_levels([1], 2, 0.05)[0])
    assert "the second (a crossover) only when the first is undecided" in first.note()
    final = sequential.look_at(design, 0.05, None)
    assert final is not None and final.final and final.blocks == 2
    run = {"points": [{"start": s, "block": b} for s in (0, 1) for b in range(4)]}
    assert {p["start"] for p in sequential.at_look(run, first)["points"]} == {0}
    assert len(sequential.at_look(run, final)["points"]) == 8
