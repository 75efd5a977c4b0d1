"""GSM8K checks (servegate.judge.accuracy_checks): the paired on-vs-off interval from cell counts
or a recorded interval, the on-vs-off non-inferiority claim, each mode against its baseline
(paired on common question ids, else unpaired), and head against base paired per question,
against references worked out by hand or by statsmodels (issue 15)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from judge_runs import make_run, write_gsm8k_records
from scipy import stats as sps
from statsmodels.stats.proportion import confint_proportions_2indep

from servegate.config.judge import JudgeConfig
from servegate.core.results import load_run
from servegate.judge.accuracy_checks import (
    accuracy_claim,
    baseline_accuracy_pendings,
    claim_name,
    head_vs_base_accuracy_pendings,
    paired_accuracy_interval,
)
from servegate.judge.stats import tost_confidence

# ------------------------------------------------------------ the paired on-vs-off interval


def test_paired_cells_give_the_agresti_min_interval() -> None:
    cells = {"both_correct": 12, "a_only": 3, "b_only": 1, "both_wrong": 4}
    interval = paired_accuracy_interval(cells, 0.95)
    assert interval is not None and interval.scale == "difference"
    assert interval.estimate == pytest.approx(0.1)
    assert interval.se == pytest.approx(0.0997744, abs=1e-6)        # by hand (see test_stats)
    assert (interval.n_current, interval.n_reference) == (20, 20)


def test_a_recorded_interval_is_rescaled_to_the_family_level() -> None:
    # recorded at 95 %: diff 0.01 in [-0.0296, 0.0496] -> se 0.0396 / 1.959964 = 0.020204
    recorded = {"diff": 0.01, "diff_low": -0.0296, "diff_high": 0.0496, "n": 500,
                "confidence": 0.95}
    interval = paired_accuracy_interval(recorded, 0.99)
    assert interval is not None
    assert interval.se == pytest.approx(0.0396 / 1.959964, rel=1e-5)
    z99 = 2.5758293
    assert (interval.low, interval.high) == pytest.approx(
        (0.01 - z99 * 0.0396 / 1.959964, 0.01 + z99 * 0.0396 / 1.959964), rel=1e-5)
    assert interval.method == "paired (recorded at 95%, rescaled)"
    assert (interval.n_current, interval.confidence) == (500, 0.99)
    at_90 = paired_accuracy_interval({**recorded, "confidence": 0.9}, 0.9)
    assert at_90 is not None and (at_90.low, at_90.high) == pytest.approx((-0.0296, 0.0496))
    default = paired_accuracy_interval({k: v for k, v in recorded.items()
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
    assert paired_accuracy_interval(paired, 0.95) is None


def test_a_recorded_interval_is_rescaled_to_the_familys_level() -> None:
    paired = {"diff": 0.01, "diff_low": -0.02, "diff_high": 0.04, "n": 200, "confidence": 0.95}
    iv = paired_accuracy_interval(paired, 0.99)
    se = 0.06 / (2 * sps.norm.ppf(0.975))
    z = sps.norm.ppf(0.995)
    assert iv is not None
    assert (iv.estimate, iv.scale, iv.n_current, iv.n_reference) == (0.01, "difference", 200, 200)
    assert iv.method == "paired (recorded at 95%, rescaled)" and iv.confidence == 0.99
    assert iv.se == pytest.approx(se, rel=1e-12)
    assert (iv.low, iv.high) == pytest.approx((0.01 - z * se, 0.01 + z * se), rel=1e-12)


def test_one_paired_question_is_enough_for_the_cell_counts() -> None:
    iv = paired_accuracy_interval({"both_correct": 1, "a_only": 0, "b_only": 0,
                                   "both_wrong": 0}, 0.95)
    assert iv is not None and iv.method == "paired (Agresti-Min)" and iv.n_current == 1


# ------------------------------------------------------------ the on-vs-off claim


NAME = "claim: on vs off GSM8K non-inferior within 2.0 pp"


def _claim(run: dict[str, Any], confidence: float = 0.95) -> Any:
    assert claim_name(JudgeConfig()) == NAME
    check = accuracy_claim(run, JudgeConfig(), confidence)    # type: ignore[arg-type]
    assert (check.name, check.claim, check.gate) == (NAME, "accuracy", True)
    return check


def test_the_claims_name_carries_its_margin() -> None:
    assert claim_name(JudgeConfig(accuracy_noninferiority_margin=0.015)) == (
        "claim: on vs off GSM8K non-inferior within 1.5 pp")


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
    assert check.interval.method == "newcombe"
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


def _paired(both: int, a_only: int, b_only: int, neither: int) -> dict[str, Any]:
    n = both + a_only + b_only + neither
    return {"on_vs_off": {"a": "on", "b": "off", "n": n, "both_correct": both,
                          "a_only": a_only, "b_only": b_only, "both_wrong": neither}}


@pytest.mark.parametrize(("cells", "expected"), [
    ((1200, 5, 6, 108), "pass"), ((1100, 2, 110, 107), "regression"),
    ((12, 1, 2, 1), "inconclusive")])
def test_a_runs_paired_cells_decide_the_claim(tmp_path: Path, cells: tuple[int, ...],
                                              expected: str) -> None:
    """The claim reads the accuracy step's cells from run.json as bench writes it."""
    run = load_run(make_run(tmp_path / "gfx95", runner_class="mi355x",
                            paired_accuracy=_paired(*cells)))
    check = accuracy_claim(run, JudgeConfig(accuracy_noninferiority_margin=0.02), 0.95)
    assert check.verdict == expected and check.interval.method.startswith("paired")


