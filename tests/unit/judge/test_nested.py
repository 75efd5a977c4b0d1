"""servegate.judge.nested: the trimmed block mean (Yuen), the starts x blocks random-effects
estimate and the paired / independent differences, against scipy and hand computations."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from scipy import stats as sps

from servegate.judge.nested import (
    Component,
    independent_difference,
    nested_mean,
    paired_difference,
    satterthwaite,
    start_weights,
    trimmed,
)

# ------------------------------------------------------------------------------- trimmed


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 9, 10, 13, 15, 20, 35])
def test_trimmed_mean_is_scipys_trim_mean(n: int) -> None:
    rng = np.random.default_rng(n)
    values = rng.standard_t(3, size=(4, n))          # heavy tails: trimming matters
    mean, _, _ = trimmed(values)
    np.testing.assert_allclose(mean, sps.trim_mean(values, 0.2, axis=-1), rtol=1e-12)


def test_yuen_variance_by_hand() -> None:
    """n = 10: g = 2 cut from each end, the two lowest set to the 3rd value and the two highest
    to the 8th, se^2 = sum of squares of the winsorized sample about its mean / (h (h - 1))."""
    values = [3.0, -1.0, 7.5, 0.25, 2.0, 11.0, 4.0, -6.0, 1.5, 2.5]
    x = sorted(values)
    g, h = 2, 6
    winsorized = [x[g]] * g + x[g:len(x) - g] + [x[len(x) - g - 1]] * g
    w_mean = sum(winsorized) / len(winsorized)
    ss = sum((v - w_mean) ** 2 for v in winsorized)
    mean, se2, df = trimmed(np.array(values))
    assert float(mean) == pytest.approx(sum(x[g:len(x) - g]) / h, rel=1e-12)
    assert float(se2) == pytest.approx(ss / (h * (h - 1)), rel=1e-12)
    assert float(df) == h - 1


@pytest.mark.parametrize(("n_a", "n_b"), [(10, 7), (6, 12), (5, 5), (4, 9), (15, 8)])
def test_yuen_terms_reproduce_scipys_trimmed_welch_test(n_a: int, n_b: int) -> None:
    """Two independent samples: (mean_a - mean_b) / sqrt(se2_a + se2_b) is scipy's Yuen-Welch t,
    and Welch-Satterthwaite over the two terms (df h - 1 each) is scipy's df."""
    rng = np.random.default_rng(100 * n_a + n_b)
    a = rng.standard_t(4, n_a) * 2.0 + 1.0
    b = rng.standard_t(4, n_b) * 0.7
    mean_a, se2_a, df_a = trimmed(a)
    mean_b, se2_b, df_b = trimmed(b)
    res = sps.ttest_ind(a, b, trim=0.2, equal_var=False)
    t = (mean_a - mean_b) / math.sqrt(se2_a + se2_b)
    assert float(t) == pytest.approx(float(res.statistic), rel=1e-10)
    df = satterthwaite((Component(np.asarray(se2_a), np.asarray(df_a), "block"),
                        Component(np.asarray(se2_b), np.asarray(df_b), "block")))
    assert float(df) == pytest.approx(float(res.df), rel=1e-10)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_no_trimming_below_five_values(n: int) -> None:
    values = np.array([1.0, 4.0, 2.5, 10.0][:n])
    mean, se2, df = trimmed(values)
    assert float(mean) == pytest.approx(statistics.mean(values.tolist()), rel=1e-12)
    assert float(se2) == pytest.approx(statistics.variance(values.tolist()) / n, rel=1e-12)
    assert float(df) == n - 1


def test_five_values_trim_one_from_each_end() -> None:
    mean, _, df = trimmed(np.array([100.0, 1.0, 2.0, 3.0, -50.0]))
    assert float(mean) == pytest.approx(2.0) and float(df) == 2.0


def test_one_value_has_no_standard_error() -> None:
    mean, se2, df = trimmed(np.array([[3.5], [1.0]]))
    np.testing.assert_array_equal(mean, [3.5, 1.0])
    assert np.isnan(se2).all() and (df == 0).all()


