"""A check waiting for its level: the family's size (and Holm's order) is known only once every
check of the run has been listed, so each check is listed first and evaluated afterwards."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from servegate.judge.checks import Check


@dataclass
class Pending:
    """A check whose interval waits for its level in the family."""

    name: str
    counts: bool                                 # gating and interval-based: joins the family
    evaluate: Callable[[float], Check]           # per-check confidence -> Check
    primary: bool = True                         # in the suite's gated family (else reported)
    one_sided: bool = False                      # builds its interval at 1 - 2 alpha itself


def fixed(check: Check, counts: bool = False) -> Pending:
    """A check decided without an interval (an integrity error, a missing point)."""
    return Pending(check.name, counts, lambda _c, check=check: check)
