"""Paired accuracy statistics (servegate.accuracy.paired) against independent references
(statsmodels, scipy's binomial test enumerated by brute force, numbers worked out by hand):
(issue 15)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from servegate.accuracy import paired
from servegate.accuracy.paired import (
    analyse,
    mcnemar_exact,
    mde_from_se,
    paired_diff_interval,
    paired_diff_se,
    wilson,
)


@pytest.mark.parametrize(("correct", "n"), [(7, 10), (0, 12), (12, 12), (130, 200)])
def test_wilson_matches_statsmodels(correct: int, n: int) -> None:
    low, high = paired.wilson(correct, n)
    ref = proportion_confint(correct, n, alpha=0.05, method="wilson")
    assert (low, high) == pytest.approx(ref, abs=1e-12)
    low90, high90 = paired.wilson(correct, n, confidence=0.90)
    assert (low90, high90) == pytest.approx(
        proportion_confint(correct, n, alpha=0.10, method="wilson"), abs=1e-12)


@pytest.mark.parametrize(("correct", "n"), [(1, 0), (-1, 5), (6, 5), (0, -3)])
def test_wilson_rejects_impossible_counts(correct: int, n: int) -> None:
    with pytest.raises(ValueError) as info:
        paired.wilson(correct, n)
    assert str(info.value) == (f"wilson: need 0 <= correct <= n and n > 0, got {correct}/{n}")


@pytest.mark.parametrize(("a_only", "b_only"), [(3, 1), (0, 7), (10, 2), (5, 5)])
def test_mcnemar_matches_statsmodels_exact(a_only: int, b_only: int) -> None:
    ref = mcnemar([[40, a_only], [b_only, 30]], exact=True).pvalue
    assert paired.mcnemar_exact(a_only, b_only) == pytest.approx(ref, abs=1e-12)
    assert paired.mcnemar_exact(0, 0) == 1.0


def test_agresti_min_by_hand() -> None:
    # 20 pairs, 3 a-only, 1 b-only: p12 = 3.5/22, p21 = 1.5/22, diff = 2/22,
    # se = sqrt((5/22 - (2/22)^2) / 22) = 0.0997744...
    diff, se = paired.agresti_min(3, 1, 20)
    assert float(diff) == pytest.approx(0.0909090909, abs=1e-9)
    assert float(se) == pytest.approx(0.0997744, abs=1e-6)
    assert paired.paired_diff_se(12, 3, 1, 4) == pytest.approx(0.0997744, abs=1e-6)


def test_paired_interval_by_hand_and_clipped() -> None:
    low, high = paired.paired_diff_interval(12, 3, 1, 4)
    assert (low, high) == pytest.approx((0.0909091 - 1.959964 * 0.0997744,
                                         0.0909091 + 1.959964 * 0.0997744), abs=1e-5)
    # 3 pairs, all a-only, 99 %: diff 0.6, se 0.29665, upper end 1.364 clipped at 1.
    low, high = paired.paired_diff_interval(0, 3, 0, 0, confidence=0.99)
    assert high == 1.0 and low == pytest.approx(0.6 - 2.5758293 * 0.2966479, abs=1e-5)
    low, high = paired.paired_diff_interval(0, 0, 3, 0, confidence=0.99)
    assert low == -1.0
    with pytest.raises(ValueError, match="paired_diff_interval: no pairs"):
        paired.paired_diff_interval(0, 0, 0, 0)


def test_mde_from_se_by_hand() -> None:
    # 0.02 + (1.959964 + 0.841621) * 0.01
    assert paired.mde_from_se(0.01, 0.02, 0.95) == pytest.approx(0.04801585, abs=1e-7)
    assert paired.mde_from_se(0.01, 0.0, 0.90, power=0.5) == pytest.approx(0.01644854, abs=1e-7)


def _power_by_enumeration(n: int, discordance: float, diff: float, alpha: float) -> float:
    """The exact McNemar test's power, enumerated: every m discordant pairs and every split k,
    rejecting where scipy's own binomial test says p <= alpha."""
    psi = min(max(discordance, diff), 1.0)
    if psi <= 0:
        return 0.0
    q = min((psi + diff) / (2 * psi), 1.0)
    total = 0.0
    for m in range(n + 1):
        weight = stats.binom.pmf(m, n, psi)
        for k in range(m + 1):       # k discordant pairs favour the first mode
            if m and stats.binomtest(k, m, 0.5).pvalue <= alpha:
                total += weight * stats.binom.pmf(k, m, q)
    return total