def test_satterthwaite_ignores_exact_and_empty_terms() -> None:
    exact = Component(np.asarray(0.3), np.asarray(np.inf), "start")
    empty = Component(np.asarray(0.0), np.asarray(0.0), "block")
    measured = Component(np.asarray(0.1), np.asarray(4.0), "block")
    assert float(satterthwaite((exact, measured))) == pytest.approx(0.4 ** 2 / (0.1 ** 2 / 4))
    assert float(satterthwaite((exact, empty))) == math.inf


# ------------------------------------------------------------------------------- nested_mean


def test_one_start_takes_the_prior_exact_when_it_has_no_dof() -> None:
    logs = np.array([[0.10, 0.30, 0.20, 0.60]])            # S = 1, B = 4: no trimming
    within = statistics.variance([0.10, 0.30, 0.20, 0.60]) / 4
    est = nested_mean(logs, prior_var=0.04, prior_dof=0.0)
    assert est.between_source == "prior"
    assert est.scalar("between_var") == 0.04
    assert est.scalar("between_df") == math.inf
    assert math.isnan(est.scalar("measured_between_var"))
    assert est.scalar("theta") == pytest.approx(0.30)
    assert est.scalar("se") ** 2 == pytest.approx(0.04 + within, rel=1e-12)
    # the prior is exact: only the within part has finite df (B - 1 = 3)
    assert est.scalar("df") == pytest.approx((0.04 + within) ** 2 / (within ** 2 / 3), rel=1e-12)
    weighted = nested_mean(logs, prior_var=0.04, prior_dof=5.0)
    assert weighted.between_source == "prior" and weighted.scalar("between_df") == 5.0
    assert weighted.scalar("se") == pytest.approx(est.scalar("se"))


def test_one_start_one_block_is_the_prior_alone() -> None:
    est = nested_mean(np.array([[0.7]]), prior_var=0.09, prior_dof=0.0)
    assert est.scalar("se") == pytest.approx(0.3) and est.scalar("df") == math.inf


def test_between_starts_pooled_with_the_prior_by_hand() -> None:
    """S = 3, B = 3 (n = 9, g = 1, h = 7), every step by hand: centres are the starts' medians,
    the estimate their mean plus the trimmed mean of the pooled residuals; the block part is
    Yuen's (n-1) s_w^2 / (h (h-1)) with s_w^2 over n - S; the start part is the spread of the
    starts' winsorized means less S x the block part, pooled with the prior by dof."""
    rows = [[0.0, 0.1, 0.2], [0.3, 0.5, 0.4], [1.0, 0.9, 1.2]]
    centres = [statistics.median(r) for r in rows]                       # 0.1, 0.4, 1.0
    residuals = sorted(v - c for r, c in zip(rows, centres, strict=True) for v in r)
    kept = residuals[1:-1]
    theta = statistics.mean(centres) + statistics.mean(kept)
    low, high = residuals[1], residuals[-2]
    winsorized = [min(max(v, low), high) for v in residuals]
    w_mean = statistics.mean(winsorized)
    s_w2 = sum((v - w_mean) ** 2 for v in winsorized) / (9 - 3)
    within = 8 * s_w2 / (7 * 6)
    start_means = [c + statistics.mean(min(max(v - c, low), high) for v in r)
                   for r, c in zip(rows, centres, strict=True)]
    measured = max(statistics.variance(start_means) - 3 * within, 0.0)
    assert measured > 0
    prior_var, prior_dof = 0.01, 4.0
    between = (prior_dof * prior_var + 2 * measured) / (prior_dof + 2)
    # the pooling itself (no stated-level test); with it, this measurement refutes the prior
    est = nested_mean(np.array(rows), prior_var=prior_var, prior_dof=prior_dof,
                      stated_level=None)
    assert est.between_source == "measured+prior"
    # the random-effects test: the starts' spread against prior + the block part it carries,
    # F on 2 and the Satterthwaite dof of the prior (4) and the block part (4)
    tested = nested_mean(np.array(rows), prior_var=prior_var, prior_dof=prior_dof)
    carried = 3 * within
    dfd = (prior_var + carried) ** 2 / (prior_var ** 2 / prior_dof + carried ** 2 / 4)
    p = sps.f.sf((measured + carried) / (prior_var + carried), 2, dfd)
    assert float(tested.prior_p) == pytest.approx(p, rel=1e-9)
    assert p < 0.01 and bool(tested.widened)
    assert tested.between_source == "measured, prior refuted"
    assert tested.scalar("between_var") == pytest.approx(measured, rel=1e-12)
    assert tested.scalar("between_df") == 2
    assert est.scalar("theta") == pytest.approx(theta, rel=1e-12)
    assert est.scalar("measured_between_var") == pytest.approx(measured, rel=1e-12)
    assert est.scalar("between_var") == pytest.approx(between, rel=1e-12)
    assert est.scalar("between_df") == prior_dof + 2
    assert est.scalar("se") ** 2 == pytest.approx(between / 3 + within, rel=1e-12)
    parts = ((between / 3, prior_dof + 2), (within, 7 - 3))
    df = sum(v for v, _ in parts) ** 2 / sum(v * v / d for v, d in parts)
    assert est.scalar("df") == pytest.approx(df, rel=1e-12)
    assert est.scalar("block_df") == 4
    measured_only = nested_mean(np.array(rows), prior_var=prior_var, prior_dof=0.0)
    assert measured_only.between_source == "measured"
    assert measured_only.scalar("between_var") == pytest.approx(measured, rel=1e-12)
    assert measured_only.scalar("between_df") == 2


