"""How many GSM8K questions a paired non-inferiority needs: sizing by the check, not by habit.

Why: a GSM8K pass per mode and tree is a fixed share of a GPU suite's minutes (at concurrency 64
the 1319-question test split takes ~8 min of an MI355X server per pass). The gated GSM8K checks
are paired non-inferiority tests of the difference in accuracy (on vs off, head vs base) at the
suite's margin: on the same questions only the discordant ones (right on one side only) carry
the difference, so the questions needed scale with the discordance rate ``d``, not with the
accuracy. With a true difference of 0, the paired difference's standard error is
``sqrt(d / n)`` and a one-sided test at level ``alpha`` has power
``Phi(margin / sqrt(d / n) - z_(1 - alpha))``; the questions for power ``target``:
``n = d (z_(1 - alpha) + z_target)^2 / margin^2``.

The normal approximation is checked against the judge's own paired interval (Agresti-Min, the
interval the accuracy claim uses) by simulation in the tests. ``d`` is 2 % by default: the
calibration's model (servegate.calibration: 4 % of questions flip independently between the
sides, half of those disagree), and what bf16 batch-composition changes gave on the CPU profile
(docs/judge.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from scipy.stats import norm

DISCORDANCE = 0.02
TARGET_POWER = 0.8
ALPHA = 0.05                    # one-sided: the non-inferiority claim's level before the family
TEST_SPLIT = 1319               # GSM8K's test split


def power(questions: int, margin: float, discordance: float = DISCORDANCE,
          alpha: float = ALPHA) -> float:
    """Power of the paired non-inferiority at ``margin`` when the true difference is 0."""
    se = math.sqrt(discordance / questions)
    return float(norm.cdf(margin / se - norm.ppf(1 - alpha)))


def questions_needed(margin: float, discordance: float = DISCORDANCE, alpha: float = ALPHA,
                     target: float = TARGET_POWER) -> int:
    """Fewest questions with at least ``target`` power (may exceed the test split)."""
    z = norm.ppf(1 - alpha) + norm.ppf(target)
    return math.ceil(discordance * z * z / margin ** 2)


@dataclass(frozen=True)
class Sizing:
    """A suite's GSM8K sizing, as ``servegate plan`` prints it."""

    margin: float
    questions: int
    power: float                 # at the suite's questions, one-sided ``alpha``
    power_family: float          # at ``alpha / checks``: a gated family's strictest Holm step
    needed: int                  # for TARGET_POWER at ``alpha``
    needed_family: int           # ... at ``alpha / checks``
    checks: int
    discordance: float = DISCORDANCE
    alpha: float = ALPHA

    def to_json(self) -> dict[str, Any]:
        return {"margin": self.margin, "questions": self.questions,
                "power": round(self.power, 3), "power_family": round(self.power_family, 3),
                "questions_needed": self.needed, "questions_needed_family": self.needed_family,
                "family_checks": self.checks, "discordance": self.discordance,
                "alpha": self.alpha, "target_power": TARGET_POWER}

    def line(self) -> str:
        over = " (more than the test split holds)" if self.needed > TEST_SPLIT else ""
        return (f"GSM8K {self.questions} questions at a {self.margin * 100:g}-point margin: "
                f"power {self.power:.2f} (one-sided {self.alpha:g}), {self.power_family:.2f} at "
                f"the family's strictest level ({self.alpha:g}/{self.checks}); 80 % needs "
                f"{self.needed}{over} ({self.needed_family} at the strictest level), "
                f"{self.discordance:.0%} discordant questions assumed")


def size(margin: float, questions: int, checks: int = 1,
         discordance: float = DISCORDANCE) -> Sizing:
    """The sizing of ``questions`` at ``margin`` in a gated family of ``checks`` checks."""
    strict = ALPHA / max(checks, 1)
    return Sizing(margin=margin, questions=questions,
                  power=power(questions, margin, discordance),
                  power_family=power(questions, margin, discordance, strict),
                  needed=questions_needed(margin, discordance),
                  needed_family=questions_needed(margin, discordance, strict),
                  checks=max(checks, 1), discordance=discordance)
