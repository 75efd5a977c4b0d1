"""The judge's statistics against scipy/statsmodels references and by simulation (no sglang).

Each test that guards against a named mutation of issue 11 says so in its docstring.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.weightstats import ttost_ind, ttost_paired

from servegate.config.judge import JudgeConfig
from servegate.judge.arms import Arm, NotJudgeable, ratio_interval
from servegate.judge.stats import (
    Interval,
    classify,
    direction,
    equivalence,
    log_bounds,
    log_se_within,
    per_check_confidence,
    pooled_run_variance,
    repeats_estimate,
    request_statistic,
    t_quantile,
    tost_confidence,
    tost_power,
    verdict,
)


def _lognormal(n: int, centre: float, cv: float, seed: int) -> np.ndarray:
    return centre * np.exp(np.random.default_rng(seed).normal(0.0, cv, n))


def _repeats_interval(cur: list[float], ref: list[float], *, confidence: float,
                      paired: bool = False) -> Interval:
    """The judge's interval over whole repeats of a summary-only metric (no per-request
    samples, so no within-run estimate: the assumed CV gets no weight and the repeats decide)."""
    return ratio_interval(Arm("cur", list(range(len(cur))), {"output_throughput": cur}),
                          Arm("ref", list(range(len(ref))), {"output_throughput": ref}),
                          "output_throughput", config=JudgeConfig(), confidence=confidence,
                          key="k", paired=paired)


def test_unpaired_repeats_match_scipy_ttest_ind():
    """Kills 'small-sample widening removed' (t with honest df replaced by z): the interval is
    scipy's two-sample t interval on log values, df = n_c + n_r - 2."""
    cur, ref = [101.0, 104.0, 99.5], [100.0, 98.0, 100.7]
    iv = _repeats_interval(cur, ref, confidence=0.99)
    ref_t = sps.ttest_ind(np.log(cur), np.log(ref), equal_var=True)
    ci = ref_t.confidence_interval(0.99)
    assert (iv.method, iv.df) == ("repeats", pytest.approx(4))
    assert math.log(iv.low) == pytest.approx(ci.low, rel=1e-9)
    assert math.log(iv.high) == pytest.approx(ci.high, rel=1e-9)


def test_paired_repeats_match_scipy_ttest_rel():
    """Kills 'paired comparison disabled': with pairing the interval is scipy's paired t."""
    on, off = [103.0, 110.0, 96.0, 105.0], [100.0, 108.0, 94.5, 102.0]
    iv = _repeats_interval(on, off, confidence=0.95, paired=True)
    ci = sps.ttest_rel(np.log(on), np.log(off)).confidence_interval(0.95)
    assert (iv.method, iv.df) == ("repeats-paired", 3)
    assert math.log(iv.low) == pytest.approx(ci.low, rel=1e-9)
    assert math.log(iv.high) == pytest.approx(ci.high, rel=1e-9)
    # shared server noise cancels only when paired: a 3 % effect is shown paired, not unpaired
    unpaired = _repeats_interval(on, off, confidence=0.95)
    assert iv.low > 1.0 > unpaired.low


def test_judge_pairs_on_vs_off_by_repeat():
    """Kills 'paired comparison disabled' at the judge level (ratio_interval, paired=True)."""
    rng = np.random.default_rng(4)
    server = np.exp(rng.normal(0, 0.08, 4))
    on = Arm("on", [0, 1, 2, 3], {"output_throughput": list(100 * server * 1.02)})
    off = Arm("off", [0, 1, 2, 3], {"output_throughput": list(100 * server)})
    config = JudgeConfig(run_to_run_cv=0.0, run_to_run_cv_dof=0)
    paired = ratio_interval(on, off, "output_throughput", config=config, confidence=0.95,
                            key="k", paired=True)
    unpaired = ratio_interval(on, off, "output_throughput", config=config, confidence=0.95,
                              key="k", paired=False)
    assert paired.method == "repeats-paired" and unpaired.method == "repeats"
    assert paired.high - paired.low < 0.2 * (unpaired.high - unpaired.low)


