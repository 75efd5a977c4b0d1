"""Head vs base (servegate.judge.ab): the arm views, and a run from before [design] measuring
both trees judged by the block judge (each tree's repeats its own starts), on hand-written runs
(issue 15). The paired GSM8K check is servegate.judge.accuracy_checks'."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from judge_runs import make_run

from servegate.commands import compare
from servegate.config.judge import JudgeConfig
from servegate.judge import ab
from servegate.judge.block_checks import block_pendings
from servegate.judge.evaluate import judge
from servegate.judge.evidence import evidence_from_run


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


def _pendings(run: dict[str, Any], config: JudgeConfig) -> list[Any]:
    """The block judge's checks of a head-vs-base run (what ``judge`` evaluates)."""
    return block_pendings(run, evidence_from_run(run), config)      # type: ignore[arg-type]


def _ab_checks(run: dict[str, Any], config: JudgeConfig) -> dict[str, Any]:
    return {c.name: c for c in (p.evaluate(0.95) for p in _pendings(run, config))
            if c.kind in ("ab", "integrity")}


def test_a_legacy_head_vs_base_run_compares_the_trees_as_independent_starts(
        tmp_path: Path) -> None:
    """A run from before [design]: every repeat its own server start per tree, so head and base
    are two independent nested means (each repeat one block of its own start)."""
    run, _ = _ab_run(tmp_path, head_factor=1.5)
    config = JudgeConfig()
    checks = _ab_checks(run, config)
    assert list(checks) == [f"{mode}@c2 {metric} vs base" for mode in ("off", "on")
                            for metric in config.metrics]
    check = checks[f"off@c2 {config.metrics[0]} vs base"]
    assert (check.kind, check.mode, check.concurrency, check.reference) == ("ab", "off", 2,
                                                                            "base")
    assert check.metric == config.metrics[0] and check.floor == config.floor(check.metric)
    assert check.interval.method.startswith("blocks (3x1 vs 3x1 starts x blocks")
    assert check.interval.n_starts == 3
    assert check.current_value == pytest.approx(check.reference_value * 1.5, rel=0.1)
    assert {c.verdict for c in checks.values() if c.metric.endswith("ttft_ms")} == {"regression"}


def test_a_point_one_tree_lacks_is_an_integrity_error(tmp_path: Path) -> None:
    for arm in ("base", "head"):
        run, _ = _ab_run(tmp_path / arm, drop=(arm, "on", 2))
        checks = _ab_checks(run, JudgeConfig())
        check = checks["on@c2 measured on both trees"]
        assert (check.kind, check.metric, check.verdict, check.gate, check.mode,
                check.concurrency, check.reason) == (
            "integrity", "points", "error", True, "on", 2, f"point missing from the {arm} tree")
        assert [p.counts for p in _pendings(run, JudgeConfig())
                if p.name == check.name] == [False]
        # the point both trees measured is still judged, metric by metric
        assert {c.name for c in checks.values() if c.kind == "ab"} == {
            f"off@c2 {m} vs base" for m in JudgeConfig().metrics}


@pytest.mark.parametrize("arm", ["head", "base"])
def test_a_metric_one_tree_lacks_is_inconclusive_naming_the_tree(tmp_path: Path,
                                                                 arm: str) -> None:
    run, _ = _ab_run(tmp_path)
    config = JudgeConfig(metrics=("mean_ttft_ms", "median_tpot_ms"),
                         floors={"mean_ttft_ms": 0.03}, default_floor=0.07)
    for point in run["points"]:
        if point["arm"] == arm:
            point["metrics"].pop("mean_ttft_ms")
    checks = _ab_checks(run, config)
    check = checks["off@c2 mean_ttft_ms vs base"]
    assert check.verdict == "inconclusive" and check.interval is None
    assert check.reason == f"mean_ttft_ms: no blocks for {arm}-off at concurrency [2]"
    # floors are per metric
    assert [(c.metric, c.floor) for c in checks.values()] == [
        ("mean_ttft_ms", 0.03), ("median_tpot_ms", 0.07)] * 2


def test_higher_is_better_metrics_regress_when_they_drop(tmp_path: Path) -> None:
    run, _ = _ab_run(tmp_path, head_factor=1.6)     # latencies up: throughput down
    config = JudgeConfig(metrics=("output_throughput",), run_to_run_cv=0.01)
    checks = _ab_checks(run, config)
    assert {c.verdict for c in checks.values()} == {"regression"}
    throughput = [c for c in checks.values() if c.metric == "output_throughput"]
    assert len(throughput) == 2 and all(c.interval.estimate < 1 / 1.4 for c in throughput)


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
    config = judgement.config
    # modes x (concurrencies x metrics + the aggregate over concurrencies per aggregate metric)
    assert len(ab) == 2 * (2 * len(config.metrics) + len(config.aggregate_metrics))
    assert all(c.reference == "base" and c.name.endswith(" vs base") for c in ab)
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
    assert "mean_ttft_ms at all concurrencies (geometric mean) vs base" in out
    assert "REGRESSION" in out
    verdict = json.loads((run_dir / "verdict.json").read_text())
    slowed = {c["metric"] for c in verdict["checks"] if c["verdict"] == "regression"}
    assert {"mean_ttft_ms", "median_tpot_ms"} <= slowed


def test_a_point_missing_from_one_tree_is_an_error(tmp_path: Path) -> None:
    judgement = judge(ab_run(tmp_path, 1.0, drop_head_point=True))
    errors = [c for c in judgement.checks if c.verdict == "error"]
    assert [c.name for c in errors] == ["on@c4 measured on both trees"]
    assert errors[0].reason == "point missing from the head tree"
    assert judgement.exit_code == 2
