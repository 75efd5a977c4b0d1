"""In-server run folders for the block checks' tests: run.json as bench writes it for a suite
with ``[design]`` (every mode in each server start, ``blocks`` client runs per mode and
concurrency, ``start``/``block`` on every point), with seeded noise at both levels.

Test data for the judge (it only reads run.json), not a stand-in for sglang.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from servegate.core.results import RUN_SCHEMA_VERSION

BASE = {"mean_ttft_ms": 100.0, "median_tpot_ms": 20.0}
SUITE = "blocks-synthetic"

# (mode, concurrency, start, block) -> factor on every latency of that block
Effect = Callable[[str, int, int, int], float]


def judge_table(family: list[str] | None = ("claims",), **extra: Any) -> dict[str, Any]:
    """A suite's [judge] table as run.json records it."""
    table: dict[str, Any] = {
        "metrics": ["mean_ttft_ms", "median_tpot_ms"],
        "floors": {"mean_ttft_ms": 0.05, "median_tpot_ms": 0.05},
        "run_to_run_cv": 0.05,
        "claims": {"noop_margin": 0.05},
    }
    if family is not None:
        table["family"] = list(family)
    table.update(extra)
    return table


def write_block_run(run_dir: Path, *, runner_class: str = "mi300x", starts: int = 2,
                    blocks: int = 6, concurrencies: tuple[int, ...] = (2, 4),
                    modes: tuple[str, ...] = ("off", "on"), effect: Effect | None = None,
                    block_sd: float = 0.01, start_sd: float = 0.05, seed: int = 0,
                    table: dict[str, Any] | None = None,
                    effective: set[tuple[str, int, int, int]] | None = None,
                    accuracy: dict[str, dict[str, int]] | None = None,
                    arms: tuple[str, ...] = ("",),
                    started_at: str = "2026-12-01T12:00:00+00:00",
                    halves: bool = False) -> Path:
    """Write ``run_dir/run.json``: ``starts`` x ``blocks`` blocks per mode and concurrency.

    Every value is ``BASE[metric] * start factor * block noise * effect``: the start factor
    (log-sd ``start_sd``) is shared by every mode and concurrency of a start, the block noise
    (log-sd ``block_sd``) is drawn per block, mode, concurrency and metric. ``effective`` lists
    the (mode, conc, start, block) read back with exact fill active. ``arms`` ("base", "head"):
    a head-vs-base run, each tree in its own server starts (its own start factors); ``effect``
    then gets the mode as ``head-on`` / ``base-off``. ``halves``: start s served on half s % 2
    (run.json ``design.start_halves``, as bench records a ``[design] halves`` run)."""
    rng = np.random.default_rng(seed)
    points: list[dict[str, Any]] = []
    for start in range(starts):
        for arm in arms:
            start_factor = float(np.exp(rng.normal(0.0, start_sd))) if start_sd else 1.0
            for block in range(blocks):
                round_modes = list(modes) if block % 2 == 0 else list(modes)[::-1]
                for mode in round_modes:
                    for conc in concurrencies:
                        label = f"{arm}-{mode}" if arm else mode
                        factor = start_factor * (effect(label, conc, start, block)
                                                 if effect else 1.0)
                        points.append(_block_point(
                            rng, arm, mode, conc, start, block, blocks, factor, block_sd,
                            (mode, conc, start, block) in (effective or set()), len(points)))
    run: dict[str, Any] = {
        "schema_version": RUN_SCHEMA_VERSION, "suite": SUITE, "model_profile": "smollm2-135m",
        "runner_class": runner_class,
        "fingerprint": {"runner_class": runner_class, "sglang": "0.5.23",
                        "sglang_commit": "abc1234", "host": "testhost",
                        "model": "HuggingFaceTB/SmolLM2-135M-Instruct"},
        "command": ["servegate", "bench", "--suite", SUITE],
        "started_at": started_at, "finished_at": started_at.replace("T12", "T13"),
        "complete": True, "chunk_size": 256, "page_size": 64, "points": points,
        "design": {"in_server": True, "starts": starts, "blocks": blocks, "unit": "block"},
        "suite_source": {"path": f"suites/{SUITE}.toml"},
        "judge_table": judge_table() if table is None else table,
    }
    if halves:
        run["design"]["start_halves"] = [start % 2 for start in range(starts)]
    if arms != ("",):
        run["ab"] = {arm: {"path": f"/src/sglang-{arm}", "version": "0.5.23"} for arm in arms}
    if accuracy:
        run["accuracy"] = {m: {"n": v["n"], "correct": v["correct"],
                               "accuracy": v["correct"] / v["n"]} for m, v in accuracy.items()}
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps(run, indent=1))
    return run_dir


def _block_point(rng: np.random.Generator, arm: str, mode: str, conc: int, start: int,
                 block: int, blocks: int, factor: float, block_sd: float, effective: bool,
                 order: int) -> dict[str, Any]:
    metrics = {name: value * factor * float(np.exp(rng.normal(0.0, block_sd)))
               for name, value in BASE.items()}
    return {
        **({"arm": arm} if arm else {}),
        "mode": mode, "concurrency": conc, "repeat": start * blocks + block, "start": start,
        "block": block, "order": order, "metrics": metrics,
        "alignment": {"chunk_size": 256, "saturated_batches": 3, "aligned_fraction": 0.0,
                      "min_saturated_tokens": 236, "prefill_tokens": [256, 236, 44]},
        "exact_fill_effective": effective or mode == "forced",
    }


def edit_points(run_dir: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """Apply ``change`` to every point of ``run_dir/run.json`` in place: a test's edit of what
    bench wrote (a metric removed, an alignment or a metric added)."""
    path = run_dir / "run.json"
    run = json.loads(path.read_text())
    for point in run["points"]:
        change(point)
    path.write_text(json.dumps(run))
    return run_dir


def slower(mode: str, factor: float) -> Effect:
    """Every block of ``mode`` ``factor`` times slower (other modes unchanged)."""
    return lambda m, _conc, _start, _block: factor if m == mode else 1.0


def learned_store(tmp_path: Path, nights: int, block_sd: float) -> Path:
    """``nights`` stored nightly runs on mi355x (2 starts x 3 blocks of off and on at the
    suite's concurrencies), as a runner's learned noise profile is made of."""
    from servegate.history.store import add_run

    store = tmp_path / "store"
    for night in range(nights):
        run_dir = write_block_run(tmp_path / f"night-{night}", runner_class="mi355x",
                                  blocks=3, concurrencies=(4, 16, 64), block_sd=block_sd,
                                  seed=night, started_at=f"2026-11-{night + 1:02d}T02:00:00Z")
        run = json.loads((run_dir / "run.json").read_text())
        run.update(suite="nightly", model_profile="glm-5.2-mxfp4")
        (run_dir / "run.json").write_text(json.dumps(run))
        add_run(run_dir, store)
    return store
