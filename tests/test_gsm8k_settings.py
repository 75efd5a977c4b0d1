"""The suite's ``[gsm8k]`` table as run_gsm8k reads it: defaults, aliases, clear errors."""

from __future__ import annotations

import pytest

from servegate.accuracy.runner import AccuracyConfigError, Settings


def test_defaults_and_cpu_suite_table() -> None:
    assert Settings.parse({}) == Settings(questions=None, shots=5, concurrency=8,
                                          max_tokens=512, dataset=None, train_dataset=None,
                                          seed=1234, extraction="flexible")
    cpu = Settings.parse({"questions": 16, "shots": 5, "concurrency": 4, "max_tokens": 160,
                          "dataset": "test", "seed": 1234})
    assert (cpu.questions, cpu.max_tokens, cpu.dataset) == (16, 160, None)  # "test" = default
    assert Settings.parse({"questions": "all"}).questions is None
    assert Settings.parse({"extraction": "strict", "shots": 0}).shots == 0


@pytest.mark.parametrize(("raw", "message"), [
    ({"question": 5}, r"\[gsm8k\]: unknown key\(s\) \['question'\]"),
    ({"questions": 0}, r"\[gsm8k\]\.questions: expected an integer >= 1 or \"all\", got 0"),
    ({"questions": "10"}, r"\[gsm8k\]\.questions"),
    ({"concurrency": True}, r"\[gsm8k\]\.concurrency: expected an integer >= 1"),
    ({"max_tokens": 1.5}, r"\[gsm8k\]\.max_tokens"),
    ({"extraction": "loose"}, r"\[gsm8k\]\.extraction: expected one of"),
    ({"dataset": ""}, r"\[gsm8k\]\.dataset: expected a hub id or a path"),
])
def test_bad_settings_name_the_key(raw: dict[str, object], message: str) -> None:
    with pytest.raises(AccuracyConfigError, match=message):
        Settings.parse(raw)