def test_a_burst_in_one_block_barely_moves_the_estimate() -> None:
    """One block +50 % (an interference burst) among 2 starts x 4 blocks: the plain mean moves
    by 0.405 / 8 = 0.051, the nested estimate (trimmed residuals) by under a tenth of that."""
    rng = np.random.default_rng(11)
    logs = rng.normal(0.0, 0.01, (2, 4))
    burst = logs.copy()
    burst[1, 2] += math.log(1.5)
    plain = nested_mean(logs, prior_var=0.0, prior_dof=0.0).scalar("theta")
    moved = nested_mean(burst, prior_var=0.0, prior_dof=0.0).scalar("theta")
    assert float(burst.mean() - logs.mean()) == pytest.approx(math.log(1.5) / 8)
    assert abs(moved - plain) < 0.005


def test_between_never_negative() -> None:
    """Start means closer than their within noise allows: the measured part is 0, not negative."""
    rows = [[0.0, 1.0, 2.0], [0.1, 1.1, 1.9], [2.0, 0.0, 1.05]]
    est = nested_mean(np.array(rows), prior_var=0.5, prior_dof=2.0)
    assert est.scalar("measured_between_var") == 0.0
    assert est.scalar("between_var") == pytest.approx(2 * 0.5 / 4)


def test_leading_axes_are_nights() -> None:
    rng = np.random.default_rng(7)
    logs = rng.standard_t(3, (9, 3, 6)) * 0.05 + rng.normal(0, 0.1, (9, 3, 1))
    all_nights = nested_mean(logs, prior_var=0.002, prior_dof=10.0)
    assert all_nights.theta.shape == (9,)
    for night in range(9):
        one = nested_mean(logs[night], prior_var=0.002, prior_dof=10.0)
        for name in ("theta", "se", "df", "block_var", "block_df", "between_var",
                     "between_df", "measured_between_var"):
            assert getattr(all_nights, name)[night] == pytest.approx(one.scalar(name),
                                                                     rel=1e-12), name


def test_nested_mean_rejects_flat_input() -> None:
    with pytest.raises(ValueError, match="starts, blocks"):
        nested_mean(np.array([1.0, 2.0]), prior_var=0.0, prior_dof=0.0)


# ------------------------------------------------------------------------------- differences


def _two_modes(seed: int, starts: int = 3, blocks: int = 6) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    current = 0.05 + rng.normal(0, 0.03, (1, starts, blocks))
    reference = rng.normal(0, 0.03, (1, starts, blocks))
    return current, reference


@pytest.mark.parametrize("starts", [1, 3])
def test_paired_difference_cancels_a_start_effect(starts: int) -> None:
    current, reference = _two_modes(1, starts)
    plain = paired_difference(current, reference, interaction_var=1e-4, interaction_dof=10.0)
    shift = np.array([5.0, -3.0, 0.7][:starts]).reshape(1, starts, 1)
    moved = paired_difference(current + shift, reference + shift, interaction_var=1e-4,
                              interaction_dof=10.0)
    for name in ("theta", "se", "df"):
        assert moved.scalar(name) == pytest.approx(plain.scalar(name), rel=1e-9, abs=1e-12)
    assert plain.parts[0].components[0].level == "interaction"
    assert "blocks-paired" in plain.method