def test_recorded_accuracy_interval_is_rescaled_to_the_family_level(tmp_path: Path) -> None:
    """Only a recorded 95 % interval: its standard error is re-used at the gate's level."""
    paired = {"on_vs_off": {"n": 1319, "diff": -0.004, "diff_low": -0.012, "diff_high": 0.004}}
    run = load_run(make_run(tmp_path / "gfx95", runner_class="mi355x", paired_accuracy=paired))
    check = accuracy_claim(run, JudgeConfig(), 0.999)
    assert check.interval.confidence == 0.999 and "rescaled" in check.interval.method
    assert check.interval.high - check.interval.low > 0.016 * 3.29 / 1.96 * 0.99


# --------------------------------------------------------------- each mode against its baseline


def _acc_run(tmp_path: Path, accuracy: dict[str, dict[str, int]]) -> Any:
    return load_run(make_run(tmp_path / "acc", modes=("off", "on"), concurrencies=(4,),
                             accuracy=accuracy))


def _outcomes(bits: str, ids: list[int]) -> dict[str, Any]:
    return {"ids": ids, "correct": bits}


def test_accuracy_checks_per_mode_in_mode_order_only_where_both_have_results(
        tmp_path: Path) -> None:
    run = _acc_run(tmp_path, {"on": {"n": 4, "correct": 3}, "off": {"n": 4, "correct": 2}})
    baseline = {"points": [], "accuracy": {"on": {"n": 4, "correct": 3},
                                           "off": {"n": 4, "correct": 3},
                                           "forced": {"n": 4, "correct": 3}}}
    config = JudgeConfig(metrics=(), accuracy_floor=0.05)
    pendings = baseline_accuracy_pendings(run, baseline, config)
    assert [p.name for p in pendings] == ["off GSM8K accuracy vs baseline",
                                          "on GSM8K accuracy vs baseline"]
    assert [p.primary for p in pendings] == [True, True]
    assert [p.primary for p in baseline_accuracy_pendings(run, baseline, config,
                                                          primary=False)] == [False, False]
    none = {"points": [], "accuracy": {"off": {"n": 0, "correct": 0}}}
    assert not baseline_accuracy_pendings(run, none, config)


def _accuracy_check(tmp_path: Path, run_acc: dict[str, Any], base_acc: dict[str, Any],
                    outcomes: dict[int, bool] | None, confidence: float = 0.95) -> Any:
    run = _acc_run(tmp_path, {"off": {"n": 1, "correct": 1}})
    run["accuracy"]["off"] = run_acc
    [pending] = baseline_accuracy_pendings(run, {"points": [], "accuracy": {"off": base_acc}},
                                           JudgeConfig(metrics=(), accuracy_floor=0.03),
                                           {"off": outcomes})
    assert pending.counts is True
    return pending.evaluate(confidence)


def test_accuracy_paired_on_common_question_ids(tmp_path: Path) -> None:
    # common ids 1..4: run 1,1,0,0 baseline 1,0,1,0 -> both 1, run-only 1, base-only 1, neither 1
    base = {"n": 5, "correct": 3, "outcomes": _outcomes("11010", [0, 1, 2, 3, 4])}
    cur = {1: True, 2: True, 3: False, 4: False, 9: True}
    check = _accuracy_check(tmp_path, {"n": 5, "correct": 3}, base, cur)
    assert (check.kind, check.name, check.metric, check.mode, check.floor, check.claim) == (
        "accuracy", "off GSM8K accuracy vs baseline", "accuracy", "off", 0.03, None)
    assert check.interval.method == "paired (Agresti-Min)" and check.interval.estimate == 0.0
    assert (check.current_value, check.reference_value) == (0.5, 0.5)
    assert check.reason == ("paired on 4 common questions (2 discordant); accuracy points "
                            "(of 5 in the run, 5 in the baseline)")
    assert check.verdict == "inconclusive"


