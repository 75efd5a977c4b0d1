"""Statistics for per-question accuracy: Wilson interval, exact McNemar, paired difference, MDE.

On the same questions, two modes' outcomes are paired; only discordant questions (right in one
mode, wrong in the other) carry information about a difference. Greedy outputs legitimately
differ between modes (bf16 numerics change with batch composition), so discordant pairs are
expected even when nothing is wrong - the test is whether they lean one way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

ALPHA = 0.05
POWER = 0.80
DIFF_METHOD = "Agresti-Min adjusted Wald interval for a paired difference (0.5 added per cell)"


def wilson(correct: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for ``correct / n`` (no continuity correction)."""
    if n <= 0 or not 0 <= correct <= n:
        raise ValueError(f"wilson: need 0 <= correct <= n and n > 0, got {correct}/{n}")
    ci = stats.binomtest(correct, n).proportion_ci(confidence_level=confidence,
                                                   method="wilson")
    return float(ci.low), float(ci.high)


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value: binomial test of the discordant split against 1/2."""
    discordant = a_only + b_only
    if discordant == 0:
        return 1.0
    return float(stats.binomtest(a_only, discordant, 0.5).pvalue)  # pragma: no mutate (0.5 is the default)


def agresti_min(a_only: np.ndarray | int, b_only: np.ndarray | int, n: np.ndarray | int
                ) -> tuple[np.ndarray, np.ndarray]:
    """(centre, standard error) of Agresti & Min's paired difference (0.5 added per cell);
    vectorised so ``servegate calibrate`` runs the gate's own accuracy test over nights."""
    # equivalent (dtype=, next three lines): adding 2.0 / 0.5 makes the counts floats anyway
    n_adj = np.asarray(n, dtype=float) + 2.0  # pragma: no mutate
    p12 = (np.asarray(a_only, dtype=float) + 0.5) / n_adj  # pragma: no mutate
    p21 = (np.asarray(b_only, dtype=float) + 0.5) / n_adj  # pragma: no mutate
    diff = p12 - p21
    return diff, np.sqrt(np.maximum((p12 + p21 - diff * diff) / n_adj, 0.0))


def paired_diff_se(both: int, a_only: int, b_only: int, neither: int) -> float:
    """Standard error of the paired difference (Agresti-Min), for MDEs and sample sizes."""
    return float(agresti_min(a_only, b_only, both + a_only + b_only + neither)[1])


def paired_diff_interval(both: int, a_only: int, b_only: int, neither: int,
                         confidence: float = 0.95) -> tuple[float, float]:
    """Interval for ``acc_a - acc_b`` (Agresti & Min 2005: add 0.5 to each cell, then Wald).

    Better coverage than plain Wald when discordant pairs are few, and it never collapses to a
    zero-width interval when no question disagreed. No library has it (statsmodels' paired
    tools test equality, McNemar, and give no interval for the difference).
    """
    n = both + a_only + b_only + neither
    if n <= 0:
        raise ValueError("paired_diff_interval: no pairs")
    z = stats.norm.ppf(1 - (1 - confidence) / 2)
    diff, se = agresti_min(a_only, b_only, n)
    return max(-1.0, float(diff - z * se)), min(1.0, float(diff + z * se))


def mde_from_se(se: float, margin: float, confidence: float, power: float = POWER) -> float:
    """Smallest true drop past ``margin`` that the gate's interval test (two-sided interval at
    ``confidence``, a drop counted when the whole interval is below -margin) catches with
    ``power``: margin + (z_level + z_power) * se."""
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    return margin + (z + float(stats.norm.ppf(power))) * se


@dataclass(frozen=True)
class Paired:
    a: str
    b: str
    n: int
    both_correct: int
    a_only: int          # a right, b wrong
    b_only: int          # b right, a wrong
    both_wrong: int
    acc_a: float
    acc_b: float
    diff: float          # acc_a - acc_b
    diff_low: float
    diff_high: float
    diff_method: str
    discordant: int
    discordance_rate: float
    mcnemar_p: float     # exact McNemar (equality test): information, not the gate's test
    significant: bool    # the gate's paired interval at ``confidence`` excludes 0
    mde: float           # smallest |diff| the gate's interval test detects (from its SE)
    mde_method: str
    alpha: float
    power: float
    confidence: float = 1 - ALPHA
    diff_se: float = 0.0

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


GATE_MDE_METHOD = ("the gate's paired interval (Agresti-Min) at the stated confidence, power "
                   "0.8: (z_level + z_power) x its standard error")


def analyse(a: str, b: str, outcomes_a: list[bool], outcomes_b: list[bool],
            confidence: float = 1 - ALPHA) -> Paired:
    """Paired analysis of two equally ordered outcome lists (same questions).

    ``confidence`` is the level the gate judges at (the judge passes its Bonferroni level):
    the interval, the ``significant`` flag and the MDE all use it and the gate's own test.
    """
    if len(outcomes_a) != len(outcomes_b) or not outcomes_a:
        raise ValueError(f"paired analysis {a} vs {b}: need equal, non-empty outcome lists "
                         f"({len(outcomes_a)} vs {len(outcomes_b)})")
    n = len(outcomes_a)
    # equivalent (strict=, next three lines): the lengths were checked equal above
    both = sum(x and y for x, y in zip(outcomes_a, outcomes_b, strict=True))  # pragma: no mutate
    a_only = sum(x and not y for x, y in zip(outcomes_a, outcomes_b, strict=True))  # pragma: no mutate
    b_only = sum(y and not x for x, y in zip(outcomes_a, outcomes_b, strict=True))  # pragma: no mutate
    neither = n - both - a_only - b_only
    low, high = paired_diff_interval(both, a_only, b_only, neither, confidence)
    p = mcnemar_exact(a_only, b_only)
    discordance = (a_only + b_only) / n
    se = paired_diff_se(both, a_only, b_only, neither)
    return Paired(
        a=a, b=b, n=n, both_correct=both, a_only=a_only, b_only=b_only, both_wrong=neither,
        acc_a=(both + a_only) / n, acc_b=(both + b_only) / n, diff=(a_only - b_only) / n,
        diff_low=low, diff_high=high, diff_method=DIFF_METHOD, discordant=a_only + b_only,
        discordance_rate=discordance, mcnemar_p=p, significant=low > 0 or high < 0,
        mde=min(mde_from_se(se, 0.0, confidence), 1.0), mde_method=GATE_MDE_METHOD,
        alpha=1 - confidence, power=POWER, confidence=confidence, diff_se=se)
