"""Few-shot prompt construction: shots from train, never from the evaluated set, seeded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from repo_files import packaged_gsm8k

from servegate.accuracy.dataset import Row
from servegate.accuracy.extract import gold_answer
from servegate.accuracy.prompts import build_prefix, build_prompt, select_shots


def rows(path: Path) -> list[Row]:
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        d = json.loads(line)
        out.append(Row(i, d["question"], d["answer"], gold_answer(d["answer"]) or ""))
    return out


@pytest.fixture(scope="module")
def train() -> list[Row]:
    return rows(packaged_gsm8k() / "train.jsonl")


@pytest.fixture(scope="module")
def test_rows() -> list[Row]:
    return rows(packaged_gsm8k() / "test.jsonl")


def test_shots_come_from_train_and_are_seeded(train: list[Row], test_rows: list[Row]) -> None:
    first = select_shots(train, 5, seed=1234, evaluated=test_rows)
    again = select_shots(train, 5, seed=1234, evaluated=test_rows)
    other = select_shots(train, 5, seed=7, evaluated=test_rows)
    assert [r.index for r in first] == [r.index for r in again]
    assert [r.index for r in first] != [r.index for r in other]
    train_questions = {r.question for r in train}
    test_questions = {r.question for r in test_rows}
    assert all(r.question in train_questions for r in first)
    assert not any(r.question in test_questions for r in first)
    assert len({r.index for r in first}) == 5


@pytest.mark.parametrize("shots", [0, 1, 3, 8])
def test_shot_count_is_configurable(train: list[Row], test_rows: list[Row], shots: int) -> None:
    chosen = select_shots(train, shots, seed=1, evaluated=test_rows)
    prefix = build_prefix(chosen)
    prompt = build_prompt(prefix, test_rows[0].question)
    assert prompt.count("Question: ") == shots + 1
    assert prompt.endswith(f"Question: {test_rows[0].question}\nAnswer:")
    assert prompt.count("####") == shots            # every shot carries its full solution


def test_prompt_layout(train: list[Row], test_rows: list[Row]) -> None:
    chosen = select_shots(train, 2, seed=3, evaluated=test_rows)
    prompt = build_prompt(build_prefix(chosen), "What is 2+2?")
    a, b = chosen
    assert prompt == (f"Question: {a.question}\nAnswer: {a.answer}\n\n"
                      f"Question: {b.question}\nAnswer: {b.answer}\n\n"
                      "Question: What is 2+2?\nAnswer:")


def test_evaluated_questions_are_excluded_even_when_train_contains_them() -> None:
    pool = [Row(i, f"question {i}", f"#### {i}", str(i)) for i in range(10)]
    evaluated = [Row(0, "Question  3", "#### 3", "3"), Row(1, "question 5", "#### 5", "5")]
    for seed in range(50):
        chosen = select_shots(pool, 8, seed=seed, evaluated=evaluated)
        assert {r.index for r in chosen}.isdisjoint({3, 5})
    with pytest.raises(ValueError, match="only 8 train questions"):
        select_shots(pool, 9, seed=0, evaluated=evaluated)
