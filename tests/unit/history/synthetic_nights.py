"""Synthetic nightly stores for the history tests, built the way nightly builds them: run
folders (tests/judge_runs.py) with 2 % run-to-run noise, added with `servegate history add`; the
step is an effect on one mode only."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from judge_runs import make_run

from servegate.history.cli import main

NIGHTS, STEP_AT, STEP = 40, 20, 1.08


def night_run(root: Path, night: int, seed: int, *, step_mode: str = "off", step_at: int = STEP_AT,
              repeats: int = 1, factor: float = STEP, slow: Callable[[int], bool] | None = None
              ) -> Path:
    """Night ``night`` of a synthetic nightly: 2 % run-to-run noise, ``step_mode`` slower from
    ``step_at`` on (or on the nights ``slow`` says); its own start time and sglang commit."""
    stepped = slow(night) if slow is not None else night >= step_at
    run_dir = make_run(
        root / f"nightly-cpu-{seed}-{night:03d}", suite="nightly-synthetic", run_cv=0.02,
        repeats=repeats, seed=seed * 1000 + night,
        effect=lambda mode, _c: factor if mode == step_mode and stepped else 1.0,
        accuracy={"off": {"n": 50, "correct": 40 + night % 3}})
    run = json.loads((run_dir / "run.json").read_text())
    run["started_at"] = f"2026-{1 + night // 28:02d}-{1 + night % 28:02d}T02:00:00+00:00"
    run["fingerprint"]["sglang_commit"] = f"sg{night:04d}"
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


def nightly_store(tmp_path: Path, seed: int, nights: int = NIGHTS, **kwargs: Any) -> Path:
    store = tmp_path / "store"
    for night in range(nights):
        assert main(["add", str(night_run(tmp_path / "runs", night, seed, **kwargs)),
                     "--store", str(store)], out=io.StringIO()) == 0
    return store