def test_analyse_counts_by_hand() -> None:
    a = [True, True, True, False, False, True, False, True]
    b = [True, False, True, True, False, False, False, True]
    # both: 1, 3, 8 -> 3; a only: 2, 6 -> 2; b only: 4 -> 1; neither: 5, 7 -> 2
    result = paired.analyse("on", "off", a, b, confidence=0.9)
    assert (result.a, result.b, result.n) == ("on", "off", 8)
    assert (result.both_correct, result.a_only, result.b_only, result.both_wrong) == (3, 2, 1, 2)
    assert (result.acc_a, result.acc_b, result.diff) == (5 / 8, 4 / 8, 1 / 8)
    assert (result.discordant, result.discordance_rate) == (3, 3 / 8)
    assert result.mcnemar_p == pytest.approx(1.0)               # 2 vs 1 of 3: no evidence
    assert result.significant is False
    assert (result.alpha, result.confidence, result.power) == (pytest.approx(0.1), 0.9, 0.8)
    assert result.diff_se == pytest.approx(paired.paired_diff_se(3, 2, 1, 2))
    assert result.mde == pytest.approx(min(paired.mde_from_se(result.diff_se, 0.0, 0.9), 1.0))
    assert result.as_dict()["diff_method"] == paired.DIFF_METHOD
    assert result.mde_method == paired.GATE_MDE_METHOD


def test_analyse_flags_a_clear_difference_either_way() -> None:
    worse = paired.analyse("on", "off", [False] * 40 + [True] * 60, [True] * 100)
    assert worse.significant is True and worse.diff_high < 0 and worse.diff == -0.4
    better = paired.analyse("on", "off", [True] * 100, [False] * 40 + [True] * 60)
    assert better.significant is True and better.diff_low > 0
    same = paired.analyse("on", "off", [True] * 100, [True] * 100)
    assert same.significant is False and same.mcnemar_p == 1.0 and same.mde <= 1.0
    assert math.isclose(same.diff, 0.0)


@pytest.mark.parametrize(("a", "b"), [([True], [True, False]), ([], [])])
def test_analyse_needs_equal_non_empty_lists(a: list[bool], b: list[bool]) -> None:
    with pytest.raises(ValueError) as info:
        paired.analyse("on", "off", a, b)
    assert str(info.value) == (f"paired analysis on vs off: need equal, non-empty outcome lists "
                               f"({len(a)} vs {len(b)})")


def _power_two_sided_formula(n: int, discordance: float, diff: float, alpha: float) -> float:
    """The same power for large n, from the textbook two-sided exact p-value
    min(1, 2 min(P(X <= k), P(X >= k))) per split, vectorised over every (m, k)."""
    import numpy as np

    psi = min(max(discordance, diff), 1.0)
    q = min((psi + diff) / (2 * psi), 1.0)
    total = 0.0
    for m in range(1, n + 1):
        k = np.arange(m + 1)
        p = np.minimum(1.0, 2 * np.minimum(stats.binom.cdf(k, m, 0.5),
                                           stats.binom.sf(k - 1, m, 0.5)))
        total += stats.binom.pmf(m, n, psi) * float(
            np.sum(stats.binom.pmf(k, m, q)[p <= alpha]))
    return total


# Accuracy statistics against statsmodels reference implementations and by simulation.


@pytest.mark.parametrize(("k", "n"), [(0, 24), (1, 24), (12, 24), (24, 24), (1230, 1319),
                                      (1223, 1319), (7, 200), (500, 1000)])
def test_wilson_matches_statsmodels_on_gsm8k_sized_counts(k: int, n: int) -> None:
    low, high = wilson(k, n)
    ref_low, ref_high = proportion_confint(k, n, alpha=0.05, method="wilson")
    assert low == pytest.approx(ref_low, abs=1e-12)
    assert high == pytest.approx(ref_high, abs=1e-12)