def test_independent_difference_counts_the_start_effect() -> None:
    current, reference = _two_modes(2)
    plain = independent_difference(current, reference, start_var=1e-4, start_dof=10.0)
    shift = np.array([0.5, -0.3, 0.1]).reshape(1, 3, 1)
    moved = independent_difference(current + shift, reference + shift, start_var=1e-4,
                                   start_dof=10.0, stated_level=None)
    assert moved.scalar("se") > 3 * plain.scalar("se")
    assert moved.parts[0].scalar("measured_between_var") > 0.05
    # the start level is pooled over both sides (2 dof each) and the prior (10 dof)
    cur = nested_mean(current + shift, prior_var=1e-4, prior_dof=10.0)
    ref = nested_mean(reference + shift, prior_var=1e-4, prior_dof=10.0)
    pooled = (10 * 1e-4 + 2 * cur.scalar("measured_between_var")
              + 2 * ref.scalar("measured_between_var")) / 14
    block = cur.components[1].var[0] + ref.components[1].var[0]
    assert moved.scalar("se") ** 2 == pytest.approx(2 * pooled / 3 + block)
    assert moved.parts[0].scalar("between_df") == 14
    assert moved.scalar("theta") == pytest.approx(cur.scalar("theta") - ref.scalar("theta"))
    assert [c.level for c in moved.components] == ["start", "block", "start", "block"]
    # one shared start variance: one component of 14 dof, not two
    start_c, block_c, start_r, block_r = moved.components
    shared = Component(start_c.var + start_r.var, start_c.df, "start")
    assert moved.scalar("df") == pytest.approx(float(satterthwaite((shared, block_c,
                                                                     block_r))[0]))
    assert moved.scalar("df") < float(satterthwaite(moved.components)[0])
    # tested at the stated level, the prior (log-sd 0.01) is refuted: the sides' 4 dof alone
    honest = independent_difference(current + shift, reference + shift, start_var=1e-4,
                                    start_dof=10.0)
    measured = (cur.scalar("measured_between_var") + ref.scalar("measured_between_var")) / 2
    assert honest.parts[0].between_source == "measured, prior refuted"
    assert honest.scalar("se") ** 2 == pytest.approx(2 * measured / 3 + block)
    assert honest.parts[0].scalar("between_df") == 4 and honest.scalar("se") > moved.scalar("se")


def test_one_start_run_takes_the_start_level_its_reference_measured() -> None:
    """A one-start run against a five-start reference: both sides use the reference's measured
    start spread (pooled with the prior), not the prior alone."""
    rng = np.random.default_rng(5)
    reference = rng.normal(0.0, 0.2, (1, 5, 1)) + rng.normal(0.0, 0.01, (1, 5, 4))
    current = rng.normal(0.0, 0.01, (1, 1, 4))
    diff = independent_difference(current, reference, start_var=0.3 ** 2, start_dof=0.0)
    measured = nested_mean(reference, prior_var=0.0, prior_dof=0.0)
    assert diff.parts[0].between_source == "measured"
    assert diff.parts[0].scalar("between_var") == pytest.approx(
        measured.scalar("measured_between_var"))


def test_the_same_start_effects_on_both_sides_cancel() -> None:
    """Each start keeps its own level (the mean of the starts' medians): the same start
    effects on both sides move both by their mean, so the difference is unchanged, exactly."""
    current, reference = _two_modes(2)
    plain = independent_difference(current, reference, start_var=1e-4, start_dof=10.0)
    shift = np.array([0.5, -0.3, 0.1]).reshape(1, 3, 1)
    moved = independent_difference(current + shift, reference + shift, start_var=1e-4,
                                   start_dof=10.0)
    assert moved.scalar("theta") == pytest.approx(plain.scalar("theta"), abs=1e-12)
    medians = np.median(current[0], axis=-1)
    residuals = (current[0] - medians[:, None]).ravel()
    assert nested_mean(current, prior_var=0.0, prior_dof=0.0).scalar("theta") == \
        pytest.approx(float(np.mean(medians) + sps.trim_mean(residuals, 0.2)), rel=1e-12)


