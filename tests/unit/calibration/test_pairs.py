"""servegate.calibration.pairs: head vs base in live pairs through the judge's own paired
estimator, its start level learned from a runner class's stored pairs (some of them real
changes) and a crossover start only when the first is undecided; seeded (issue 41 item 2,
docs/judge.md)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from servegate.calibration.pairs import learned_start, live_pair_calibration
from servegate.calibration.worlds import Noise
from servegate.config import load_suite, suite_path

NOISE = Noise(0.02, 0.01, 0.003)        # the world: --run-cv 0.02 --block-cv 0.01


@pytest.fixture(scope="module")
def config() -> Any:
    return load_suite(suite_path("premerge")).judge


def test_twenty_stored_pairs_teach_the_true_start_level_and_a_moved_pair_is_left_out(
        config: Any) -> None:
    rng = np.random.default_rng(1)
    var, dof = learned_start(config, rng, 400, 4, NOISE, 20, 0)
    assert np.median(dof) == 20 and (dof >= 19).mean() > 0.95     # one dof a pair, few out
    # the two servers' start levels differ by sqrt(2) x 2 %: learned, not the typed 4 %
    assert np.median(np.sqrt(var)) == pytest.approx(np.sqrt(2) * 0.02, rel=0.1)
    moved, moved_dof = learned_start(config, rng, 400, 4, NOISE, 20, 2)
    assert np.median(moved_dof) == 18                       # the two 20 % changes left out
    assert np.median(np.sqrt(moved)) == pytest.approx(np.sqrt(2) * 0.02, rel=0.1)
    few, few_dof = learned_start(config, rng, 50, 4, NOISE, 8, 0)
    typed = 2 * config.run_to_run_cv ** 2
    assert (few == typed).all() and (few_dof == config.run_to_run_cv_dof).all()   # prior stands


def test_a_learned_pair_with_a_crossover_catches_a_tenth_and_two_changes_cost_little(
        config: Any) -> None:
    """80 % power at <= 12 % with A/A <= 1 %; two real changes among the 20 pairs keep the
    A/A and lose under 5 points; the crossover runs on a minority of A/A pull requests."""
    typed = live_pair_calibration(config, 1, 4, 2, NOISE, nights=400, seed=3, crossover=True)
    learned = live_pair_calibration(config, 1, 4, 2, NOISE, nights=400, seed=3, stored=20,
                                    crossover=True)
    moved = live_pair_calibration(config, 1, 4, 2, NOISE, nights=400, seed=3, stored=20,
                                  changes=2, crossover=True)
    assert typed["slowdown_80"] >= 0.15 and typed["crossover_run"]["aa"] > 0.95
    for row in (learned, moved):
        assert row["slowdown_80"] <= 0.12 and row["aa_false_alarm"] <= 0.01
        assert row["learned_nights"] > 0.95 and row["crossover_run"]["aa"] < 0.5
        assert row["crossover_run"]["0.10"] > row["crossover_run"]["aa"]
    for size in ("0.10", "0.12", "0.15"):
        assert moved["power_curve"][size] >= learned["power_curve"][size] - 0.05
    assert learned["server_starts"] == 4 and learned["crossover"]