def test_accuracy_paired_cells_are_told_apart(tmp_path: Path) -> None:
    # 10 common ids: both right 3 (0-2), run only 2 (3-4), baseline only 1 (5), neither 4 (6-9)
    base = {"n": 10, "correct": 4, "outcomes": _outcomes("1110010000", list(range(10)))}
    cur = {i: i < 5 for i in range(10)}
    check = _accuracy_check(tmp_path, {"n": 10, "correct": 5}, base, cur)
    assert (check.current_value, check.reference_value) == (0.5, 0.4)
    assert check.interval.estimate == pytest.approx(0.1)             # (2 - 1) / 10
    assert check.interval.n_current == check.interval.n_reference == 10
    assert check.reason == "paired on 10 common questions (3 discordant); accuracy points"


def test_a_single_question_run_is_judged_not_refused(tmp_path: Path) -> None:
    check = _accuracy_check(tmp_path, {"n": 1, "correct": 1}, {"n": 1, "correct": 1}, None)
    assert check.verdict != "error" and check.interval is not None


def test_accuracy_paired_on_every_question_says_nothing_more(tmp_path: Path) -> None:
    base = {"n": 2, "correct": 1, "outcomes": _outcomes("10", [5, 6])}
    check = _accuracy_check(tmp_path, {"n": 2, "correct": 1}, base, {5: True, 6: False})
    assert check.reason == "paired on 2 common questions (0 discordant); accuracy points"


@pytest.mark.parametrize(("base_outcomes", "run_outcomes", "why"), [
    (None, {1: True}, "the baseline stores no per-question outcomes"),
    (_outcomes("1", [1]), None, "the run has no gsm8k records to pair"),
    (_outcomes("1", [1]), {}, "the run has no gsm8k records to pair"),
    (_outcomes("1", [1]), {2: True}, "no question ids in common"),
])
def test_accuracy_unpaired_says_why(tmp_path: Path, base_outcomes: Any, run_outcomes: Any,
                                    why: str) -> None:
    base: dict[str, Any] = {"n": 400, "correct": 360}
    if base_outcomes is not None:
        base["outcomes"] = base_outcomes
    check = _accuracy_check(tmp_path, {"n": 500, "correct": 400}, base, run_outcomes, 0.9)
    assert check.reason == f"unpaired ({why}); difference in accuracy points"
    low, high = confint_proportions_2indep(400, 500, 360, 400, method="newcomb",
                                           compare="diff", alpha=0.1)
    assert (check.interval.low, check.interval.high) == pytest.approx((low, high))
    assert (check.current_value, check.reference_value) == (0.8, 0.9)
    assert check.verdict == "regression"            # whole interval below -3 points


@pytest.mark.parametrize("run_acc", [{"n": 0, "correct": 0}, {"n": "5", "correct": 1},
                                     {"n": 5, "correct": 1.0}, {"correct": 1}])
def test_accuracy_bad_run_record_is_an_error(tmp_path: Path, run_acc: dict[str, Any]) -> None:
    check = _accuracy_check(tmp_path, run_acc, {"n": 4, "correct": 3}, None)
    assert check.verdict == "error" and check.interval is None
    assert check.reason == "run.json accuracy.off: needs integer n > 0 and correct"


def test_higher_accuracy_is_an_improvement(tmp_path: Path) -> None:
    check = _accuracy_check(tmp_path, {"n": 1000, "correct": 950}, {"n": 1000, "correct": 800},
                            None)
    assert check.verdict == "improvement"
    assert json.dumps(check.to_dict())


# ------------------------------------------------------------------------- head against base


def _ab_dir(tmp_path: Path, labels: tuple[str, ...] = ("head-off", "base-off")
            ) -> tuple[dict[str, Any], Path]:
    """A head-vs-base run's accuracy record (what the check reads of run.json) and its folder."""
    run = {"accuracy": {label: {"n": 100, "correct": 80} for label in (*labels, "off")}}
    run_dir = tmp_path / "ab"
    run_dir.mkdir()
    return run, run_dir


def _head_vs_base(tmp_path: Path, head: list[bool], base: list[bool],
                  confidence: float = 0.95) -> Any:
    run, run_dir = _ab_dir(tmp_path)
    write_gsm8k_records(run_dir, "head-off", head)
    write_gsm8k_records(run_dir, "base-off", base)
    pendings = head_vs_base_accuracy_pendings(run, run_dir, JudgeConfig())  # type: ignore[arg-type]
    assert [p.name for p in pendings] == [
        "off GSM8K head vs base (paired, non-inferior within 2.0 pp)"]
    assert pendings[0].counts and pendings[0].primary is True     # gates unless a family says
    return pendings[0].evaluate(confidence)


