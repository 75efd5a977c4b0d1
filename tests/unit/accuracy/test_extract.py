"""GSM8K answer extraction: every real gold answer, plus the formats models actually emit."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from repo_files import packaged_gsm8k

from servegate.accuracy.extract import (
    canonical,
    extract_flexible,
    extract_strict,
    gold_answer,
    is_correct,
    normalize,
    to_decimal,
)


def test_every_test_gold_answer_extracts_from_its_own_solution() -> None:
    lines = (packaged_gsm8k() / "test.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1319
    strict_ok = flexible_ok = 0
    for line in lines:
        solution = json.loads(line)["answer"]
        # Reference parse, independent of the module's regexes: text after the last "####".
        expected = Decimal(solution.split("####")[-1].strip().replace(",", ""))
        strict, flexible = extract_strict(solution), extract_flexible(solution)
        strict_ok += strict is not None and Decimal(strict) == expected
        flexible_ok += flexible is not None and Decimal(flexible) == expected
        assert is_correct(flexible, gold_answer(solution) or "")
    assert (strict_ok, flexible_ok) == (1319, 1319)


@pytest.mark.parametrize(("text", "strict", "flexible"), [
    ("5 - 8 = -3\n#### -3", "-3", "-3"),
    ("She pays $1,234.50 in total.\n#### 1,234.50", "1234.5", "1234.5"),
    ("#### $1,234.50", None, "1234.5"),              # lm-eval's strict regex admits no "$"
    ("The total is 1,234.50 dollars.", None, "1234.5"),
    ("So the answer is 42.", None, "42"),
    ("So the answer is 42...", None, "42"),          # lm-eval would take "..." and miss
    ("It costs $7. Then 3 more.", None, "3"),
    ("half of it: 0.5\n#### 0.50", "0.5", "0.5"),
    ("#### 18.\nQuestion", "18", "18"),
    ("It is -$5 overall", None, "-5"),
    ("#### 12\nbut later 13", "12", "13"),           # strict: first marker, flexible: last number
    ("no digits here", None, None),
    ("#### abc", None, None),
    ("1,000,000 people", None, "1000000"),
    ("answer: 7", None, "7"),                        # single digit needs the second branch
])
def test_targeted_cases(text: str, strict: str | None, flexible: str | None) -> None:
    assert extract_strict(text) == strict
    assert extract_flexible(text) == flexible


def test_numeric_comparison() -> None:
    assert is_correct("18.00", "18")
    assert is_correct("-0.5", "-.5")
    assert not is_correct("-18", "18")
    assert not is_correct(None, "18")
    assert not is_correct("18.01", "18")
    assert normalize("$1,600.") == "1600"
    assert normalize("1.") == "1"
    assert normalize(",") is None and normalize("$") is None and normalize("-") is None


# GSM8K answer extraction at its edges (issue 15).
# Expected values are written out by hand.


@pytest.mark.parametrize(("text", "value"), [
    ("12.", Decimal("12")), ("$1,234.50", Decimal("1234.50")), ("-.5", Decimal("-0.5")),
    ("12X", None), ("1e5", None), ("Infinity", None), ("NaN", None), ("", None), ("..", None),
])
def test_to_decimal_accepts_plain_numbers_only(text: str, value: Decimal | None) -> None:
    assert to_decimal(text) == value


@pytest.mark.parametrize(("value", "text"), [
    (Decimal("-0.00"), "0"), (Decimal("0E+3"), "0"), (Decimal("18.00"), "18"),
    (Decimal("-0.50"), "-0.5"), (Decimal("1E+3"), "1000"),
])
def test_canonical_text(value: Decimal, text: str) -> None:
    assert canonical(value) == text


def test_gold_answer_is_after_the_last_marker() -> None:
    assert gold_answer("first #### 5 then #### 7") == "7"
    assert gold_answer("a ####5#### 1,000.") == "1000"
    assert gold_answer("no marker 12") is None
    assert gold_answer("so the answer is ####12") == "12"      # no space after ####