def test_paired_interval_covers_the_true_difference_at_95_percent() -> None:
    """4000 simulated runs of S = 2 starts x B = 6 block pairs: block noise 0.065 (log-sd),
    a start effect 0.08 shared by both modes, a start x mode interaction 0.01 as the prior
    says (10 dof). The 95 % interval theta +- t(df) se covers the true 3 % at 93-97 %."""
    rng = np.random.default_rng(20261201)
    nights, starts, blocks, delta = 4000, 2, 6, 0.03
    start = rng.normal(0.0, 0.08, (nights, starts, 1))
    interaction = rng.normal(0.0, 0.01, (nights, starts, 1))
    current = delta + start + interaction + rng.normal(0.0, 0.065, (nights, starts, blocks))
    reference = start + rng.normal(0.0, 0.065, (nights, starts, blocks))
    diff = paired_difference(current, reference, interaction_var=0.01 ** 2, interaction_dof=10.0)
    half = sps.t.ppf(0.975, diff.df) * diff.se
    coverage = float(np.mean(np.abs(diff.theta - delta) <= half))
    assert 0.93 <= coverage <= 0.97, coverage


def test_nested_mean_names_a_bad_shape() -> None:
    with pytest.raises(ValueError, match=r"^nested_mean: expected values shaped \(\.\.\., "
                                         r"starts, blocks\)$"):
        nested_mean(np.ones(3), prior_var=0.01, prior_dof=4)
    for shape in ((2, 0), (0, 3)):
        with pytest.raises(ValueError, match=r"^nested_mean: no blocks$"):
            nested_mean(np.ones(shape), prior_var=0.01, prior_dof=4)


def test_two_blocks_a_start_measure_the_block_level() -> None:
    """3 starts x 2 blocks: 6 residuals, one trimmed each side, h = 4, h - starts = 1 df."""
    logs = np.array([[0.0, 0.02], [0.05, 0.04], [-0.03, 0.01]])
    est = nested_mean(logs, prior_var=0.0004, prior_dof=4)
    assert float(est.block_df) == 1.0 and float(est.components[1].var) > 0


def test_a_prior_worth_one_start_is_pooled_with_the_measured_start_level() -> None:
    logs = np.array([[0.0, 0.01, 0.0], [0.1, 0.11, 0.1]])
    est = nested_mean(logs, prior_var=0.0004, prior_dof=1)
    assert est.between_source == "measured+prior"
    assert float(est.between_df) == 2.0                          # 1 prior + 1 measured
    assert float(est.between_var) == pytest.approx((0.0004 + float(est.measured_between_var)) / 2)


CURRENT = np.array([[0.0, 0.02, 0.9, 0.01, 0.03], [0.1, 0.12, 0.08, 0.11, -0.5]])
REFERENCE = np.array([[0.05, 0.04, 0.06, 0.07, 0.05], [0.0, 0.01, 0.02, -0.01, 0.4]])


def test_the_trim_reaches_both_sides_and_the_method_names_it() -> None:
    diff = independent_difference(CURRENT, REFERENCE, start_var=0.0004, start_dof=4, trim=0.1)
    assert diff.method == "blocks (2x5 vs 2x5 starts x blocks, trimmed 10%)"
    expected = (nested_mean(CURRENT, prior_var=0.0004, prior_dof=4, trim=0.1).theta
                - nested_mean(REFERENCE, prior_var=0.0004, prior_dof=4, trim=0.1).theta)
    assert float(diff.theta) == pytest.approx(float(expected), abs=1e-12)
    assert float(diff.theta) != pytest.approx(float(independent_difference(
        CURRENT, REFERENCE, start_var=0.0004, start_dof=4).theta), abs=1e-6)
    paired = paired_difference(CURRENT, REFERENCE, interaction_var=0.0001, interaction_dof=4,
                               trim=0.1)
    assert paired.method == "blocks-paired (2 start(s) x 5 block pair(s), trimmed 10%)"
    assert float(paired.theta) == pytest.approx(float(nested_mean(
        CURRENT - REFERENCE, prior_var=0.0001, prior_dof=4, trim=0.1).theta), abs=1e-12)


def test_a_pooled_start_level_replaces_each_sides_own() -> None:
    diff = independent_difference(CURRENT, REFERENCE, start_var=0.0004, start_dof=1)
    for part in diff.parts:
        assert part.between_source == "measured+prior"          # a prior worth one start
        assert float(part.between_df) == 3.0                    # 1 prior + 1 + 1 measured
        start, block = part.components
        assert float(start.var) == pytest.approx(float(part.between_var) / part.starts)
        assert float(part.df) == pytest.approx(float(satterthwaite(part.components)))
        assert float(part.se) ** 2 == pytest.approx(float(start.var) + float(block.var))


