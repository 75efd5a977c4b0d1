"""Answer extraction, strict and flexible, with lm-eval's regexes and numeric comparison (the one
deliberate difference from lm-eval: docs/guide/run.md, GSM8K accuracy). Normalization drops
``$`` and thousands separators and trailing periods/commas, keeping a leading minus and decimals."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

STRICT_RE = re.compile(r"#### (\-?[0-9\.\,]+)")
FLEXIBLE_RE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")


def to_decimal(text: str) -> Decimal | None:
    """``"$1,234.50"`` -> ``Decimal("1234.50")``; ``None`` when it is not a number."""
    cleaned = text.strip().replace("$", "").replace(",", "").rstrip(".")
    if not cleaned or not re.fullmatch(r"-?(\d+(\.\d*)?|\.\d+)", cleaned):
        return None
    try:
        return Decimal(cleaned)
    except InvalidOperation:  # pragma: no cover - the regex admits only valid decimals
        return None


def canonical(value: Decimal) -> str:
    """A stable JSON-friendly string: ``Decimal("18.00")`` -> ``"18"``, ``-0.50`` -> ``"-0.5"``."""
    text = format(value.normalize(), "f")  # pragma: no mutate ("F" differs only for inf/nan, never here)
    return "0" if text in {"-0", "0"} else text


def normalize(text: str) -> str | None:
    value = to_decimal(text)
    return None if value is None else canonical(value)


def extract_strict(output: str) -> str | None:
    """The number after the first ``####`` marker, normalized, or ``None``."""
    match = STRICT_RE.search(output)
    return None if match is None else normalize(match.group(1))


def extract_flexible(output: str) -> str | None:
    """The last number in ``output``, normalized, or ``None``."""
    for match in reversed(list(FLEXIBLE_RE.finditer(output))):
        value = normalize(match.group(1) or match.group(2))
        if value is not None:
            return value
    return None


def gold_answer(solution: str) -> str | None:
    """The reference number of a GSM8K solution (text after its final ``####``)."""
    if "####" not in solution:
        return None
    return normalize(solution.rsplit("####", 1)[1])


def is_correct(predicted: str | None, gold: str) -> bool:
    """Numeric equality; an invalid (``None``) prediction is never correct."""
    if predicted is None:
        return False
    a, b = to_decimal(predicted), to_decimal(gold)
    return a is not None and b is not None and a == b
