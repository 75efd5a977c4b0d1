"""pytest-benchmark: the cost of one admission round, off vs forced (scheduler-path slowdowns)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.sglang, pytest.mark.timing]


@pytest.mark.parametrize("mode", ["off", "forced"])
def test_one_admission_round(benchmark, mode: str) -> None:
    from servegate.admission.replay import load_sglang, replay
    from servegate.admission.scenario import Prompt, Scenario

    sg = load_sglang()
    # Four prompts that fit one 16384-token chunk: one PrefillAdder round plus real KV
    # allocation (pool construction included: it is part of what a replay costs).
    scenario = Scenario(page_size=64, chunk_size=16384,
                        prompts=tuple(Prompt(n) for n in (3000, 5000, 7000, 1000)))
    trace = benchmark(replay, scenario, mode, sg)
    assert len(trace.rounds) == 1
