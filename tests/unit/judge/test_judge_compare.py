"""Run vs stored baseline (servegate.judge.compare.baseline_pendings): which checks exist, in
which order, with which fields and reasons, and the GSM8K check paired on question ids, against
baselines and cell counts written out by hand (issue 15)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from judge_runs import make_run, point_mean
from statsmodels.stats.proportion import confint_proportions_2indep

from servegate.config.judge import JudgeConfig
from servegate.core.results import load_run
from servegate.judge.compare import baseline_pendings

RUN = "run"


def _run(tmp_path: Path, modes: tuple[str, ...] = ("off", "on", "forced"),
         concs: tuple[int, ...] = (4, 16), **kw: Any) -> Any:
    return load_run(make_run(tmp_path / RUN, modes=modes, concurrencies=concs,
                             n_requests=50, **kw))


def _bpoint(mode: str, conc: int, value: float = 100.0, metrics: tuple[str, ...] = (
        "mean_ttft_ms",), requests: list[float] | None = None) -> dict[str, Any]:
    return {"mode": mode, "concurrency": conc,
            "metrics": {m: {"value": value, "n_repeats": 1, "repeats": [value], "spread": None}
                        for m in metrics},
            "requests": {"ttft_ms": requests or [value * 0.9, value, value * 1.1] * 20}}


CONFIG = JudgeConfig(metrics=("mean_ttft_ms",), run_to_run_cv=0.05)


def test_checks_in_mode_then_concurrency_order_with_integrity_and_new_points(
        tmp_path: Path) -> None:
    run = _run(tmp_path, modes=("off", "on", "forced"), concs=(4, 16))
    baseline = {"points": [_bpoint("forced", 16), _bpoint("on", 16), _bpoint("off", 16),
                           _bpoint("off", 4), _bpoint("off", 64)]}
    pendings = baseline_pendings(run, baseline, CONFIG)
    assert [p.name for p in pendings] == [
        "off@c4 mean_ttft_ms vs baseline", "off@c16 mean_ttft_ms vs baseline",
        "off@c64 present in run", "on@c4 vs baseline", "on@c16 mean_ttft_ms vs baseline",
        "forced@c4 vs baseline", "forced@c16 mean_ttft_ms vs baseline"]
    assert [p.counts for p in pendings] == [True, True, False, False, True, False, True]
    missing = pendings[2].evaluate(0.5)
    assert (missing.kind, missing.metric, missing.verdict, missing.gate, missing.mode,
            missing.concurrency, missing.reason) == (
        "integrity", "points", "error", True, "off", 64,
        "point is in the baseline but missing from the run")
    new = pendings[3].evaluate(0.5)
    assert (new.kind, new.metric, new.verdict, new.gate, new.mode, new.concurrency,
            new.reason) == ("baseline", "points", "inconclusive", False, "on", 4,
                            "new point: not in the baseline (update baselines to gate it)")


def test_a_metric_the_baseline_lacks_is_reported_not_gated(tmp_path: Path) -> None:
    run = _run(tmp_path, modes=("off",), concs=(4,))
    config = JudgeConfig(metrics=("mean_ttft_ms", "mean_tpot_ms"), run_to_run_cv=0.05)
    pendings = baseline_pendings(run, {"points": [_bpoint("off", 4)]}, config)
    assert [p.name for p in pendings] == ["off@c4 mean_ttft_ms vs baseline",
                                          "off@c4 mean_tpot_ms vs baseline"]
    assert [p.counts for p in pendings] == [True, False]
    check = pendings[1].evaluate(0.9)
    assert (check.kind, check.metric, check.verdict, check.gate, check.mode, check.concurrency,
            check.reason) == ("baseline", "mean_tpot_ms", "inconclusive", False, "off", 4,
                              "metric not in the baseline (update baselines to gate it)")


def test_metric_check_fields_and_verdict(tmp_path: Path) -> None:
    run = _run(tmp_path, modes=("off",), concs=(4,), ttft_ms=150.0)
    config = JudgeConfig(metrics=("mean_ttft_ms",), floors={"mean_ttft_ms": 0.07},
                         run_to_run_cv=0.01)
    [pending] = baseline_pendings(run, {"points": [_bpoint("off", 4, 100.0)]}, config)
    check = pending.evaluate(0.95)
    assert (check.kind, check.metric, check.mode, check.concurrency, check.reference,
            check.floor, check.gate) == ("baseline", "mean_ttft_ms", "off", 4, "baseline", 0.07,
                                         True)
    assert check.verdict == "regression" and check.interval.estimate > 1.3
    assert check.current_value == pytest.approx(point_mean(tmp_path / RUN, "off", 4, "mean_ttft_ms"))
    assert check.reference_value == 100.0
    better = baseline_pendings(run, {"points": [_bpoint("off", 4, 300.0)]}, config)[0]
    assert better.evaluate(0.95).verdict == "improvement"


def test_higher_is_better_metrics_are_judged_that_way(tmp_path: Path) -> None:
    run = _run(tmp_path, modes=("off",), concs=(4,), repeats=3, run_cv=0.01)
    config = JudgeConfig(metrics=("output_throughput",), run_to_run_cv=0.01)
    value = point_mean(tmp_path / RUN, "off", 4, "output_throughput")
    for factor, expected in ((2.0, "regression"), (0.5, "improvement")):
        repeats = [value * factor * f for f in (0.99, 1.0, 1.01)]
        base = {"mode": "off", "concurrency": 4, "requests": {}, "metrics": {
            "output_throughput": {"value": value * factor, "n_repeats": 3, "repeats": repeats,
                                  "spread": 0.01}}}
        check = baseline_pendings(run, {"points": [base]}, config)[0].evaluate(0.95)
        assert check.verdict == expected, (factor, check.describe())


def test_metric_missing_from_the_run_and_bad_values_are_errors(tmp_path: Path) -> None:
    run = _run(tmp_path, modes=("off",), concs=(4,))
    for point in run["points"]:
        del point["metrics"]["mean_ttft_ms"]
    check = baseline_pendings(run, {"points": [_bpoint("off", 4)]}, CONFIG)[0].evaluate(0.9)
    assert (check.verdict, check.reason) == ("error",
                                             "mean_ttft_ms missing from the run's points")
    run = _run(tmp_path / "z", modes=("off",), concs=(4,))
    zero = _bpoint("off", 4, 0.0, requests=[])
    zero["requests"] = {}
    config = JudgeConfig(metrics=("mean_ttft_ms",), min_repeats_for_repeat_bootstrap=1)
    check = baseline_pendings(run, {"points": [zero]}, config)[0].evaluate(0.9)
    assert check.verdict == "error" and check.reason.endswith("values must be positive for a "
                                                              "ratio")


def test_unjudgeable_is_inconclusive_with_the_reason(tmp_path: Path) -> None:
    run = _run(tmp_path, modes=("off",), concs=(4,))
    base = _bpoint("off", 4)
    base["requests"] = {}
    check = baseline_pendings(run, {"points": [base]}, CONFIG)[0].evaluate(0.9)
    assert check.verdict == "inconclusive" and check.interval is None
    assert "repeats" in check.reason and check.reason


# --------------------------------------------------------------------------------- accuracy

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
    names = [p.name for p in baseline_pendings(run, baseline, config)
             if "GSM8K" in p.name]
    assert names == ["off GSM8K accuracy vs baseline", "on GSM8K accuracy vs baseline"]
    none = {"points": [], "accuracy": {"off": {"n": 0, "correct": 0}}}
    assert not [p for p in baseline_pendings(run, none, config) if "GSM8K" in p.name]


def _accuracy_check(tmp_path: Path, run_acc: dict[str, Any], base_acc: dict[str, Any],
                    outcomes: dict[int, bool] | None, confidence: float = 0.95) -> Any:
    run = _acc_run(tmp_path, {"off": {"n": 1, "correct": 1}})
    run["accuracy"]["off"] = run_acc
    pendings = baseline_pendings(run, {"points": [], "accuracy": {"off": base_acc}},
                                 JudgeConfig(metrics=(), accuracy_floor=0.03),
                                 {"off": outcomes})
    [pending] = [p for p in pendings if "GSM8K" in p.name]
    assert pending.counts is True
    return pending.evaluate(confidence)


def test_accuracy_paired_on_common_question_ids(tmp_path: Path) -> None:
    # common ids 1..4: run 1,1,0,0 baseline 1,0,1,0 -> both 1, run-only 1, base-only 1, neither 1
    base = {"n": 5, "correct": 3, "outcomes": _outcomes("11010", [0, 1, 2, 3, 4])}
    cur = {1: True, 2: True, 3: False, 4: False, 9: True}
    check = _accuracy_check(tmp_path, {"n": 5, "correct": 3}, base, cur)
    assert (check.kind, check.name, check.metric, check.mode, check.floor) == (
        "accuracy", "off GSM8K accuracy vs baseline", "accuracy", "off", 0.03)
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
