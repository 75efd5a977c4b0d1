"""servegate.history.sustained (the CUSUM over nights) and its calibration
(servegate.calibration.sustained), seeded."""

from __future__ import annotations

import math

import numpy as np
import pytest

from servegate import calibration as cb
from servegate.calibration.sustained import (
    one_night_against_history,
    sustained_calibration,
    sustained_world,
)
from servegate.config import load_suite, suite_path
from servegate.history.sustained import (
    GUARD,
    NIGHT_LEVEL,
    cusum,
    night_spread,
    night_value,
    siegmund_arl0,
    threshold,
)


def test_threshold_inverts_siegmunds_run_length() -> None:
    for k in (0.25, 0.5, 1.0, 2.0):
        h = threshold(k, 1000.0)
        assert siegmund_arl0(k, h) == pytest.approx(1000.0, rel=1e-6)
    assert threshold(0.5, 1000.0) > threshold(1.0, 1000.0)       # a larger allowance, less h
    with pytest.raises(ValueError, match="k > 0 and arl0 > 1"):
        threshold(0.0)


def test_cusum_by_hand_on_a_fixed_reference() -> None:
    """Reference 0, +-0.01: z = value / (sd sqrt(1 + 1/5)) (the level's own error);
    k = ln(1.03)/2/sd."""
    reference = np.array([-0.01, 0.01, -0.01, 0.01, 0.0])
    sd = float(np.std(reference, ddof=1))
    k = math.log1p(0.03) / 2 / sd
    h = threshold(k, 100.0)
    monitored = np.array([0.0, 3 * sd, 3 * sd, 3 * sd, -5 * sd])
    flags = cusum(reference, monitored, arl0=100.0, self_starting=False)
    total, first, hits = 0.0, -1, []
    for night, value in enumerate(monitored / sd / math.sqrt(1.2)):
        total = max(0.0, total + value - k)
        hits.append(total > h)                  # an alarm restarts the sum
        if total > h:
            first = night if first < 0 else first
            total = 0.0
    assert int(flags.first) == first >= 1 and float(flags.k) == pytest.approx(k)
    assert flags.hits.tolist() == hits and sum(hits) >= 1      # the nights it alarmed
    assert int(flags.alarms) == int(flags.hits.sum())
    faster = -monitored[:-1]                  # the same nights, faster: not worse
    assert int(cusum(reference, faster, arl0=100.0, self_starting=False).first) == -1
    assert int(cusum(reference, faster, arl0=100.0, worse="lower",
                     self_starting=False).first) == first


def test_self_starting_reference_takes_in_the_nights_so_far() -> None:
    """A level the short reference got wrong is corrected by the nights that follow: the
    fixed reference alarms on a quiet series, the self-starting one does not."""
    reference = np.array([0.0, 0.01, -0.01, 0.0, 0.01, -0.01])
    quiet = np.random.default_rng(0).normal(0.012, 0.008, 60)     # 1.4 sd above, steady
    assert int(cusum(reference, quiet, self_starting=False).alarms) > 0
    assert int(cusum(reference, quiet).alarms) <= int(cusum(reference, quiet,
                                                             self_starting=False).alarms)


def test_bad_input_names_the_problem() -> None:
    with pytest.raises(ValueError, match="at least 3 reference nights"):
        cusum(np.zeros(2), np.zeros(5))
    with pytest.raises(ValueError, match="worse must be 'higher' or 'lower'"):
        cusum(np.zeros(5), np.zeros(5), worse="up")


def test_night_spread_pools_the_starts_unless_the_nights_refute_them() -> None:
    """By hand: 14 nights of spread s^2 (13 dof) and each night's starts measuring s^2 with 2
    dof pool to s^2 with 41 dof; nights 3x as spread as their starts predict refute them at
    NIGHT_LEVEL, and the nights' spread alone (13 dof) is used; no within input: the nights
    alone."""
    values = np.random.default_rng(3).normal(0.0, 1.0, 14)
    between = float(np.var(values, ddof=1))
    var, dof, widened, p = night_spread(values, np.full(14, between), np.full(14, 2.0))
    assert float(var) == pytest.approx(between) and float(dof) == 41.0
    assert not bool(widened) and float(p) == pytest.approx(0.5, abs=0.1)
    var, dof, widened, p = night_spread(values, np.full(14, between / 3), np.full(14, 2.0))
    assert bool(widened) and float(p) < NIGHT_LEVEL
    assert float(var) == pytest.approx(between) and float(dof) == 13.0
    # nights not measured (one start: NaN, 0 dof) are left out of the within part
    var, dof, _, _ = night_spread(values, np.r_[np.full(10, between), np.full(4, np.nan)],
                                  np.r_[np.full(10, 2.0), np.zeros(4)])
    assert float(dof) == 33.0
    var, dof, widened, p = night_spread(values)
    assert float(var) == pytest.approx(between) and float(dof) == 13 and np.isnan(p)