def test_three_repeats_aa_false_positive_rate_is_nominal():
    """3 vs 3 repeats, identical arms: the interval excludes 1 at its nominal rate (a percentile
    bootstrap's range-of-data interval excludes it ~5 % at any level; z instead of t ~3x)."""
    rng = np.random.default_rng(0)
    cur = np.log(100 * np.exp(rng.normal(0, 0.02, (20000, 3))))
    ref = np.log(100 * np.exp(rng.normal(0, 0.02, (20000, 3))))
    theta, se, df = repeats_estimate(cur, ref, paired=False, prior_var=0.0, prior_dof=0.0)
    low, high = log_bounds(theta, se, df, 0.99)
    rate = float(np.mean((low > 0) | (high < 0)))
    assert 0.006 < rate < 0.014, rate
    z_low = theta - 2.576 * se
    assert float(np.mean(z_low > 0)) > 2 * float(np.mean(low > 0))   # the simulation can tell


def test_assumed_cv_is_pooled_with_measured_spread():
    """Kills 'measured-spread widening removed': the repeats' spread enters the variance with its
    degrees of freedom, pooled with the assumed CV (never replaced by it, nor it by them)."""
    cur, ref = np.log([100.0, 112.0, 91.0]), np.log([100.0, 99.0, 101.0])
    sum_sq = ((cur - cur.mean()) ** 2).sum() + ((ref - ref.mean()) ** 2).sum()
    var, df = pooled_run_variance(sum_sq, 4, 0.02 ** 2, 10)
    assert float(df) == 14
    assert float(var) == pytest.approx((10 * 0.02 ** 2 + sum_sq) / 14)
    _theta, se, _ = repeats_estimate(cur, ref, paired=False, prior_var=0.02 ** 2, prior_dof=10)
    assert float(se) == pytest.approx(math.sqrt(float(var) * (2 / 3)))
    tight = repeats_estimate(np.log([100.0, 101.0, 99.0]), ref, paired=False,
                             prior_var=0.02 ** 2, prior_dof=10)[1]
    assert float(se) > 2 * float(tight)


def test_request_path_widens_with_the_measured_spread_of_repeats():
    """Kills 'measured-spread widening removed' on the request path: a reference with 3 repeats
    that disagree widens a 1-repeat comparison; the same requests with agreeing repeats do not."""
    reqs = list(_lognormal(200, 100, 0.1, 1))
    config = JudgeConfig(run_to_run_cv=0.02, run_to_run_cv_dof=4, min_repeats_for_repeat_bootstrap=3)
    cur = Arm("run", [0], {"mean_ttft_ms": [100.0]}, {"ttft_ms": reqs})
    calm = Arm("base", [0, 1, 2], {"mean_ttft_ms": [100.0, 100.5, 99.5]}, {"ttft_ms": reqs})
    wild = Arm("base", [0, 1, 2], {"mean_ttft_ms": [100.0, 125.0, 80.0]}, {"ttft_ms": reqs})
    a = ratio_interval(cur, calm, "mean_ttft_ms", config=config, confidence=0.95, key="k")
    b = ratio_interval(cur, wild, "mean_ttft_ms", config=config, confidence=0.95, key="k")
    assert "run-spread" in b.method and "assumed-run-cv" in b.method
    assert b.se > 2 * a.se


def test_mde_has_its_power_by_simulation():
    """Kills 'MDE returns floor + 0.5': a true change of exactly the MDE is flagged as a
    regression in ~80 % of draws at the interval's own level and df."""
    iv = Interval(1.0, 0.97, 1.03, 0.999, "repeats", 3, 3, se=0.012, df=8.0)
    mde = iv.minimal_detectable_effect(0.02)
    rng = np.random.default_rng(0)
    # theta_hat = true + se * t_df (a standardised t with the interval's own df)
    theta = math.log1p(mde) + 0.012 * rng.standard_t(8.0, 200000)
    low = theta - float(t_quantile(0.999, 8.0)) * 0.012
    power = float(np.mean(low > math.log1p(0.02)))
    assert 0.77 < power < 0.83, (mde, power)


