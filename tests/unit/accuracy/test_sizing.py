"""GSM8K sizing: the normal approximation against the judge's own paired interval, simulated."""

from __future__ import annotations

import numpy as np
import pytest

from servegate.accuracy import sizing
from servegate.accuracy.paired import agresti_min
from servegate.calibration import FLAKY
from servegate.judge.stats import t_quantile


def _simulated_power(questions: int, margin: float, alpha: float, nights: int = 4000,
                     seed: int = 5) -> float:
    """The calibration's accuracy model (4 % of questions flip independently between sides,
    so 2 % are discordant, a true difference of 0), judged by the Agresti-Min interval the
    accuracy claim uses: non-inferior when its one-sided lower bound is above -margin."""
    rng = np.random.default_rng(seed)
    flaky = rng.random((nights, questions)) < FLAKY
    a = np.where(flaky, rng.random((nights, questions)) < 0.5, True)
    b = np.where(flaky, rng.random((nights, questions)) < 0.5, True)
    diff, se = agresti_min((a & ~b).sum(axis=1), (b & ~a).sum(axis=1), questions)
    z = float(t_quantile(1 - 2 * alpha, np.inf))        # two-sided level 1 - 2 alpha
    return float(np.mean(diff - z * se > -margin))


@pytest.mark.parametrize(("questions", "margin"), [(560, 0.02), (1319, 0.01), (310, 0.02)])
def test_normal_power_matches_the_judges_paired_interval_by_simulation(
        questions: int, margin: float) -> None:
    simulated = _simulated_power(questions, margin, sizing.ALPHA)
    assert pytest.approx(FLAKY / 2) == sizing.DISCORDANCE
    assert sizing.power(questions, margin) == pytest.approx(simulated, abs=0.04)


def test_the_questions_needed_reach_the_target_and_one_fewer_does_not() -> None:
    for margin in (0.01, 0.02, 0.03):
        n = sizing.questions_needed(margin)
        assert sizing.power(n, margin) >= sizing.TARGET_POWER > sizing.power(n - 1, margin)
    # the shipped margins: 1 point needs about the whole test split, 2 points a quarter of it
    assert sizing.questions_needed(0.01) == 1237 and sizing.questions_needed(0.02) == 310


def test_a_family_of_checks_asks_for_more_questions_and_says_so() -> None:
    one, six = sizing.size(0.02, 560, 1), sizing.size(0.02, 560, 6)
    assert six.needed_family > one.needed_family == one.needed == six.needed
    assert six.power_family < six.power == one.power
    assert six.to_json()["family_checks"] == 6
    assert "80 % needs 310" in six.line() and "0.05/6" in six.line()
    assert "more than the test split" in sizing.size(0.005, 1319).line()
