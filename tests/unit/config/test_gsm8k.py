"""The suite's ``[gsm8k]`` table as run_gsm8k reads it: defaults, aliases, clear errors."""

from __future__ import annotations

import pytest

from servegate.config.gsm8k import AccuracyConfigError
from servegate.config.gsm8k import GSM8KSettings as Settings


def test_defaults_and_cpu_suite_table() -> None:
    assert Settings.parse({}) == Settings(questions=None, shots=5, concurrency=8,
                                          max_tokens=512, source="packaged",
                                          train_dataset=None, seed=1234, extraction="flexible")
    cpu = Settings.parse({"questions": 16, "shots": 5, "concurrency": 4, "max_tokens": 160,
                          "source": "packaged", "seed": 1234})
    assert (cpu.questions, cpu.max_tokens, cpu.source) == (16, 160, "packaged")
    # the deprecated spelling still reads: dataset = "test" meant the default source
    assert Settings.parse({"dataset": "test"}).source == "packaged"
    assert Settings.parse({"dataset": "/data/gsm8k"}).source == "/data/gsm8k"
    assert Settings.parse({"source": "hub", "train_dataset": "train"}).train_dataset is None
    assert Settings.parse({"questions": "all"}).questions is None
    assert Settings.parse({"extraction": "strict", "shots": 0}).shots == 0


@pytest.mark.parametrize(("raw", "message"), [
    ({"question": 5}, r"\[gsm8k\]: unknown key\(s\) \['question'\]"),
    ({"questions": 0}, r"\[gsm8k\]\.questions: expected an integer >= 1 or \"all\", got 0"),
    ({"questions": "10"}, r"\[gsm8k\]\.questions"),
    ({"concurrency": True}, r"\[gsm8k\]\.concurrency: expected an integer >= 1"),
    ({"max_tokens": 1.5}, r"\[gsm8k\]\.max_tokens"),
    ({"extraction": "loose"}, r"\[gsm8k\]\.extraction: expected one of"),
    ({"dataset": ""}, r"\[gsm8k\]\.dataset: expected \"packaged\", \"hub\", a hub id or a path"),
    ({"source": 3}, r"\[gsm8k\]\.source: expected"),
    ({"source": "hub", "dataset": "test"}, r"\[gsm8k\]: set source .* not both"),
])
def test_bad_settings_name_the_key(raw: dict[str, object], message: str) -> None:
    with pytest.raises(AccuracyConfigError, match=message):
        Settings.parse(raw)