def test_one_start_with_a_prior_worth_one_start_keeps_its_dof() -> None:
    est = nested_mean(np.array([[0.0, 0.01, 0.02]]), prior_var=0.0004, prior_dof=1)
    assert est.between_source == "prior" and float(est.between_df) == 1.0


def test_the_block_variance_is_the_pooled_means_times_the_kept_residuals() -> None:
    """3 x 2: h = 4 residuals kept; the block variance is within x h."""
    est = nested_mean(np.array([[0.0, 0.02], [0.05, 0.04], [-0.03, 0.01]]), prior_var=0.0004,
                      prior_dof=4)
    assert float(est.block_var) == pytest.approx(4 * float(est.components[1].var))


def test_many_nights_at_once_keep_a_pooled_level_per_night() -> None:
    rng = np.random.default_rng(5)
    cur, ref = rng.normal(0, 0.05, (7, 2, 3)), rng.normal(0, 0.05, (7, 2, 3))
    diff = independent_difference(cur, ref, start_var=0.0004, start_dof=4)
    for part in diff.parts:
        assert np.shape(part.between_df) == (7,) and np.shape(part.between_var) == (7,)
    one = independent_difference(cur[3], ref[3], start_var=0.0004, start_dof=4)
    assert float(diff.theta[3]) == pytest.approx(float(one.theta))
    assert float(diff.se[3]) == pytest.approx(float(one.se))


def test_independent_difference_counts_the_shared_start_variance_once() -> None:
    """Three starts of one block a side, no prior: the start variance pooled from both sides is
    one estimate with (3 - 1) + (3 - 1) degrees of freedom, exactly the pooled two-sample t
    test (scipy's ttest_ind), not twice that."""
    cur = np.log([101.0, 97.0, 104.0])
    ref = np.log([95.0, 99.0, 93.0])
    diff = independent_difference(cur[None, :, None], ref[None, :, None], start_var=0.0,
                                  start_dof=0.0)
    expected = sps.ttest_ind(cur, ref, equal_var=True)
    assert diff.scalar("df") == pytest.approx(4.0)
    assert diff.scalar("theta") / diff.scalar("se") == pytest.approx(float(expected.statistic))


def test_a_prior_the_starts_agree_with_is_pooled_and_per_night_priors_broadcast() -> None:
    """The stated-level test fires on a start spread far above prior + block part and not on
    one the prior explains; priors may differ per night (a learned profile per simulated
    night), each night tested and pooled with its own."""
    from servegate.judge.nested import refute_prior

    measured = np.array([1e-5, 1e-2, 1e-5])
    var, dof, widened, p = refute_prior(np.array([1e-5, 1e-5, 1e-3]), np.array([14.0, 14.0, 4.0]),
                                        measured, 1.0, carried=1e-5, carried_df=8.0)
    assert widened.tolist() == [False, True, False]
    assert var[1] == measured[1] and dof.tolist() == [15.0, 1.0, 5.0]
    assert var[0] == pytest.approx((14 * 1e-5 + 1e-5) / 15)
    assert var[2] == pytest.approx((4 * 1e-3 + 1e-5) / 5)
    assert p[1] < 0.01 < p[0]
    # no prior worth anything: the measurement alone, untested
    var, dof, widened, p = refute_prior(1e-5, 0.0, measured, 1.0)
    assert not widened.any() and np.isnan(p).all() and dof.tolist() == [1.0] * 3
    # the test switched off: pooled however far the measurement lies
    _, dof, widened, _ = refute_prior(1e-5, 14.0, measured, 1.0, stated_level=None)
    assert not widened.any() and dof.tolist() == [15.0] * 3


def test_simulated_nights_take_a_prior_per_night() -> None:
    rng = np.random.default_rng(4)
    logs = rng.normal(0.0, 0.01, (3, 2, 6)) + rng.normal(0.0, 0.05, (3, 2, 1))
    est = nested_mean(logs, prior_var=np.array([0.05 ** 2, 1e-6, 0.05 ** 2]),
                      prior_dof=np.array([14.0, 14.0, 0.0]))
    assert est.widened is not None and est.widened.tolist()[2] is False
    assert est.between_df.tolist()[0] == 15.0 and est.between_df.tolist()[2] == 1.0
    for night in range(3):
        single = nested_mean(logs[night], prior_var=[0.05 ** 2, 1e-6, 0.05 ** 2][night],
                             prior_dof=[14.0, 14.0, 0.0][night])
        assert single.scalar("se") == pytest.approx(float(est.se[night]))


