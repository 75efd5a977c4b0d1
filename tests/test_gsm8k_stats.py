"""Accuracy statistics against statsmodels reference implementations and by simulation."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from servegate.accuracy.paired import (
    analyse,
    mcnemar_exact,
    mcnemar_power,
    mde_from_se,
    mde_paired,
    paired_diff_interval,
    paired_diff_se,
    wilson,
)


@pytest.mark.parametrize(("k", "n"), [(0, 24), (1, 24), (12, 24), (24, 24), (1230, 1319),
                                      (1223, 1319), (7, 200), (500, 1000)])
def test_wilson_matches_statsmodels(k: int, n: int) -> None:
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


def test_mde_is_monotone_in_n_and_discordance() -> None:
    ns = [24, 50, 100, 200, 500, 1000, 1319, 5000]
    for psi in (0.0, 0.02, 0.05, 0.2):
        mdes = [mde_paired(n, psi) for n in ns]
        assert all(x > y for x, y in itertools.pairwise(mdes)), (psi, mdes)
    assert mde_paired(1319, 0.02) < mde_paired(1319, 0.05) < mde_paired(1319, 0.2)
    # Issue 4's arithmetic: ~2 % discordance on 1319 questions -> SE ~0.4 pp -> MDE ~1.1 pp.
    assert 0.008 < mde_paired(1319, 0.02) < 0.014


@pytest.mark.parametrize(("n", "psi"), [(1319, 0.05), (1319, 0.0), (200, 0.1), (24, 0.3)])
def test_mde_has_the_stated_power_by_simulation(n: int, psi: float) -> None:
    """Exact McNemar on simulated pairs differing by exactly the MDE rejects ~80 % of the time."""
    rng = np.random.default_rng(0)
    d = mde_paired(n, psi)
    disc = max(psi, d)
    # discordant cells: P(a right only) = (disc - d)/2, P(b right only) = (disc + d)/2
    cells = rng.multinomial(n, [(disc - d) / 2, (disc + d) / 2, 1 - disc], size=4000)
    m = cells[:, 0] + cells[:, 1]
    p = 2 * stats.binom.cdf(np.minimum(cells[:, 0], cells[:, 1]), m, 0.5)
    power = float(np.mean(np.minimum(p, 1.0) < 0.05))
    assert 0.77 < power < 0.83, (d, power)
    assert mcnemar_power(n, psi, d) == pytest.approx(0.8, abs=1e-4)


def test_mde_is_one_when_nothing_is_detectable() -> None:
    assert mde_paired(4, 0.5) == 1.0     # 4 pairs: even 4-0 gives p = 0.125


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
