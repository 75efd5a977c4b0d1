"""The profiled blocks' set-up in bench: off unless asked, the wave they profile, what run.json
``profile`` records before the first block (the blocks themselves run in the real-server test
``tests/real_sglang/serving/test_profile_attribution_e2e.py``)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

from servegate.commands.bench_profile import _record, _shape, profile_modes
from servegate.config import load_suite, suite_path
from servegate.config.profiling import ProfileSettings
from servegate.plan.design import PlannedPoint, ServerSlot


def _ctx(settings: ProfileSettings, suite: str = "cpu") -> Any:
    return SimpleNamespace(profile=settings, suite=load_suite(suite_path(suite)),
                           detected=SimpleNamespace(runner_class="cpu"), run={})


def test_nothing_happens_unless_profiling_was_asked() -> None:
    ctx = _ctx(ProfileSettings())
    slot = ServerSlot(mode="off", repeat=0, index=0, points=(), in_server=True)
    profile_modes(ctx, SimpleNamespace(slot=slot), 0)  # type: ignore[arg-type]
    assert ctx.run == {}


def test_the_record_states_the_bounded_request() -> None:
    ctx = _ctx(dataclasses.replace(ProfileSettings(), enabled=True, floor=0.25, block_cv=0.2))
    record = _record(ctx)
    assert ctx.run["profile"] is record
    assert record == {"concurrency": 2, "num_steps": 8, "activities": ["CPU"], "floor": 0.25,
                      "block_cv": 0.2, "keep_traces": False, "blocks": [], "table": {}}


def test_the_profiled_wave_is_the_top_concurrency_with_the_first_rounds_prompts() -> None:
    points = (PlannedPoint("off", 4, 8, 0, 0, seed=11, start=0, block=0),
              PlannedPoint("off", 16, 32, 0, 1, seed=11, start=0, block=0),
              PlannedPoint("on", 16, 32, 1, 2, seed=12, start=0, block=1))
    slot = ServerSlot(mode="off", repeat=0, index=0, points=points, arm="head", in_server=True)
    shape = _shape(SimpleNamespace(slot=slot), "forced", 16)  # type: ignore[arg-type]
    assert (shape.mode, shape.concurrency, shape.num_prompts, shape.seed, shape.arm) == (
        "forced", 16, 16, 11, "head")


class _Session:
    def __init__(self) -> None:
        self.saves = 0

    def save(self) -> None:
        self.saves += 1


def _running_ctx(tmp_path: Any) -> Any:
    ctx = _ctx(dataclasses.replace(ProfileSettings(), enabled=True))
    ctx.session, ctx.run_dir = _Session(), tmp_path
    ctx.console = SimpleNamespace(log=lambda *a, **k: None)
    return ctx


def _live(modes: tuple[str, ...]) -> Any:
    points = tuple(PlannedPoint(m, 2, 2, 0, i, seed=1, start=0, block=0)
                   for i, m in enumerate(modes))
    return SimpleNamespace(slot=ServerSlot(mode=modes[0], repeat=0, index=0, points=points,
                                           in_server=True))


def _block(mode: str, other_pct: float, device: str = "cpu") -> dict[str, Any]:
    return {"arm": "", "mode": mode, "start": 0, "device": device, "forwards": [],
            "machine": {"other_cpu_pct": other_pct, "cpu_steal_pct": 0.0, "wall_s": 1.0}}


def test_a_busy_cpu_block_runs_once_more_and_a_failure_is_recorded(tmp_path: Any,
                                                                   monkeypatch: Any) -> None:
    from servegate.commands import bench_profile
    from servegate.serve.profiler import ProfileError

    runs = {"off": [_block("off", 40.0), _block("off", 1.0)],
            "forced": [_block("forced", 30.0), _block("forced", 35.0)],
            "on": [ProfileError("/start_profile: HTTP 500: busy")]}
    attempts: list[tuple[str, int]] = []

    def fake(ctx: Any, this: Any, start: int, mode: str, record: Any, attempt: int = 0) -> Any:
        attempts.append((mode, attempt))
        got = runs[mode].pop(0)
        if isinstance(got, Exception):
            raise got
        return got

    monkeypatch.setattr(bench_profile, "_profile_one", fake)
    ctx = _running_ctx(tmp_path)
    profile_modes(ctx, _live(("off", "forced", "on")), 0)
    assert attempts == [("off", 0), ("off", 1), ("forced", 0), ("forced", 1), ("on", 0)]
    blocks = ctx.run["profile"]["blocks"]
    assert [(b["mode"], b["machine"]["other_cpu_pct"]) for b in blocks] == [("off", 1.0),
                                                                           ("forced", 35.0)]
    assert [m["other_cpu_pct"] for m in blocks[0]["busy_runs"]] == [40.0]
    assert ctx.run["profile"]["errors"] == [{"arm": "", "mode": "on", "start": 0,
                                             "error": "/start_profile: HTTP 500: busy"}]
    assert set(ctx.run["profile"]["table"]) == {"off", "forced"}


def test_a_gpu_block_is_never_run_again(tmp_path: Any, monkeypatch: Any) -> None:
    from servegate.commands import bench_profile

    calls: list[int] = []

    def fake(ctx: Any, this: Any, start: int, mode: str, record: Any, attempt: int = 0) -> Any:
        calls.append(attempt)
        return {**_block(mode, 60.0, device="gpu"), "machine": {"other_gpu_processes": 1}}

    monkeypatch.setattr(bench_profile, "_profile_one", fake)
    ctx = _running_ctx(tmp_path)
    profile_modes(ctx, _live(("off",)), 0)
    assert calls == [0] and "busy_runs" not in ctx.run["profile"]["blocks"][0]
