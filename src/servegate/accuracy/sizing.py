"""How many GSM8K questions a paired non-inferiority check needs: they scale with the discordance
rate, not the accuracy (the formula and the default rate: docs/judge.md, How many questions)."""

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