# ------------------------------------------------------------------------------ the halves


def test_a_halfs_own_level_is_a_fixed_effect_not_start_noise() -> None:
    """Four starts on two halves, the second half 10 % slower all night: centred per half the
    starts agree exactly (the start level measured 0 on S - 2 = 2 dof), while the same
    values taken as four plain starts read the half's offset as start noise; the estimate is
    the mean of the two halves either way (balanced)."""
    blocks = np.array([0.0, 0.01, -0.01])
    logs = np.stack([blocks + (0.1 if half else 0.0) for half in (0, 1, 0, 1)])[None]
    centred = nested_mean(logs, prior_var=0.0, prior_dof=0.0, halves=[0, 1, 0, 1])
    plain = nested_mean(logs, prior_var=0.0, prior_dof=0.0)
    assert centred.groups == 2 and plain.groups == 1
    assert centred.scalar("measured_between_var") == 0.0
    assert centred.scalar("between_df") == 2.0 and plain.scalar("between_df") == 3.0
    assert plain.scalar("measured_between_var") > 0.002
    assert centred.scalar("theta") == pytest.approx(plain.scalar("theta")) \
        == pytest.approx(0.05)
    assert centred.share == pytest.approx(1 / 4) == plain.share


def test_unbalanced_halves_weigh_each_half_alike() -> None:
    """Three starts, two on half 0 and one on half 1: each half weighs one half of the mean
    (the lone start 1/2, the pair 1/4 each), and the start variance's share of the mean's is
    the weights' squares (1/4 + 2/16 = 3/8, not 1/3)."""
    weights, onehot = start_weights([0, 0, 1], 3)
    assert weights.tolist() == [0.25, 0.25, 0.5] and onehot.shape == (3, 2)
    logs = np.array([[[0.0, 0.0], [0.2, 0.2], [1.0, 1.0]]])
    est = nested_mean(logs, prior_var=0.01, prior_dof=0.0, halves=[0, 0, 1])
    assert est.scalar("theta") == pytest.approx(0.25 * 0.0 + 0.25 * 0.2 + 0.5 * 1.0)
    assert est.share == pytest.approx(3 / 8)
    assert est.scalar("between_df") == 1.0                 # S - halves


def test_one_start_a_half_measures_no_start_level_and_names_a_bad_length() -> None:
    logs = np.array([[[0.0, 0.1], [0.5, 0.6]]])
    est = nested_mean(logs, prior_var=0.04, prior_dof=0.0, halves=[0, 1])
    assert est.between_source == "prior" and est.scalar("between_var") == 0.04
    with pytest.raises(ValueError, match="3 halves for 2 starts"):
        nested_mean(logs, prior_var=0.04, prior_dof=0.0, halves=[0, 1, 0])


def test_a_halves_run_against_its_baseline_pools_the_starts_within_halves() -> None:
    """Tonight's halves differ by 20 %, the baseline's by nothing: centred per half tonight
    adds S - 2 dof of start level, not the halves' offset, to the pooled start level; the
    method names the halves."""
    rng = np.random.default_rng(5)
    tonight = rng.normal(0.0, 0.01, (1, 4, 3)) + np.array([0.0, 0.2, 0.0, 0.2])[None, :, None]
    baseline = rng.normal(0.0, 0.01, (1, 4, 3))
    centred = independent_difference(tonight, baseline, start_var=0.0, start_dof=0.0,
                                     halves=([0, 1, 0, 1], None))
    plain = independent_difference(tonight, baseline, start_var=0.0, start_dof=0.0)
    assert centred.parts[0].scalar("between_df") == 2.0 + 3.0          # (4 - 2) + (4 - 1)
    assert centred.scalar("se") < plain.scalar("se") / 3
    assert centred.scalar("theta") == pytest.approx(plain.scalar("theta"))
    assert "4x3 in 2 halves vs 4x3 starts" in centred.method