def test_a_nights_error_comes_from_its_starts() -> None:
    """3 starts x 4 blocks: the night's squared standard error is about the start variance
    over 3 (20 000 simulated nights: within 5 %) with about 2 dof; one start measures none."""
    rng = np.random.default_rng(8)
    logs = rng.normal(0.0, 0.02, (20000, 3, 1)) + rng.normal(0.0, 0.005, (20000, 3, 4))
    found = night_value(logs)
    assert float(np.mean(found.var)) == pytest.approx(np.var(found.value), rel=0.05)
    assert float(np.mean(found.var)) == pytest.approx(0.02 ** 2 / 3, rel=0.05)
    assert 2.0 <= float(np.median(found.dof)) < 3.0
    one = night_value(logs[:5, :1])
    assert np.isnan(one.var).all() and (one.dof == 0).all()


def test_a_steps_own_nights_do_not_standardise_it() -> None:
    """The guard band: the GUARD most recent nights stay out of the level and spread a night
    is standardised by, so a step's first nights see the reference alone (as a fixed
    reference does) instead of pulling the level towards themselves and widening the spread."""
    assert GUARD == 3
    reference = np.random.default_rng(4).normal(0.0, 0.01, 14)
    sd = float(np.std(reference, ddof=1))
    step = np.full(3, reference.mean() + 2.25 * sd)          # at ARL0 700: 3 nights' worth
    guarded = cusum(reference, step)
    fixed = cusum(reference, step, self_starting=False)
    unguarded = cusum(reference, step, guard=0)
    assert int(guarded.first) == int(fixed.first) == 2
    assert int(unguarded.first) == -1                        # the step diluted itself


def test_calibrated_false_alarms_and_detection_on_the_gfx95_nightly() -> None:
    """Issue 33's acceptance on the shipped nightly (3 starts x 4 blocks, 4 gated aggregates):
    14 reference nights, a quarter monitored, run CV 2 %, the prior interaction: at most one
    false alarm per runner-quarter and a sustained 3 % slowdown of one mode's TTFT flagged
    within 3 nights on at least 80 % of histories; in the world with a 1 % night-level factor
    the F test widens a quarter or more of the series at the reference and the false alarms
    stay well under what the rule without the test raises there (1.38 against 2.97)."""
    design = cb.block_design(load_suite(suite_path("nightly")), "mi355x")
    # 400 histories (seeded, deterministic): 0.72 false alarms a quarter, 3 % within 3 nights
    # on 82 % (seed 7: 0.78, 84.5 %); 400 histories' own sampling error is ~0.07 and ~0.02
    out = sustained_calibration(design, cb.Noise(0.02, 0.01, 0.003), histories=400,
                                seed=20261130)
    assert out["series"] == 4 and out["reference_nights"] == 14
    assert out["false_alarms_per_quarter"] <= 1.0
    # the runner's series move together: nights with any alarm are fewer than alarms
    assert 0 < out["false_alarm_nights_per_quarter"] < out["false_alarms_per_quarter"]
    assert out["0.03"]["flagged_within_3_nights"] >= 0.8
    assert out["0.05"]["flagged_within_3_nights"] >= 0.95
    assert out["reference_widened"] <= 2 * NIGHT_LEVEL          # the test's level, nearly
    night = out["night_level"]
    assert night["night_cv"] == 0.01 and night["reference_widened"] > 0.25
    trusting = sustained_world(design, cb.Noise(0.02, 0.01, 0.003, night_cv=0.01),
                               histories=200, seed=20261130, stated_level=None)
    assert trusting["false_alarms_per_quarter"] > 1.5 * night["false_alarms_per_quarter"]


def test_one_night_against_fourteen_nights_of_history_catches_an_eight_percent_slowdown() -> None:
    """compare --baseline history:14 on the gfx95 nightly at run CV 2 %: one mode's TTFT 8 %
    slower is a gated regression on >= 80 % of nights; A/A stays under 1 %."""
    design = cb.block_design(load_suite(suite_path("nightly")), "mi355x")
    out = one_night_against_history(design, cb.Noise(0.02, 0.01, 0.003), nights=300,
                                    seed=20261130)
    assert out["power_curve"]["0.08"] >= 0.8 and out["one_night_mde"] <= 0.08
    assert out["aa_false_alarm"] <= 0.01
    curve = list(out["power_curve"].values())
    assert curve == sorted(curve) and curve[0] < 0.3
