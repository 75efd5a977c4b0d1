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
from servegate.plan import PlannedPoint, ServerSlot


def _ctx(settings: ProfileSettings, suite: str = "cpu") -> Any:
    return SimpleNamespace(profile=settings, suite=load_suite(suite_path(suite)),
                           detected=SimpleNamespace(runner_class="cpu"), run={})


def test_nothing_happens_unless_profiling_was_asked() -> None:
    ctx = _ctx(ProfileSettings())
    slot = ServerSlot(mode="off", repeat=0, index=0, points=(), in_server=True)
    profile_modes(ctx, SimpleNamespace(slot=slot), 0)  # type: ignore[arg-type]
    assert ctx.run == {}


def test_the_record_states_the_bounded_request() -> None:
    ctx = _ctx(dataclasses.replace(ProfileSettings(), enabled=True, floor=0.25))
    record = _record(ctx)
    assert ctx.run["profile"] is record
    assert record == {"concurrency": 2, "num_steps": 8, "activities": ["CPU"], "floor": 0.25,
                      "keep_traces": False, "blocks": [], "table": {}}


def test_the_profiled_wave_is_the_top_concurrency_with_the_first_rounds_prompts() -> None:
    points = (PlannedPoint("off", 4, 8, 0, 0, seed=11, start=0, block=0),
              PlannedPoint("off", 16, 32, 0, 1, seed=11, start=0, block=0),
              PlannedPoint("on", 16, 32, 1, 2, seed=12, start=0, block=1))
    slot = ServerSlot(mode="off", repeat=0, index=0, points=points, arm="head", in_server=True)
    shape = _shape(SimpleNamespace(slot=slot), "forced", 16)  # type: ignore[arg-type]
    assert (shape.mode, shape.concurrency, shape.num_prompts, shape.seed, shape.arm) == (
        "forced", 16, 16, 11, "head")
