"""Few-shot GSM8K prompts in the SGLang / lm-eval format, shots drawn from the train split.

``"Question: " + q + "\\nAnswer: " + a`` per shot, shots joined by blank lines, the evaluated
question last ending in ``"Answer:"``. SGLang's own script takes its shots from the first test
questions and then evaluates those same questions; here shots come from train, chosen with a
fixed seed, and any train question that also appears in the evaluated set is excluded. Every
question gets the same shots, so on and off see identical prompts (and share a radix prefix).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from servegate.accuracy.dataset import Row


def _key(question: str) -> str:
    return " ".join(question.split()).lower()


def select_shots(train: Sequence[Row], shots: int, seed: int,
                 evaluated: Iterable[Row] = ()) -> list[Row]:
    """``shots`` train rows sampled with ``random.Random(seed)``, none from ``evaluated``."""
    if shots < 0:
        raise ValueError(f"shots must be >= 0, got {shots}")
    excluded = {_key(row.question) for row in evaluated}
    pool = [row for row in train if _key(row.question) not in excluded]
    if shots > len(pool):
        raise ValueError(f"shots={shots} but only {len(pool)} train questions are usable")
    return random.Random(seed).sample(pool, shots)


def format_example(question: str, answer: str | None = None) -> str:
    text = f"Question: {question}\nAnswer:"
    return text if answer is None else f"{text} {answer}"


def build_prefix(shots: Sequence[Row]) -> str:
    """The shots, each followed by a blank line (empty for zero-shot)."""
    return "".join(format_example(row.question, row.answer) + "\n\n" for row in shots)


def build_prompt(prefix: str, question: str) -> str:
    return prefix + format_example(question)
