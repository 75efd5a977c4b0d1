"""The in-run claims at their edges (servegate.judge.claims, issue 15): a forced experiment
judged with its metric's own floor and direction, each arm named when its data is missing, and
the GSM8K on-vs-off interval rebuilt from a recorded one or from a single paired question."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from judge_runs import make_run
from scipy import stats as sps

from servegate.config.judge import JudgeConfig
from servegate.judge.claims import _paired_accuracy_interval, claim_pendings
from servegate.results import load_run


def _run(tmp_path: Path, modes: tuple[str, ...], factor: float,
         drop: tuple[str, str] | None = None) -> Any:
    """3 repeats at c4; the non-off arms' latencies scaled by `factor`; `drop` = (mode, metric)
    removed from every point of that mode."""
    run_dir = make_run(tmp_path / "run", modes=modes, concurrencies=(4,), repeats=3,
                       n_requests=60, effect=lambda m, c: 1.0 if m == "off" else factor)
    if drop:
        raw = json.loads((run_dir / "run.json").read_text())
        for point in raw["points"]:
            if point["mode"] == drop[0]:
                del point["metrics"][drop[1]]
        (run_dir / "run.json").write_text(json.dumps(raw))
    return load_run(run_dir)


def _check(run: Any, config: JudgeConfig, prefix: str) -> Any:
    [pending] = [p for p in claim_pendings(run, config) if p.name.startswith(prefix)]
    return pending.evaluate(0.99)


def test_an_experiment_uses_its_metrics_own_floor(tmp_path: Path) -> None:
    run = _run(tmp_path, ("off", "forced"), 1.2)             # forced 20 % slower
    loose = JudgeConfig(metrics=("mean_ttft_ms",), floors={"mean_ttft_ms": 0.5})
    check = _check(run, loose, "experiment:")
    assert (check.floor, check.verdict, check.gate) == (0.5, "pass", False)
    strict = JudgeConfig(metrics=("mean_ttft_ms",), floors={"mean_ttft_ms": 0.05},
                         default_floor=0.5)
    assert _check(run, strict, "experiment:").verdict == "regression"


def test_an_experiment_follows_its_metrics_direction(tmp_path: Path) -> None:
    run = _run(tmp_path, ("off", "forced"), 0.7)             # forced faster: throughput up
    config = JudgeConfig(metrics=("output_throughput",), default_floor=0.05)
    check = _check(run, config, "experiment:")
    assert check.interval.estimate > 1.2
    assert check.verdict == "improvement"


def test_a_missing_metric_names_the_arm(tmp_path: Path) -> None:
    config = JudgeConfig(metrics=("mean_ttft_ms",))
    for mode, prefix, label in (("forced", "experiment:", "forced@c4"),
                                ("off", "experiment:", "off@c4")):
        run = _run(tmp_path / mode, ("off", "forced"), 1.0, drop=(mode, "mean_ttft_ms"))
        check = _check(run, config, prefix)
        assert (check.verdict, check.reason) == ("inconclusive",
                                                 f"mean_ttft_ms missing from {label}")
    run = _run(tmp_path / "noop", ("off", "on"), 1.0, drop=("off", "mean_ttft_ms"))
    check = _check(run, config, "no-op: on@c4 mean_ttft_ms")
    assert (check.verdict, check.reason) == ("inconclusive", "mean_ttft_ms missing from off@c4")


def test_the_gated_ttft_claim_names_its_arms(tmp_path: Path) -> None:
    config = JudgeConfig(metrics=("mean_ttft_ms",))
    for mode in ("on", "off"):
        run_dir = make_run(tmp_path / mode, runner_class="mi355x", modes=("off", "on"),
                           concurrencies=(4,), repeats=3)
        raw = json.loads((run_dir / "run.json").read_text())
        for point in raw["points"]:
            if point["mode"] == mode:
                del point["metrics"][config.gated_ttft_metric]
        (run_dir / "run.json").write_text(json.dumps(raw))
        check = _check(load_run(run_dir), config, f"claim: on vs off {config.gated_ttft_metric}")
        assert check.reason == f"{config.gated_ttft_metric} missing from {mode}@c4"


def test_a_recorded_interval_is_rescaled_to_the_familys_level() -> None:
    paired = {"diff": 0.01, "diff_low": -0.02, "diff_high": 0.04, "n": 200, "confidence": 0.95}
    iv = _paired_accuracy_interval(paired, 0.99)
    se = 0.06 / (2 * sps.norm.ppf(0.975))
    z = sps.norm.ppf(0.995)
    assert iv is not None
    assert (iv.estimate, iv.scale, iv.n_current, iv.n_reference) == (0.01, "difference", 200, 200)
    assert iv.method == "paired (recorded at 95%, rescaled)" and iv.confidence == 0.99
    assert iv.se == pytest.approx(se, rel=1e-12)
    assert (iv.low, iv.high) == pytest.approx((0.01 - z * se, 0.01 + z * se), rel=1e-12)


def test_one_paired_question_is_enough_for_the_cell_counts() -> None:
    iv = _paired_accuracy_interval({"both_correct": 1, "a_only": 0, "b_only": 0,
                                    "both_wrong": 0}, 0.95)
    assert iv is not None and iv.method == "paired (Agresti-Min)" and iv.n_current == 1
