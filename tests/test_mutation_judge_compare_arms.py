"""The judge's one rule for a ratio check (servegate.judge.arms.compare_arms) on hand-built arm
statistics: input refusals, the request-level path with a measured run-to-run spread (sums of
squares, degrees of freedom, method names) against arithmetic written out here, and simulated
nights on a leading axis deciding exactly as each night alone (issue 15)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from servegate.config.judge import JudgeConfig
from servegate.judge.arms import Arm, ArmStats, NotJudgeable, arm_from_baseline, arm_stats
from servegate.judge.arms import compare_arms as compare

CFG = JudgeConfig(run_to_run_cv=0.0, min_repeats_for_repeat_bootstrap=3)


def _arm(values: list[float], pooled: float | None = 100.0, se: float | None = 0.02,
         n: int = 50) -> ArmStats:
    return ArmStats(np.array([values]), None if pooled is None else np.array([pooled]),
                    None if se is None else np.array([se]), n)


@pytest.mark.parametrize(("cur", "ref"), [([0.0, 1.0], [1.0, 1.0]), ([1.0, 1.0], [1.0, 0.0]),
                                          ([-1.0, 1.0], [1.0, 1.0]), ([1.0, 1.0], [1.0, -1.0])])
def test_non_positive_repeat_values_are_refused(cur: list[float], ref: list[float]) -> None:
    with pytest.raises(ValueError) as info:
        compare(_arm(cur), _arm(ref), config=CFG, paired=False, what="mean_ttft_ms (a/b)")
    assert str(info.value) == "mean_ttft_ms (a/b): values must be positive for a ratio"


def test_values_below_one_are_fine() -> None:
    comp = compare(_arm([0.5, 0.6], 0.5), _arm([0.4, 0.3], 0.4), config=CFG, paired=False)
    assert float(comp.theta[0]) == pytest.approx(math.log(0.5 / 0.4))


@pytest.mark.parametrize(("cur", "ref"), [(0.0, 1.0), (1.0, 0.0), (-1.0, 1.0)])
def test_non_positive_statistics_are_refused(cur: float, ref: float) -> None:
    with pytest.raises(ValueError) as info:
        compare(_arm([1.0], cur), _arm([1.0], ref), config=CFG, paired=False, what="m")
    assert str(info.value) == "m: statistic is not positive; a ratio is meaningless"


def test_requests_path_with_a_measured_spread_by_hand() -> None:
    # 2 repeats vs 1 (below the 3 the repeat test needs): the requests' statistic plus the
    # repeats' spread, dof (2 - 1) + (1 - 1) = 1, pooled with the assumed CV (10 dof)
    cur, ref = _arm([100.0, 110.0], 105.0, 0.02, 40), _arm([90.0], 92.0, 0.03, 30)
    config = JudgeConfig(run_to_run_cv=0.05, run_to_run_cv_dof=10.0,
                         min_repeats_for_repeat_bootstrap=3)
    comp = compare(cur, ref, config=config, paired=False)
    sum_sq = 2 * (math.log(110 / 100) / 2) ** 2
    run_var = (10 * 0.0025 + sum_sq) / 11
    run = run_var * (1 / 2 + 1 / 1)
    total = 0.02 ** 2 + 0.03 ** 2 + run
    assert comp.method == "requests+run-spread+assumed-run-cv"
    assert float(comp.theta[0]) == pytest.approx(math.log(105 / 92))
    assert float(comp.se[0]) == pytest.approx(math.sqrt(total))
    assert float(comp.run_var[0]) == pytest.approx(run)
    df = total ** 2 / (0.02 ** 4 / 39 + 0.03 ** 4 / 29 + run ** 2 / 11)
    assert float(comp.df[0]) == pytest.approx(df)
    assert (comp.n_current, comp.n_reference, comp.n_repeats) == (40, 30, 2)


def test_requests_path_measures_the_spread_of_both_arms() -> None:
    config = JudgeConfig(run_to_run_cv=0.0, run_to_run_cv_dof=0.0,
                         min_repeats_for_repeat_bootstrap=3)
    comp = compare(_arm([100.0], 100.0, 0.02), _arm([90.0, 99.0], 95.0, 0.02), config=config,
                   paired=False)
    run_var = 2 * (math.log(99 / 90) / 2) ** 2 / 1            # reference's spread, 1 dof
    assert comp.method == "requests+run-spread"
    assert float(comp.run_var[0]) == pytest.approx(run_var * (1 + 1 / 2))


def test_requests_path_without_any_run_variance() -> None:
    comp = compare(_arm([100.0], 100.0, 0.02, 40), _arm([90.0], 90.0, 0.03, 30), config=CFG,
                   paired=False)
    assert comp.method == "requests"
    assert float(comp.se[0]) == pytest.approx(math.sqrt(0.0004 + 0.0009))
    assert float(comp.run_var[0]) == 0.0
    assert float(comp.df[0]) == pytest.approx(0.0013 ** 2 / (0.0004 ** 2 / 39 + 0.0009 ** 2 /
                                                             29))


def test_an_assumption_alone_is_named() -> None:
    config = JudgeConfig(run_to_run_cv=0.05, min_repeats_for_repeat_bootstrap=3)
    comp = compare(_arm([100.0]), _arm([90.0]), config=config, paired=False)
    assert comp.method == "requests+assumed-run-cv"


def test_nights_on_a_leading_axis_decide_as_each_night_alone() -> None:
    rng = np.random.default_rng(4)
    values = rng.lognormal(4.6, 0.05, (3, 2)), rng.lognormal(4.6, 0.05, (3, 2))
    pooled = rng.lognormal(4.6, 0.01, 3), rng.lognormal(4.6, 0.01, 3)
    ses = np.array([0.01, 0.02, 0.03]), np.array([0.02, 0.01, 0.04])
    config = JudgeConfig(run_to_run_cv=0.03, min_repeats_for_repeat_bootstrap=3)
    batch = compare(ArmStats(values[0], pooled[0], ses[0], 50),
                    ArmStats(values[1], pooled[1], ses[1], 50), config=config, paired=False)
    for night in range(3):
        one = compare(ArmStats(values[0][night:night + 1], pooled[0][night:night + 1],
                               ses[0][night:night + 1], 50),
                      ArmStats(values[1][night:night + 1], pooled[1][night:night + 1],
                               ses[1][night:night + 1], 50), config=config, paired=False)
        for field in ("theta", "se", "df", "run_var"):
            assert float(getattr(batch, field)[night]) == pytest.approx(
                float(getattr(one, field)[0])), (field, night)


def test_missing_statistics_are_not_judgeable_with_the_reason() -> None:
    with pytest.raises(NotJudgeable) as info:
        compare(_arm([1.0], None, None, 1), _arm([1.0]), config=CFG, paired=False, what="m")
    assert str(info.value) == ("m: 1/1 repeats and 1/50 per-request samples; needs >= 3 "
                               "repeats or >= 2 requests per arm")
    with pytest.raises(NotJudgeable) as info:
        compare(_arm([1.0], None, None, 0), _arm([1.0], None, None, 0), config=CFG,
                paired=False, what="m")
    assert str(info.value) == ("m has no per-request samples and only 1/1 repeats; needs >= 3 "
                               "repeats per arm")
    with pytest.raises(NotJudgeable):
        compare(_arm([1.0], 1.0, None, 5), _arm([1.0], 1.0, 0.1, 5), config=CFG, paired=False)
    with pytest.raises(NotJudgeable):
        compare(_arm([1.0], 1.0, 0.1, 5), _arm([1.0], 1.0, None, 5), config=CFG, paired=False)


def test_arm_stats_of_a_real_arm() -> None:
    arm = Arm("a", [0, 1], {"mean_ttft_ms": [1.0, 2.0]}, {"ttft_ms": [1.0, 2.0, 3.0]})
    stats = arm_stats(arm, "mean_ttft_ms", 0)
    assert stats.values.tolist() == [[1.0, 2.0]] and stats.values.dtype == float
    assert float(stats.pooled[0]) == 2.0 and stats.n_requests == 3
    assert float(stats.pooled_se[0]) == pytest.approx(np.std([1, 2, 3], ddof=1) / math.sqrt(3)
                                                      / 2)
    two = arm_stats(Arm("a", [0], {"mean_ttft_ms": [1.0]}, {"ttft_ms": [1.0, 3.0]}),
                    "mean_ttft_ms", 0)
    assert two.n_requests == 2 and two.pooled is not None
    one = arm_stats(Arm("a", [0], {"mean_ttft_ms": [1.0]}, {"ttft_ms": [1.0]}), "mean_ttft_ms",
                    0)
    assert (one.pooled, one.n_requests) == (None, 1)
    summary = arm_stats(Arm("a", [0], {"output_throughput": [5.0]}), "output_throughput", 0)
    assert summary.pooled is None and summary.values.tolist() == [[5.0]]
    assert arm_stats(Arm("a"), "mean_ttft_ms", 0).values.shape == (1, 0)


def test_arm_from_a_baseline_point() -> None:
    point = {"repeats": [0, 1], "metrics": {"m": {"repeats": [1, 2]}},
             "requests": {"ttft_ms": [1, 2], "tpot_ms": [], "x": "bad"}}
    arm = arm_from_baseline(point)
    assert (arm.label, arm.repeat_ids, arm.metrics, arm.requests) == (
        "baseline", [0, 1], {"m": [1.0, 2.0]}, {"ttft_ms": [1.0, 2.0]})
    assert arm_from_baseline({}).metrics == {}
    assert arm.values("m") == [1.0, 2.0] and arm.values("none") == []
