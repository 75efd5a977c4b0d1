"""The judge's ratio and difference intervals against independent references (scipy's t tests,
limits the formulas must reach, numbers worked out by hand): holes mutation testing showed
(issue 15)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from servegate.config.judge import JudgeConfig
from servegate.judge import arms, stats
from servegate.judge.arms import Arm, ArmStats

CUR = [104.0, 99.0, 108.0, 101.0]
REF = [100.0, 97.0, 99.0, 95.0]


def _arm(label: str, values: list[float], requests: list[float] | None = None) -> Arm:
    """An arm whose repeats give both a summary-only metric (``output_throughput``) and one
    with a per-request statistic (``mean_ttft_ms``, ``median_ttft_ms`` over ``requests``)."""
    metrics = {"output_throughput": values, "mean_ttft_ms": values, "median_ttft_ms": values}
    return Arm(label, list(range(len(values))), metrics, {"ttft_ms": requests} if requests else {})


def _interval(cur: Arm, ref: Arm, metric: str = "output_throughput", *, confidence: float = 0.9,
              paired: bool = False, **config: float) -> stats.Interval:
    return arms.ratio_interval(cur, ref, metric, config=JudgeConfig(**config),
                               confidence=confidence, key="k", paired=paired)


def _known_within(values: list[float], pooled_se: float) -> ArmStats:
    """Arm statistics with a known within-run standard error (the prior then gets weight)."""
    return ArmStats(np.array([values]), np.array([100.0]), np.array([pooled_se]), 50)


def test_unpaired_repeats_match_scipy_ttest_ind() -> None:
    ref = sps.ttest_ind(np.log(CUR), np.log(REF)).confidence_interval(0.9)
    got = _interval(_arm("cur", CUR), _arm("ref", REF), confidence=0.9)
    assert got.estimate == pytest.approx(math.exp(np.log(CUR).mean() - np.log(REF).mean()))
    assert (got.low, got.high) == pytest.approx((math.exp(ref.low), math.exp(ref.high)))
    assert (got.method, got.n_current, got.n_reference, got.df) == ("repeats", 4, 4, 6.0)
    assert got.confidence == 0.9 and got.scale == "ratio"
    assert got.run_var == pytest.approx(got.se ** 2)          # no within-run part known


def test_paired_repeats_match_scipy_ttest_rel() -> None:
    ref = sps.ttest_rel(np.log(CUR), np.log(REF)).confidence_interval(0.95)
    got = _interval(_arm("cur", CUR), _arm("ref", REF), confidence=0.95, paired=True)
    assert (got.low, got.high) == pytest.approx((math.exp(ref.low), math.exp(ref.high)))
    assert (got.method, got.df) == ("repeats-paired", 3.0)
    # pairing asked for arms of different repeats: judged unpaired (scipy's two-sample t)
    short = _interval(_arm("cur", CUR), _arm("ref", REF[:3]), confidence=0.95, paired=True)
    unpaired = sps.ttest_ind(np.log(CUR), np.log(REF[:3])).confidence_interval(0.95)
    assert (short.method, short.df) == ("repeats", 5.0)
    assert (short.low, short.high) == pytest.approx((math.exp(unpaired.low),
                                                     math.exp(unpaired.high)))
    # as many repeats but not the same ones (ids 1-4 vs 0-3): unpaired as well
    other = Arm("ref", [1, 2, 3, 4], {"output_throughput": REF})
    moved = _interval(_arm("cur", CUR), other, confidence=0.95, paired=True)
    assert (moved.method, moved.df) == ("repeats", 6.0)


def test_a_strong_prior_makes_the_assumed_cv_the_spread() -> None:
    """With the assumed run-to-run CV worth (almost) infinite degrees of freedom and no
    within-run noise, the se is that CV over the two arms' repeats, whatever the repeats' own
    spread."""
    strong = JudgeConfig(run_to_run_cv=0.05, run_to_run_cv_dof=1e12)
    got = arms.compare_arms(_known_within(CUR, 0.0), _known_within(REF, 0.0), config=strong,
                            paired=False)
    assert float(got.se[0]) == pytest.approx(0.05 * math.sqrt(1 / 4 + 1 / 4), rel=1e-6)
    paired = arms.compare_arms(_known_within(CUR, 0.0), _known_within(REF, 0.0), config=strong,
                               paired=True)
    assert paired.method == "repeats-paired"
    assert float(paired.se[0]) == pytest.approx(0.05 * math.sqrt(2 / 4), rel=1e-6)
    # worth no degrees of freedom, the assumption changes nothing: scipy's two-sample t
    no_weight = _interval(_arm("cur", CUR, [90.0, 100.0, 110.0]),
                          _arm("ref", REF, [85.0, 95.0, 105.0]), "mean_ttft_ms",
                          run_to_run_cv=0.5, run_to_run_cv_dof=0)
    res = sps.ttest_ind(np.log(CUR), np.log(REF))
    assert no_weight.se == pytest.approx((np.log(CUR).mean() - np.log(REF).mean())
                                         / res.statistic)


def test_within_run_variance_is_not_run_to_run() -> None:
    # one repeat's within-run variance: pooled se^2 x its 4 repeats = 0.005 x 4 = 0.02
    se_within = math.sqrt(0.02 / 4)
    strong = JudgeConfig(run_to_run_cv=0.0, run_to_run_cv_dof=1e12)
    all_within = arms.compare_arms(_known_within(CUR, se_within), _known_within(REF, se_within),
                                   config=strong, paired=False)
    assert float(all_within.se[0]) == pytest.approx(math.sqrt(0.02 * 0.5), rel=1e-6)
    assert float(all_within.run_var[0]) == pytest.approx(0.0, abs=1e-12)
    se_within = math.sqrt(0.01 / 4)                             # 0.01 within, 0.1^2 run-to-run
    half = arms.compare_arms(_known_within(CUR, se_within), _known_within(REF, se_within),
                             config=JudgeConfig(run_to_run_cv=0.1, run_to_run_cv_dof=1e12),
                             paired=False)
    assert float(half.run_var[0]) == pytest.approx(float(half.se[0]) ** 2 / 2, rel=1e-6)


@pytest.mark.parametrize(("values", "error", "words"), [
    ([], arms.NotJudgeable, "output_throughput missing from {bad}"),
    ([1.0, math.nan], arms.NotJudgeable,
     "output_throughput (current/reference): no standard error from these samples"),
    pytest.param([1.0, math.inf], arms.NotJudgeable,   # (inf - inf in the spread: numpy warns)
                 "output_throughput (current/reference): no standard error from these samples",
                 marks=pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")),
    ([1.0, 0.0], ValueError,
     "output_throughput (current/reference): values must be positive for a ratio"),
    ([1.0, -2.0], ValueError,
     "output_throughput (current/reference): values must be positive for a ratio"),
])
def test_bad_repeats_are_named(values: list[float], error: type[Exception], words: str) -> None:
    with pytest.raises(error) as info:
        _interval(_arm("current", values), _arm("reference", REF))
    assert str(info.value) == words.format(bad="current")
    with pytest.raises(error) as info:
        _interval(_arm("current", REF), _arm("reference", values))
    assert str(info.value) == words.format(bad="reference")


def test_values_just_above_zero_and_one_are_fine() -> None:
    got = _interval(_arm("cur", [0.5, 0.6]), _arm("ref", [1.0, 1.2]))
    assert got.estimate == pytest.approx(0.5)
    ints = arms.Arm("cur", [0, 1], {"output_throughput": [1, 2]})               # ints
    assert _interval(ints, arms.Arm("ref", [0, 1], {"output_throughput": [3, 4]})).n_current == 2


def test_request_ratio_of_means_by_delta_method() -> None:
    rng = np.random.default_rng(3)
    cur, ref = rng.gamma(20, 5.5, 200), rng.gamma(20, 5.0, 300)
    # one repeat each and no assumed CV: no run-to-run term at all
    got = _interval(_arm("cur", [110.0], list(cur)), _arm("ref", [100.0], list(ref)),
                    "mean_ttft_ms", run_to_run_cv=0.0)
    assert got.estimate == pytest.approx(cur.mean() / ref.mean())
    se = math.sqrt((sps.sem(cur) / cur.mean()) ** 2 + (sps.sem(ref) / ref.mean()) ** 2)
    assert got.se == pytest.approx(se)
    assert (got.method, got.n_current, got.n_reference, got.n_repeats) == ("requests", 200, 300,
                                                                           1)
    assert got.run_var == 0.0 and 200 < got.df < 500
    # two repeats each (below the 3 the repeats' t needs), identical within each arm: the
    # run-to-run variance is the assumed 0.1^2 worth 6 dof pooled with a spread of 0 on 2 dof
    with_runs = _interval(_arm("cur", [110.0, 110.0], list(cur)),
                          _arm("ref", [100.0, 100.0], list(ref)), "mean_ttft_ms",
                          run_to_run_cv=0.1, run_to_run_cv_dof=6,
                          min_repeats_for_repeat_bootstrap=3)
    run = (6 * 0.1 ** 2 + 0.0) / (2 + 6) * (1 / 2 + 1 / 2)
    assert with_runs.se == pytest.approx(math.sqrt(se ** 2 + run), rel=1e-9)
    assert with_runs.run_var == pytest.approx(run) and with_runs.n_repeats == 2
    assert with_runs.method == "requests+run-spread+assumed-run-cv"
    assert with_runs.df < got.df


def test_request_ratio_needs_positive_statistics() -> None:
    with pytest.raises(ValueError, match="statistic is not positive; a ratio is meaningless"):
        _interval(_arm("cur", [1.0], [0.0, 0.0, 0.0]), _arm("ref", [1.0], [1.0, 2.0, 3.0]),
                  "median_ttft_ms")
    with pytest.raises(ValueError, match="statistic is not positive"):
        _interval(_arm("cur", [1.0], [1.0, 2.0, 3.0]), _arm("ref", [1.0], [0.0, 0.0, 0.0]),
                  "median_ttft_ms")


def test_paired_accuracy_difference_by_hand() -> None:
    # 20 pairs, 3 a-only, 1 b-only: difference 0.1, Agresti-Min se 0.0997744
    got = stats.paired_difference(12, 3, 1, 4, confidence=0.95)
    assert got.estimate == pytest.approx(0.1)
    assert got.se == pytest.approx(0.0997744, abs=1e-6)
    assert (got.scale, got.n_current, got.n_reference) == ("difference", 20, 20)
    assert got.method == "paired (Agresti-Min)"
    assert (got.low, got.high) == pytest.approx((0.0909091 - 1.959964 * 0.0997744,
                                                 0.0909091 + 1.959964 * 0.0997744), abs=1e-5)
    assert stats.paired_difference(12, 3, 1, 4, 0.9, method="vs baseline").method == \
        "vs baseline"


def test_request_statistic_only_for_registered_per_request_metrics() -> None:
    key, func = stats.request_statistic("p99_ttft_ms")
    assert key == "ttft_ms" and float(func(np.arange(101.0)[None, :])[0]) == 99.0
    assert stats.request_statistic("output_throughput") is None     # summary only
    assert stats.request_statistic("mean_itl_ms") is None           # no per-request samples
    assert stats.request_statistic("not_a_metric") is None


def test_samples_factor_on_the_difference_scale() -> None:
    interval = stats.Interval(0.05, 0.0, 0.1, 0.9, "paired", 50, 50, scale="difference",
                              se=0.03, df=math.inf)
    assert interval.samples_factor(0.02) == pytest.approx(
        interval.guidance([0.02]).repeats_factor)
    assert interval.samples_factor(0.02) != pytest.approx(
        interval.guidance([1.02]).repeats_factor)
