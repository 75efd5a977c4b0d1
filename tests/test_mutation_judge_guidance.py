"""What would decide an undecided check (servegate.judge.stats.guidance), against numbers worked
out by hand: distance d from the log estimate to the nearest boundary, the deciding standard
error d / z (z = 1.959964 at 95 %, df infinite), the repeats factor (se / (d / z))^2, and the
prompts factor within / ((d / z)^2 - run_var) (issue 15)."""

from __future__ import annotations

import math

import pytest

from servegate.judge.stats import Interval, guidance


def _ratio(estimate: float, se: float, **kw: object) -> Interval:
    base: dict[str, object] = dict(n_repeats=1)
    base.update(kw)
    return Interval(estimate, estimate * 0.8, estimate * 1.2, 0.95, "requests", 24, 24, se=se,
                    **base)  # type: ignore[arg-type]


def test_decided_when_the_interval_clears_the_boundary() -> None:
    # d = ln(1.3 / 1.1) = 0.16705 > 1.96 * 0.05
    got = guidance(_ratio(1.3, 0.05), (1.1,))
    assert (got.decided, got.repeats_factor, got.prompts_factor, got.text) == (
        True, 1.0, 1.0, "decided")


def test_more_prompts_or_repeats_when_within_run_noise_dominates() -> None:
    # d = ln(1.2 / 1.1) = 0.0870114, target se 0.0443944, factor (0.1 / 0.0443944)^2 = 5.0739;
    # within = 0.01 - 0.001 = 0.009, prompts 0.009 / (0.0443944^2 - 0.001) = 9.2701
    got = guidance(_ratio(1.2, 0.1, run_var=0.001), (1.1,))
    assert not got.decided
    assert got.repeats_factor == pytest.approx(5.073926, rel=1e-6)
    assert got.prompts_factor == pytest.approx(9.270126, rel=1e-6)
    assert got.text == ("~9.3x the prompts per repeat, or ~6 repeats per arm (x5.1) would "
                        "decide at this estimate")


def test_repeats_scale_with_the_repeats_already_run() -> None:
    # d = ln(1.05 / 1.03) = 0.0192316 to the nearer of (0.95, 1.05); factor 25.9667; 3 repeats
    got = guidance(_ratio(1.03, 0.05, n_repeats=3), (0.95, 1.05))
    assert got.repeats_factor == pytest.approx(25.96666, rel=1e-5)
    assert got.text.endswith("~78 repeats per arm (x26.0) would decide at this estimate")


def test_no_prompts_can_decide_when_run_to_run_variance_alone_is_too_wide() -> None:
    # run_var 0.003 > target^2 0.0019708: +-1.96 * sqrt(0.003) = +-10.7 %
    got = guidance(_ratio(1.2, 0.1, run_var=0.003), (1.1,))
    assert got.prompts_factor is None
    assert got.text == ("no amount of prompts can decide (run-to-run variance alone is +-10.7% "
                        "at this level); ~6 repeats per arm (x5.1) would decide at this "
                        "estimate")
    all_run = guidance(_ratio(1.2, 0.1, run_var=0.01), (1.1,))   # within-run part is 0
    assert all_run.prompts_factor is None and all_run.text.startswith("no amount of prompts")


def test_a_difference_needs_questions() -> None:
    # d = 0.01, target 0.0051021, factor (0.02 / 0.0051021)^2 = 15.3658, x500 questions = 7683
    iv = Interval(-0.01, -0.05, 0.03, 0.95, "paired", 500, 500, scale="difference", se=0.02)
    got = guidance(iv, (-0.02,))
    assert got.repeats_factor == pytest.approx(15.365835, rel=1e-6)
    assert got.prompts_factor == got.repeats_factor
    assert got.text == "~7683 questions (x15.4) would decide at this estimate"


def test_an_estimate_on_the_boundary_cannot_be_decided() -> None:
    got = guidance(_ratio(1.1, 0.05), (1.1,))
    assert (got.decided, got.repeats_factor, got.prompts_factor) == (False, math.inf, None)
    assert got.text == "the estimate sits on the decision boundary: no sample size decides"


@pytest.mark.parametrize(("interval", "bounds"), [
    (Interval(1.2, 0.0, 1.5, 0.95, "m", 3, 3), (1.1,)),          # no se, low 0: infinite se
    (_ratio(0.0, 0.1), (1.1,)),                                   # a ratio of 0: no log
    (_ratio(1.2, 0.1), (0.0, -1.0)),                              # no positive ratio boundary
    (_ratio(1.2, 0.1), ()),
])
def test_nothing_to_extrapolate(interval: Interval, bounds: tuple[float, ...]) -> None:
    got = guidance(interval, bounds)
    assert (got.decided, got.repeats_factor, got.prompts_factor, got.text) == (
        False, math.inf, None, "no standard error: nothing to extrapolate")


def test_a_difference_accepts_non_positive_boundaries() -> None:
    iv = Interval(0.05, 0.0, 0.1, 0.95, "paired", 500, 500, scale="difference", se=0.01)
    assert guidance(iv, (0.0,)).decided                 # d 0.05 > 1.96 * 0.01
    assert not guidance(iv, (0.04,)).decided