def test_head_vs_base_identical_answers_pass(tmp_path: Path) -> None:
    same = [True] * 180 + [False] * 20
    check = _head_vs_base(tmp_path, same, same)
    assert (check.kind, check.metric, check.mode, check.reference) == ("accuracy", "accuracy",
                                                                       "off", "base")
    assert check.verdict == "pass" and check.floor == 0.02
    assert (check.current_value, check.reference_value) == (0.9, 0.9)
    assert check.interval.scale == "difference" and check.interval.estimate == 0.0
    assert check.interval.n_current == check.interval.n_reference == 200
    assert check.interval.method == "paired (Agresti-Min)" and check.interval.confidence == 0.95


def test_head_vs_base_clear_drop_is_a_regression(tmp_path: Path) -> None:
    base = [True] * 200
    head = [False] * 60 + [True] * 140                   # 30 pp worse, paired
    check = _head_vs_base(tmp_path, head, base)
    assert check.verdict == "regression"
    assert (check.current_value, check.reference_value) == (0.7, 1.0)
    assert check.interval.estimate == pytest.approx(-0.3) and check.interval.high < -0.02


def test_head_vs_base_values_are_each_trees_share_of_the_paired_questions(
        tmp_path: Path) -> None:
    base = [True] * 140 + [False] * 30 + [True] * 10 + [False] * 20
    head = [True] * 140 + [True] * 30 + [False] * 10 + [False] * 20   # 30 head-only, 10 base-only
    check = _head_vs_base(tmp_path, head, base)
    assert (check.current_value, check.reference_value) == (0.85, 0.75)
    assert check.interval.estimate == pytest.approx(0.1)


def test_head_vs_base_margin_is_named_in_points(tmp_path: Path) -> None:
    run, run_dir = _ab_dir(tmp_path)
    (pending,) = head_vs_base_accuracy_pendings(run, run_dir,  # type: ignore[arg-type]
                                                JudgeConfig(accuracy_floor=0.1), primary=False)
    assert pending.name == "off GSM8K head vs base (paired, non-inferior within 10.0 pp)"
    assert pending.primary is False


def test_head_vs_base_small_sample_is_inconclusive(tmp_path: Path) -> None:
    base = [True] * 10
    head = [True] * 9 + [False]
    check = _head_vs_base(tmp_path, head, base)
    assert check.verdict == "inconclusive"
    assert check.interval.low < -0.02 <= check.interval.high


def test_head_vs_base_records_that_cannot_be_paired_are_an_error(tmp_path: Path) -> None:
    run, run_dir = _ab_dir(tmp_path)
    write_gsm8k_records(run_dir, "head-off", [True, False])
    write_gsm8k_records(run_dir, "base-off", [True, False], gold="8")
    (pending,) = head_vs_base_accuracy_pendings(run, run_dir, JudgeConfig())  # type: ignore[arg-type]
    check = pending.evaluate(0.95)
    assert check.verdict == "error" and "gold" in check.reason and check.interval is None
    assert (check.kind, check.mode, check.reference, check.floor) == ("accuracy", "off", "base",
                                                                      0.02)


def test_no_head_vs_base_check_without_both_labels(tmp_path: Path) -> None:
    run, run_dir = _ab_dir(tmp_path, labels=("head-off", "base-on"))
    assert not head_vs_base_accuracy_pendings(run, run_dir, JudgeConfig())  # type: ignore[arg-type]


def test_the_full_split_passes_at_its_resolution_when_it_cannot_rule_out_the_margin() -> None:
    """1319 questions with 2 % discordant, -0.5 point: the one-sided interval reaches below
    -1 point, but rules out the loss the design resolves (under 2 points): pass, saying so;
    a run wholly below -1 point is still a regression."""
    config = JudgeConfig(accuracy_noninferiority_margin=0.01)
    run = {"paired_accuracy": {"on_vs_off": {"both_correct": 1210, "a_only": 10,
                                             "b_only": 16, "both_wrong": 83}}}
    check = accuracy_claim(run, config, tost_confidence(0.99))   # type: ignore[arg-type]
    assert check.interval is not None and check.interval.low < -0.01
    assert check.verdict == "pass" and 0.01 < check.resolution < 0.02
    assert check.interval.low >= -check.resolution
    assert check.reason.startswith(f"no loss > {100 * check.resolution:.1f} pp (this design's")
    worse = {"paired_accuracy": {"on_vs_off": {"both_correct": 1150, "a_only": 0,
                                               "b_only": 60, "both_wrong": 109}}}
    assert accuracy_claim(worse, config,  # type: ignore[arg-type]
                          tost_confidence(0.99)).verdict == "regression"
