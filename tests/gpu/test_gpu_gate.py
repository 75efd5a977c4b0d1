"""On a real GPU runner: the real exact-fill gate against the detected hardware (opt-in).

Runs only with SERVEGATE_GPU_TESTS=1 (tests/conftest.py), in the runner image's own sglang.
On gfx95 `on` must be effective and identical to `forced`; everywhere else identical to `off`.
"""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.gpu, pytest.mark.sglang]


def test_real_gate_matches_the_detected_runner() -> None:
    from servegate.admission.checks import first_difference
    from servegate.admission.replay import load_sglang, replay
    from servegate.admission.scenario import Prompt, Scenario
    from servegate.serve.detect import detect

    runner = detect(None).runner_class
    assert runner != "cpu", "SERVEGATE_GPU_TESTS=1 but no GPU was detected"
    sg = load_sglang()
    scenario = Scenario(page_size=64, chunk_size=16384,
                        prompts=tuple(Prompt(n) for n in (3000, 5000, 7000, 9000)))
    on = replay(scenario, "on", sg)
    reference = replay(scenario, "forced" if runner == "gfx95" else "off", sg)
    assert on.effective is (runner == "gfx95")
    assert first_difference(reference, on) is None