def test_wilson_rejects_bad_counts() -> None:
    with pytest.raises(ValueError):
        wilson(3, 0)
    with pytest.raises(ValueError):
        wilson(5, 4)


# tables: [[both right, a right only], [b right only, both wrong]]
@pytest.mark.parametrize("table", [
    [[1200, 10], [20, 89]], [[1200, 3], [15, 101]], [[10, 0], [0, 14]], [[5, 1], [0, 18]],
    [[900, 40], [41, 338]], [[0, 7], [2, 15]], [[100, 25], [5, 0]],
])
def test_mcnemar_exact_matches_statsmodels(table: list[list[int]]) -> None:
    ref = mcnemar(np.array(table), exact=True).pvalue
    assert mcnemar_exact(table[0][1], table[1][0]) == pytest.approx(ref, rel=1e-9, abs=1e-12)
    # symmetric in which mode is called "a"
    assert mcnemar_exact(table[1][0], table[0][1]) == pytest.approx(ref, rel=1e-9, abs=1e-12)


def test_analyse_counts_and_direction() -> None:
    a = [True] * 80 + [True] * 5 + [False] * 12 + [False] * 3
    b = [True] * 80 + [False] * 5 + [True] * 12 + [False] * 3
    p = analyse("forced", "off", a, b)
    assert (p.both_correct, p.a_only, p.b_only, p.both_wrong) == (80, 5, 12, 3)
    assert p.acc_a == pytest.approx(0.85) and p.acc_b == pytest.approx(0.92)
    assert p.diff == pytest.approx(-0.07)
    assert p.diff_low < p.diff < p.diff_high
    assert p.mcnemar_p == pytest.approx(mcnemar(np.array([[80, 5], [12, 3]]), exact=True).pvalue)
    same = analyse("on", "off", a, a)
    assert same.discordant == 0 and same.mcnemar_p == 1.0 and not same.significant
    assert same.diff_low < 0 < same.diff_high        # no zero-width interval
    with pytest.raises(ValueError):
        analyse("on", "off", a, a[:-1])


def test_paired_interval_coverage_by_simulation() -> None:
    rng = np.random.default_rng(1)
    n, probs = 300, [0.80, 0.03, 0.06, 0.11]      # both, a only, b only, neither
    true = probs[1] - probs[2]
    cells = rng.multinomial(n, probs, size=2000)
    hits = 0
    for both, a_only, b_only, neither in cells:
        low, high = paired_diff_interval(int(both), int(a_only), int(b_only), int(neither))
        hits += low <= true <= high
    assert 0.93 <= hits / len(cells) <= 0.975


def test_significance_flag_and_mde_use_the_gates_test_and_level() -> None:
    """The flag is the gate's paired interval at the gate's level (not McNemar at 0.05), and the
    MDE comes from that interval's standard error."""
    a = [True] * 1200 + [True] * 14 + [False] * 4 + [False] * 101
    b = [True] * 1200 + [False] * 14 + [True] * 4 + [False] * 101
    loose, strict = analyse("on", "off", a, b), analyse("on", "off", a, b, confidence=0.9995)
    assert loose.mcnemar_p < 0.05 and loose.significant            # at 95 % it excludes 0
    assert not strict.significant and strict.diff_low < 0 < strict.diff_high
    assert strict.confidence == 0.9995 and strict.mde > loose.mde
    assert strict.mde == pytest.approx(mde_from_se(strict.diff_se, 0.0, 0.9995))


def test_mde_from_se_has_its_power_by_simulation() -> None:
    rng = np.random.default_rng(3)
    n, disc = 1319, 0.04
    d = mde_from_se(0.0055, 0.01, 0.999)       # a drop past a 1-point margin, family level
    cells = rng.multinomial(n, [(disc - d) / 2, (disc + d) / 2, 1 - disc], size=4000)
    caught = 0
    for a_only, b_only, rest in cells:
        _low, high = paired_diff_interval(int(rest), int(a_only), int(b_only), 0,
                                         confidence=0.999)
        caught += high < -0.01
    se = paired_diff_se(int(n * (1 - disc)), int(n * (disc - d) / 2), int(n * (disc + d) / 2), 0)
    assert se == pytest.approx(0.0055, rel=0.15)
    assert 0.7 < caught / len(cells) < 0.9
