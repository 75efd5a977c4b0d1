"""The GSM8K on-vs-off claim (servegate.judge.claims): paired cells, a recorded interval, the
unpaired fallback, and the verdict at the margin, against references worked out by hand or by
statsmodels (issue 15)."""

from __future__ import annotations

import math
from typing import Any

import pytest
from statsmodels.stats.proportion import confint_proportions_2indep

from servegate.config.judge import JudgeConfig
from servegate.judge import claims

NAME = "claim: on vs off GSM8K non-inferior within 2.0 pp"


def _claim(run: dict[str, Any], confidence: float = 0.95) -> Any:
    pending = claims._accuracy_claim(run, JudgeConfig())      # type: ignore[arg-type]
    assert pending.name == NAME and pending.counts
    return pending.evaluate(confidence)


def test_paired_cells_give_the_agresti_min_interval() -> None:
    cells = {"both_correct": 12, "a_only": 3, "b_only": 1, "both_wrong": 4}
    interval = claims._paired_accuracy_interval(cells, 0.95)
    assert interval is not None and interval.scale == "difference"
    assert interval.estimate == pytest.approx(0.1)
    assert interval.se == pytest.approx(0.0997744, abs=1e-6)        # by hand (see paired tests)
    assert (interval.n_current, interval.n_reference) == (20, 20)


def test_a_recorded_interval_is_rescaled_to_the_family_level() -> None:
    # recorded at 95 %: diff 0.01 in [-0.0296, 0.0496] -> se 0.0396 / 1.959964 = 0.020204
    recorded = {"diff": 0.01, "diff_low": -0.0296, "diff_high": 0.0496, "n": 500,
                "confidence": 0.95}
    interval = claims._paired_accuracy_interval(recorded, 0.99)
    assert interval is not None
    assert interval.se == pytest.approx(0.0396 / 1.959964, rel=1e-5)
    z99 = 2.5758293
    assert (interval.low, interval.high) == pytest.approx(
        (0.01 - z99 * 0.0396 / 1.959964, 0.01 + z99 * 0.0396 / 1.959964), rel=1e-5)
    assert interval.method == "paired (recorded at 95%, rescaled)"
    assert (interval.n_current, interval.confidence) == (500, 0.99)
    at_90 = claims._paired_accuracy_interval({**recorded, "confidence": 0.9}, 0.9)
    assert at_90 is not None and (at_90.low, at_90.high) == pytest.approx((-0.0296, 0.0496))
    default = claims._paired_accuracy_interval({k: v for k, v in recorded.items()
                                                if k not in ("n", "confidence")}, 0.95)
    assert default is not None and default.n_current == 0
    assert (default.low, default.high) == pytest.approx((-0.0296, 0.0496))


@pytest.mark.parametrize("paired", [
    {},
    {"both_correct": 0, "a_only": 0, "b_only": 0, "both_wrong": 0},
    {"both_correct": 1.5, "a_only": 0, "b_only": 0, "both_wrong": 0},
    {"diff": 0.1, "diff_low": 0.0},
    {"diff": "0.1", "diff_low": 0.0, "diff_high": 0.2},
])
def test_nothing_usable_gives_no_interval(paired: dict[str, Any]) -> None:
    assert claims._paired_accuracy_interval(paired, 0.95) is None


def test_claim_passes_when_the_whole_interval_is_above_minus_margin() -> None:
    run = {"paired_accuracy": {"on_vs_off": {"both_correct": 900, "a_only": 0, "b_only": 0,
                                             "both_wrong": 100}},
           "accuracy": {"on": {"n": 1000, "correct": 900}, "off": {"n": 1000, "correct": 900}}}
    check = _claim(run)
    assert (check.kind, check.metric, check.mode, check.reference, check.floor) == (
        "claim", "accuracy", "on", "off", 0.02)
    assert check.verdict == "pass" and check.reason == ""
    assert (check.current_value, check.reference_value) == (0.9, 0.9)
    assert check.interval.low >= -0.02


def test_claim_regression_when_the_whole_interval_is_below_minus_margin() -> None:
    run = {"paired_accuracy": {"on_vs_off": {"both_correct": 700, "a_only": 0, "b_only": 100,
                                             "both_wrong": 200}},
           "accuracy": {"on": {"n": 1000, "correct": 700}, "off": {"n": 1000, "correct": 800}}}
    check = _claim(run)
    assert check.verdict == "regression" and check.interval.high < -0.02
    assert (check.current_value, check.reference_value) == (0.7, 0.8)


def test_claim_inconclusive_when_the_interval_straddles_the_margin() -> None:
    run = {"paired_accuracy": {"on_vs_off": {"both_correct": 40, "a_only": 1, "b_only": 2,
                                             "both_wrong": 7}}}
    check = _claim(run)
    assert check.verdict == "inconclusive"
    assert check.interval.low < -0.02 <= check.interval.high
    assert check.current_value is None and check.reference_value is None


def test_unpaired_fallback_is_newcombe_and_says_so() -> None:
    run = {"accuracy": {"on": {"n": 400, "correct": 330}, "off": {"n": 500, "correct": 410}}}
    check = _claim(run, confidence=0.9)
    low, high = confint_proportions_2indep(330, 400, 410, 500, method="newcomb",
                                           compare="diff", alpha=0.1)
    assert (check.interval.low, check.interval.high) == pytest.approx((low, high))
    assert check.reason == "unpaired fallback (no paired_accuracy.on_vs_off)"
    assert (check.current_value, check.reference_value) == (0.825, 0.82)


def test_no_results_is_inconclusive_with_the_reason() -> None:
    for run in ({}, {"accuracy": {"on": {"n": 10, "correct": 5}}},
                {"accuracy": {"on": {"n": 0, "correct": 0}, "off": {"n": 10, "correct": 5}}},
                {"paired_accuracy": {"on_vs_off": {}}}):
        check = _claim(run)
        assert check.verdict == "inconclusive" and check.interval is None, run
        assert check.reason == "no GSM8K results for on and off in this run"


def test_paired_counts_win_over_the_unpaired_fallback() -> None:
    run = {"paired_accuracy": {"on_vs_off": {"both_correct": 12, "a_only": 3, "b_only": 1,
                                             "both_wrong": 4}},
           "accuracy": {"on": {"n": 20, "correct": 15}, "off": {"n": 20, "correct": 13}}}
    check = _claim(run)
    assert check.reason == "" and check.interval.method == "paired (Agresti-Min)"
    assert math.isclose(check.interval.estimate, 0.1)