def test_guidance_solves_for_repeats_at_the_current_estimate():
    """Kills 'samples_factor returns 2.0': 1.019 [1.009, 1.029] against a 2 % floor needs MORE
    data (the estimate sits just below the floor), by the factor (t se / distance)^2."""
    se = (math.log(1.029) - math.log(1.009)) / (2 * float(t_quantile(0.99, math.inf)))
    iv = Interval(1.019, 1.009, 1.029, 0.99, "repeats", 3, 3, se=se, run_var=0.0)
    guide = iv.guidance([1.02])
    expected = (float(t_quantile(0.99, math.inf)) * se / abs(math.log(1.019) - math.log(1.02))) ** 2
    assert not guide.decided
    assert guide.repeats_factor == pytest.approx(expected, rel=1e-9)
    assert guide.repeats_factor > 50
    assert iv.samples_factor(0.02) == pytest.approx(expected, rel=1e-9)
    far = Interval(1.30, 1.25, 1.35, 0.99, "repeats", 3, 3, se=0.015)
    assert far.guidance([1.02]).decided


def test_guidance_says_when_prompts_cannot_decide():
    """Run-to-run variance alone wider than the distance to the floor: no amount of prompts."""
    iv = Interval(1.03, 0.95, 1.12, 0.99, "requests+assumed-run-cv", 200, 200, se=0.032,
                  run_var=0.03 ** 2, n_repeats=1)
    guide = iv.guidance([1.05])
    assert guide.prompts_factor is None and "no amount of prompts" in guide.text
    mostly_within = Interval(1.03, 0.95, 1.12, 0.99, "requests", 200, 200, se=0.032,
                             run_var=0.001 ** 2, n_repeats=1)
    g = mostly_within.guidance([1.05])
    assert g.prompts_factor is not None and g.prompts_factor > 1


def test_within_run_se_against_scipy_references():
    """The mean's delta-method SE and a quantile's order-statistic SE agree with
    scipy.stats.bootstrap; the quantile ranks are scipy.stats.quantile_test's."""
    x = _lognormal(400, 100, 0.3, 2)
    boot = sps.bootstrap((x,), lambda s, axis: np.log(np.mean(s, axis=axis)), n_resamples=4000,
                         random_state=np.random.default_rng(0)).standard_error
    assert float(log_se_within(x, "mean")) == pytest.approx(boot, rel=0.1)
    boot_med = sps.bootstrap((x,), lambda s, axis: np.log(np.median(s, axis=axis)),
                             n_resamples=4000, random_state=np.random.default_rng(0)
                             ).standard_error
    assert float(log_se_within(x, "median")) == pytest.approx(boot_med, rel=0.25)
    ci = sps.quantile_test(x, q=np.median(x), p=0.5).confidence_interval(0.95)
    expected = (math.log(ci.high) - math.log(ci.low)) / (2 * 1.959963984540054)
    assert float(log_se_within(x, "median")) == pytest.approx(expected, rel=1e-9)


def test_a_quantile_the_requests_cannot_bound_is_not_judged():
    """p99 of 16 requests: the order-statistic interval runs past the sample; inconclusive with
    that reason, never a verdict."""
    assert math.isnan(float(log_se_within(_lognormal(16, 100, 0.3, 3), "p99")))
    cur = Arm("run", [0], {"p99_ttft_ms": [150.0]}, {"ttft_ms": list(_lognormal(16, 100, .3, 3))})
    ref = Arm("base", [0], {"p99_ttft_ms": [100.0]}, {"ttft_ms": list(_lognormal(16, 100, .3, 4))})
    with pytest.raises(NotJudgeable, match="cannot bound"):
        ratio_interval(cur, ref, "p99_ttft_ms", config=JudgeConfig(), confidence=0.99, key="k")


def test_no_degrees_of_freedom_is_unreachable_not_a_regression():
    """One repeat per side, no requests to lean on and no assumption worth anything: the level
    cannot be reached; the judge says so instead of deciding."""
    cur = Arm("run", [0, 1], {"output_throughput": [50.0, 50.0]})
    ref = Arm("base", [0, 1], {"output_throughput": [100.0, 100.0]})
    config = JudgeConfig(run_to_run_cv=0.0, run_to_run_cv_dof=0)
    iv = ratio_interval(cur, ref, "output_throughput", config=config, confidence=0.99, key="k",
                        paired=True)
    assert iv.df == 1                      # two pairs: one degree of freedom, honest t
    with pytest.raises(NotJudgeable, match="needs >= 2 repeats"):
        ratio_interval(Arm("run", [0], {"output_throughput": [50.0]}),
                       Arm("base", [0], {"output_throughput": [100.0]}), "output_throughput",
                       config=config, confidence=0.99, key="k")


