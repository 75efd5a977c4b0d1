"""Head vs base (servegate.judge.ab): the arm views, the per-point checks and the paired GSM8K
non-inferiority check, on hand-written runs and records (issue 15)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from judge_runs import make_run, write_gsm8k_records

from servegate.commands import compare
from servegate.config.judge import JudgeConfig
from servegate.judge import ab
from servegate.judge.evaluate import judge


def _ab_run(tmp_path: Path, *, head_factor: float = 1.0, accuracy: bool = False,
            drop: tuple[str, str, int] | None = None) -> tuple[dict[str, Any], Path]:
    base = json.loads((make_run(tmp_path / "b", modes=("off", "on"), concurrencies=(2,),
                                repeats=3, run_cv=0.01) / "run.json").read_text())
    head = json.loads((make_run(tmp_path / "h", modes=("off", "on"), concurrencies=(2,),
                                repeats=3, seed=9, run_cv=0.01,
                                effect=lambda m, c: head_factor) / "run.json").read_text())
    for arm, doc in (("base", base), ("head", head)):
        for point in doc["points"]:
            point["arm"] = arm
    points = base["points"] + head["points"]
    if drop:
        points = [p for p in points if (p["arm"], p["mode"], p["concurrency"]) != drop]
    run = {**base, "points": points, "ab": {"base": {}, "head": {}}}
    run_dir = tmp_path / "ab"
    run_dir.mkdir()
    if accuracy:
        run["accuracy"] = {label: {"n": 100, "correct": 80}
                           for label in ("base-off", "head-off", "off")}
        run["paired_accuracy"] = {"head-off_vs_base-off": {"diff": 0.0},
                                  "on_vs_off": {"diff": 0.1}}
    (run_dir / "run.json").write_text(json.dumps(run))
    return run, run_dir


def test_arm_view_keeps_one_arm_and_plain_mode_labels(tmp_path: Path) -> None:
    run, _ = _ab_run(tmp_path, accuracy=True)
    head = ab.arm_view(run, "head")      # type: ignore[arg-type]
    assert {p["arm"] for p in head["points"]} == {"head"} and len(head["points"]) == 6
    assert head["accuracy"] == {"off": {"n": 100, "correct": 80}}
    assert head["paired_accuracy"] == {}                  # head-off vs base-off is no arm's own
    assert run["points"] and len(run["points"]) == 12     # the run itself is untouched
    base = ab.arm_view(run, "base")      # type: ignore[arg-type]
    assert base["accuracy"] == {"off": {"n": 100, "correct": 80}}
    paired = {**run, "paired_accuracy": {"head-on_vs_head-off": {"diff": 0.2}}}
    assert ab.arm_view(paired, "head")["paired_accuracy"] == {"on_vs_off": {"diff": 0.2}}
    assert ab.arm_view({}, "head") == {"points": [], "accuracy": {},        # type: ignore[arg-type]
                                       "paired_accuracy": {}}
    assert ab.is_ab(run) and not ab.is_ab({"ab": {}})    # type: ignore[arg-type]


def test_one_check_per_point_and_metric_named_and_paired(tmp_path: Path) -> None:
    run, run_dir = _ab_run(tmp_path, head_factor=1.5)
    config = JudgeConfig()
    pendings = ab.ab_pendings(run, run_dir, config)      # type: ignore[arg-type]
    assert [p.name for p in pendings] == [f"{mode}@c2 {metric} head vs base"
                                          for mode in ("off", "on") for metric in config.metrics]
    assert all(p.counts for p in pendings)
    check = pendings[0].evaluate(0.95)
    assert (check.kind, check.mode, check.concurrency, check.reference) == ("ab", "off", 2,
                                                                            "base")
    assert check.metric == config.metrics[0] and check.floor == config.floor(check.metric)
    assert check.interval is not None and check.interval.method.startswith("repeats-paired")
    assert check.current_value == pytest.approx(check.reference_value * 1.5, rel=0.1)
    slowed = [p.evaluate(0.95) for p in pendings]
    assert {c.verdict for c in slowed if c.metric.endswith("ttft_ms")} == {"regression"}


def test_a_point_one_arm_lacks_is_an_integrity_error(tmp_path: Path) -> None:
    run, run_dir = _ab_run(tmp_path, drop=("base", "on", 2))
    pendings = ab.ab_pendings(run, run_dir, JudgeConfig())      # type: ignore[arg-type]
    errors = [p for p in pendings if not p.counts]
    assert [p.name for p in errors] == ["on@c2 measured on both trees"]
    check = errors[0].evaluate(0.5)
    assert (check.kind, check.verdict, check.reason, check.mode, check.concurrency) == (
        "integrity", "error", "point missing from the base arm", "on", 2)
    run2, run_dir2 = _ab_run(tmp_path / "2", drop=("head", "off", 2))
    errors = [p for p in ab.ab_pendings(run2, run_dir2, JudgeConfig()) if not p.counts]
    assert errors[0].evaluate(0.9).reason == "point missing from the head arm"
    assert len([p for p in ab.ab_pendings(run2, run_dir2, JudgeConfig()) if p.counts]) == \
        len(JudgeConfig().metrics)                      # the other point is still judged


def test_a_metric_one_arm_lacks_is_inconclusive_with_the_reason(tmp_path: Path) -> None:
    run, run_dir = _ab_run(tmp_path)
    metric = JudgeConfig().metrics[0]
    for point in run["points"]:
        if point["arm"] == "head":
            point["metrics"].pop(metric)
    check = ab.ab_pendings(run, run_dir, JudgeConfig())[0].evaluate(0.95)   # type: ignore[arg-type]
    assert check.verdict == "inconclusive" and check.interval is None
    assert check.reason == f"{metric} missing from head off@c2"


def _accuracy_check(tmp_path: Path, head: list[bool], base: list[bool],
                    confidence: float = 0.95) -> Any:
    run, run_dir = _ab_run(tmp_path, accuracy=True)
    write_gsm8k_records(run_dir, "head-off", head)
    write_gsm8k_records(run_dir, "base-off", base)
    pendings = [p for p in ab.ab_pendings(run, run_dir, JudgeConfig()) if "GSM8K" in p.name]
    assert [p.name for p in pendings] == [
        "off GSM8K head vs base (paired, non-inferior within 2.0 pp)"]
    assert pendings[0].counts and pendings[0].primary is True     # gates unless a family says
    return pendings[0].evaluate(confidence)


def test_accuracy_identical_answers_pass(tmp_path: Path) -> None:
    same = [True] * 180 + [False] * 20
    check = _accuracy_check(tmp_path, same, same)
    assert (check.kind, check.metric, check.mode, check.reference) == ("accuracy", "accuracy",
                                                                       "off", "base")
    assert check.verdict == "pass" and check.floor == 0.02
    assert (check.current_value, check.reference_value) == (0.9, 0.9)
    assert check.interval.scale == "difference" and check.interval.estimate == 0.0
    assert check.interval.n_current == check.interval.n_reference == 200
    assert check.interval.method == "paired (Agresti-Min)" and check.interval.confidence == 0.95


def test_accuracy_clear_drop_is_a_regression(tmp_path: Path) -> None:
    base = [True] * 200
    head = [False] * 60 + [True] * 140                   # 30 pp worse, paired
    check = _accuracy_check(tmp_path, head, base)
    assert check.verdict == "regression"
    assert (check.current_value, check.reference_value) == (0.7, 1.0)
    assert check.interval.estimate == pytest.approx(-0.3) and check.interval.high < -0.02


def test_accuracy_values_are_each_trees_share_of_the_paired_questions(tmp_path: Path) -> None:
    base = [True] * 140 + [False] * 30 + [True] * 10 + [False] * 20
    head = [True] * 140 + [True] * 30 + [False] * 10 + [False] * 20   # 30 head-only, 10 base-only
    check = _accuracy_check(tmp_path, head, base)
    assert (check.current_value, check.reference_value) == (0.85, 0.75)
    assert check.interval.estimate == pytest.approx(0.1)


def test_accuracy_margin_is_named_in_points(tmp_path: Path) -> None:
    run, run_dir = _ab_run(tmp_path, accuracy=True)
    (pending,) = ab.ab_accuracy_pendings(run, run_dir, JudgeConfig(accuracy_floor=0.1))
    assert pending.name == "off GSM8K head vs base (paired, non-inferior within 10.0 pp)"


def test_accuracy_small_sample_is_inconclusive(tmp_path: Path) -> None:
    base = [True] * 10
    head = [True] * 9 + [False]
    check = _accuracy_check(tmp_path, head, base)
    assert check.verdict == "inconclusive"
    assert check.interval.low < -0.02 <= check.interval.high


def test_accuracy_records_that_cannot_be_paired_are_an_error(tmp_path: Path) -> None:
    run, run_dir = _ab_run(tmp_path, accuracy=True)
    write_gsm8k_records(run_dir, "head-off", [True, False])
    write_gsm8k_records(run_dir, "base-off", [True, False], gold="8")
    check = next(p for p in ab.ab_pendings(run, run_dir, JudgeConfig())
                 if "GSM8K" in p.name).evaluate(0.95)
    assert check.verdict == "error" and "gold" in check.reason and check.interval is None
    assert (check.kind, check.mode, check.reference, check.floor) == ("accuracy", "off", "base",
                                                                      0.02)


def test_no_accuracy_check_without_both_labels(tmp_path: Path) -> None:
    run, run_dir = _ab_run(tmp_path, accuracy=True)
    run["accuracy"] = {"head-off": {"n": 1, "correct": 1}, "base-on": {"n": 1, "correct": 1}}
    assert not [p for p in ab.ab_pendings(run, run_dir, JudgeConfig()) if "GSM8K" in p.name]


def test_base_metric_missing_names_the_base_arm_and_floors_are_per_metric(
        tmp_path: Path) -> None:
    run, run_dir = _ab_run(tmp_path)
    for point in run["points"]:
        if point["arm"] == "base":
            point["metrics"].pop("mean_ttft_ms")
    config = JudgeConfig(metrics=("mean_ttft_ms", "median_tpot_ms"),
                         floors={"mean_ttft_ms": 0.03}, default_floor=0.07)
    checks = [p.evaluate(0.95) for p in ab.ab_pendings(run, run_dir, config)]  # type: ignore[arg-type]
    assert checks[0].reason == "mean_ttft_ms missing from base off@c2"
    assert [c.floor for c in checks] == [0.03, 0.07, 0.03, 0.07]


def test_higher_is_better_metrics_regress_when_they_drop(tmp_path: Path) -> None:
    run, run_dir = _ab_run(tmp_path, head_factor=1.6)     # latencies up: throughput down
    config = JudgeConfig(metrics=("output_throughput",), run_to_run_cv=0.01)
    checks = [p.evaluate(0.95) for p in ab.ab_pendings(run, run_dir, config)]  # type: ignore[arg-type]
    assert {c.verdict for c in checks} == {"regression"}


def test_points_in_mode_then_concurrency_order_and_integrity_fields(tmp_path: Path) -> None:
    run, run_dir = _ab_run(tmp_path, drop=("base", "on", 2))
    extra = []
    for point in run["points"]:
        if point["mode"] == "off":
            for mode, conc in (("forced", 2), ("off", 16)):
                extra.append({**point, "mode": mode, "concurrency": conc})
    run["points"] += extra
    config = JudgeConfig(metrics=("mean_ttft_ms",))
    pendings = ab.ab_pendings(run, run_dir, config)        # type: ignore[arg-type]
    assert [p.name for p in pendings] == [
        "off@c2 mean_ttft_ms head vs base", "off@c16 mean_ttft_ms head vs base",
        "on@c2 measured on both trees", "forced@c2 mean_ttft_ms head vs base"]
    integrity = pendings[2]
    assert integrity.counts is False
    check = integrity.evaluate(0.9)
    assert (check.metric, check.name, check.gate) == ("points", "on@c2 measured on both trees",
                                                      True)


# Head vs base: the interleaved plan, and the judge pairing head with base inside one run.


def ab_run(tmp_path: Path, head_factor: float, *, seed: int = 1,
           drop_head_point: bool = False) -> Path:
    """One head-vs-base run.json, as bench writes it: points tagged with their arm."""
    base = json.loads((make_run(tmp_path / "b", modes=("off", "on"), repeats=3, seed=seed,
                                run_cv=0.01) / "run.json").read_text())
    head = json.loads((make_run(tmp_path / "h", modes=("off", "on"), repeats=3, seed=seed + 50,
                                run_cv=0.01, effect=lambda m, c: head_factor)
                       / "run.json").read_text())
    for point in base["points"]:
        point["arm"] = "base"
    for point in head["points"]:
        point["arm"] = "head"
    if drop_head_point:
        head["points"] = [p for p in head["points"] if (p["mode"], p["concurrency"]) != ("on", 4)]
    run = {**base, "points": base["points"] + head["points"], "run_id": "ab",
           "ab": {"base": {"path": "/t/base", "version": "0.5.23"},
                  "head": {"path": "/t/head", "version": "0.5.23"}}}
    run_dir = tmp_path / "ab"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


def test_a_a_has_no_regression_and_claims_use_the_head_arm(tmp_path: Path) -> None:
    judgement = judge(ab_run(tmp_path, 1.0), baselines_root=tmp_path / "none")
    ab = [c for c in judgement.checks if c.kind == "ab"]
    assert len(ab) == 2 * 2 * len(judgement.config.metrics)     # modes x concurrencies x metrics
    assert all(c.reference == "base" and "head vs base" in c.name for c in ab)
    assert not [c for c in judgement.checks if c.verdict in ("regression", "error")]
    assert not [c for c in judgement.checks if c.kind == "baseline"]   # not vs a stored one
    claims = [c for c in judgement.checks if c.kind == "claim"]
    assert claims, "the head arm's no-op claims must be judged"
    assert any("head vs base" in note for note in judgement.notes)


def test_slower_head_is_a_regression_naming_the_metrics(tmp_path: Path,
                                                        capsys) -> None:
    run_dir = ab_run(tmp_path, 1.5)
    assert compare.main([str(run_dir), "--no-plots"]) == 1
    out = capsys.readouterr().out
    assert "mean_ttft_ms head vs base" in out and "REGRESSION" in out
    verdict = json.loads((run_dir / "verdict.json").read_text())
    slowed = {c["metric"] for c in verdict["checks"] if c["verdict"] == "regression"}
    assert {"mean_ttft_ms", "median_tpot_ms"} <= slowed


def test_a_point_missing_from_one_tree_is_an_error(tmp_path: Path) -> None:
    judgement = judge(ab_run(tmp_path, 1.0, drop_head_point=True))
    errors = [c for c in judgement.checks if c.verdict == "error"]
    assert [c.name for c in errors] == ["on@c4 measured on both trees"]
    assert "missing from the head arm" in errors[0].reason
    assert judgement.exit_code == 2
