"""servegate.judge.block_checks: head vs base from a live pair is judged per block pair.

A live pair's two servers take turns on one machine, so drift and interference bursts hit a
block pair alike; what stays between the trees is each server start's own level (the prior
2 x run_to_run_cv^2 with one start per tree). Run folders from :mod:`unit.judge.block_runs`
with a shared per-block factor added to both arms (test data: the judge only reads run.json).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from unit.judge.block_runs import judge_table, write_block_run

from servegate.judge.evaluate import judge

TTFT = "off mean_ttft_ms at all concurrencies (geometric mean) vs base"


def _pair_run(tmp_path: Path, *, live: bool, head_factor: float, drift_sd: float = 0.25,
              seed: int = 3) -> Path:
    table = judge_table(family=["ab-aggregate"], run_to_run_cv=0.02, run_to_run_cv_dof=0)
    run_dir = write_block_run(
        tmp_path / ("live" if live else "serial"), arms=("base", "head"), modes=("off",),
        starts=1, blocks=8, block_sd=0.01, start_sd=0.0, table=table, seed=seed,
        effect=lambda label, *_: head_factor if label.startswith("head-") else 1.0)
    path = run_dir / "run.json"
    run = json.loads(path.read_text())
    drift = np.exp(np.random.default_rng(seed).normal(0.0, drift_sd, 8))   # per block round
    for point in run["points"]:
        point["metrics"] = {k: v * float(drift[point["block"]])
                            for k, v in point["metrics"].items()}
    run["design"]["live_pair"] = live
    path.write_text(json.dumps(run))
    return run_dir


def _ttft(run_dir: Path):
    judgement = judge(run_dir, baselines_root=run_dir.parent / "none")
    return next(c for c in judgement.checks if c.name == TTFT), judgement


def test_block_pairs_cancel_shared_drift_that_would_drown_independent_sides(
        tmp_path: Path) -> None:
    live, judgement = _ttft(_pair_run(tmp_path, live=True, head_factor=1.3))
    assert live.verdict == "regression" and live.primary and judgement.exit_code == 1
    assert live.current_value / live.reference_value == pytest.approx(1.3, rel=0.02)
    serial, _ = _ttft(_pair_run(tmp_path, live=False, head_factor=1.3))
    assert serial.verdict == "inconclusive"           # the same numbers, sides independent
    assert live.interval is not None and serial.interval is not None
    assert live.interval.high / live.interval.low < serial.interval.high / serial.interval.low


def test_the_two_servers_start_difference_comes_from_the_prior_and_says_so(
        tmp_path: Path) -> None:
    check, judgement = _ttft(_pair_run(tmp_path, live=True, head_factor=1.0))
    assert check.verdict != "regression" and judgement.exit_code == 0
    prior_sd = math.sqrt(2) * 0.02
    assert f"start level from the prior (log-sd {prior_sd:.3f}; 1 start)" in check.reason
    assert "blocks paired between the two live servers" in " ".join(judgement.notes)