def test_tost_matches_statsmodels():
    """The no-op equivalence at level 1 - 2 alpha is statsmodels' TOST at alpha (no prior)."""
    rng = np.random.default_rng(5)
    for trial in range(40):
        a = np.log(100 * np.exp(rng.normal(0, 0.02, 4)))
        b = np.log(100 * np.exp(rng.normal(0.01 * (trial % 3), 0.02, 4)))
        for paired in (False, True):
            theta, se, df = repeats_estimate(a, b, paired=paired, prior_var=0.0, prior_dof=0.0)
            low, high = log_bounds(theta, se, df, tost_confidence(0.95))
            margin = math.log1p(0.03)
            ours = bool(-margin <= low and high <= margin)
            test = ttost_paired if paired else ttost_ind
            p = test(a, b, -margin, margin)[0]
            assert ours == (p < 0.05), (trial, paired, p)


def test_tost_power_rule():
    """Power of the TOST on identical arms: high when the margin is many standard errors wide,
    zero when t * se alone exceeds it (then the no-op check only reports)."""
    assert float(tost_power(0.002, 30.0, 0.9, 0.02)) > 0.99
    assert float(tost_power(0.02, 4.0, 0.998, 0.02)) == 0.0
    rng = np.random.default_rng(1)
    theta = 0.006 * rng.standard_normal(100000)
    simulated = np.mean(np.abs(theta) <= math.log1p(0.02) - float(t_quantile(0.9, 1e9)) * 0.006)
    assert float(tost_power(0.006, 1e9, 0.9, 0.02)) == pytest.approx(simulated, abs=0.01)


def test_verdicts_need_the_whole_interval_past_the_floor():
    assert direction("output_throughput") == "higher" and direction("accuracy") == "higher"
    assert direction("p99_ttft_ms") == "lower"
    with pytest.raises(ValueError, match="not registered"):
        direction("mystery_metric")
    lower_tp = Interval(0.8, 0.78, 0.82, 0.95, "repeats", 3, 3)
    assert verdict(lower_tp, "higher", 0.05) == "regression"
    assert verdict(lower_tp, "lower", 0.05) == "improvement"
    assert verdict(Interval(1.03, 1.01, 1.04, 0.95, "r", 3, 3), "lower", 0.05) == "pass"
    assert verdict(Interval(1.05, 1.01, 1.09, 0.95, "r", 3, 3), "lower", 0.05) == "inconclusive"
    codes = classify(np.array([0.06, -0.2, 0.0, np.nan]), np.array([0.09, -0.1, 0.04, 0.1]),
                     0.05, "lower")
    assert codes.tolist() == [1, 2, 0, 3]
    assert equivalence(Interval(1.0, 0.99, 1.01, 0.9, "r", 3, 3), 0.02) == "pass"
    assert equivalence(Interval(1.1, 1.05, 1.15, 0.9, "r", 3, 3), 0.02) == "regression"


def test_request_interval_and_multiplicity():
    stat = request_statistic("mean_ttft_ms")
    assert stat is not None and stat[0] == "ttft_ms"
    cur, ref = list(_lognormal(300, 120, 0.1, 6)), list(_lognormal(300, 100, 0.1, 7))
    # one repeat each and no assumed run-to-run CV: the requests alone decide
    slow = ratio_interval(Arm("run", [0], {"mean_ttft_ms": [120.0]}, {"ttft_ms": cur}),
                          Arm("base", [0], {"mean_ttft_ms": [100.0]}, {"ttft_ms": ref}),
                          "mean_ttft_ms", config=JudgeConfig(run_to_run_cv=0.0),
                          confidence=0.99, key="k")
    assert slow.method == "requests" and slow.run_var == 0.0
    assert verdict(slow, "lower", 0.05) == "regression" and slow.df > 100
    assert per_check_confidence(0.95, 20) == pytest.approx(0.9975)
    assert tost_confidence(0.95) == pytest.approx(0.90)
