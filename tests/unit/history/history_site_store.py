"""The seeded history store of the site tests, built through the real store API.

40 synthetic nights (tests/judge_runs.py run folders, 2 % run-to-run noise, 2 repeats per
point) added with ``servegate.history.store.add_run``. Latencies: ``off`` (both concurrencies)
8 % slower from night 20 on, a confirmed step; ``on@c4`` 25 % slower on night 30 only, a
one-off night (transient); ``on@c2`` 15 % slower on the last night only, a suspected step. Each
night has its own start time and its own sglang commit (a 40-hex id derived from the night
number), so the commits bracketing the step are known.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from judge_runs import make_run

from servegate.history.store import add_run

NIGHTS, STEP_AT, STEP = 40, 20, 1.08
SEED = 0
BLIP_AT, BLIP = 30, 1.25
LAST_STEP = 1.15
SUITE = "nightly-synthetic"     # not in suites/: the default [judge] table gates its metrics
STEP_SERIES = ("cpu", "smollm2-135m", SUITE, "off", 2, "mean_ttft_ms")
BLIP_SERIES = ("cpu", "smollm2-135m", SUITE, "on", 4, "mean_ttft_ms")
LAST_SERIES = ("cpu", "smollm2-135m", SUITE, "on", 2, "mean_ttft_ms")


def sglang_commit(night: int) -> str:
    """A distinct, plausible-looking sglang commit per night."""
    return hashlib.sha1(f"sglang nightly {night}".encode()).hexdigest()


def effect(night: int, mode: str, conc: int) -> float:
    """The latency factor of one arm on one night (see the module docstring)."""
    if mode == "off":
        return STEP if night >= STEP_AT else 1.0
    if conc == 4:
        return BLIP if night == BLIP_AT else 1.0
    return LAST_STEP if night == NIGHTS - 1 else 1.0


def add_night(runs: Path, store: Path, night: int, *, seed: int = SEED) -> None:
    run_dir = make_run(
        runs / f"nightly-cpu-{night:03d}", suite=SUITE, run_cv=0.02, repeats=2, n_requests=40,
        seed=seed * 1000 + night, effect=lambda mode, conc: effect(night, mode, conc),
        accuracy={"off": {"n": 50, "correct": 40 + night % 3}})
    run = json.loads((run_dir / "run.json").read_text())
    run["started_at"] = f"2026-{1 + night // 28:02d}-{1 + night % 28:02d}T02:00:00+00:00"
    run["fingerprint"]["sglang_commit"] = sglang_commit(night)
    run["fingerprint"]["sglang"] = "0.5.23" if night < 30 else "0.5.24"
    (run_dir / "run.json").write_text(json.dumps(run))
    assert add_run(run_dir, store).status == "added"


@dataclass(frozen=True)
class SeededStore:
    store: Path
    nights: int = NIGHTS
    step_at: int = STEP_AT


def build_store(root: Path) -> SeededStore:
    store = root / "store"
    for night in range(NIGHTS):
        add_night(root / "runs", store, night)
    return SeededStore(store)


def page_of(key: tuple[str, str, str, str, int | None, str]) -> str:
    """The series page of ``key`` relative to the site root (what site.page_path gives)."""
    runner, model, suite, mode, conc, metric = key
    point = mode if conc is None else f"{mode}-c{conc}"
    return f"series/{runner}__{model}__{suite}__{point}__{metric}.html"
