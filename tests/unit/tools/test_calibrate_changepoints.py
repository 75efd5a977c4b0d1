"""``tools/calibrate_changepoints.py``: the change-point detector's detection and false-alarm
rates on synthetic nights (the calibration target, on seeds it was not tuned on)."""

from __future__ import annotations

from calibrate_changepoints import Scenario, measure, ruptures_detector


def test_detection_and_false_alarm_rates_over_seeds() -> None:
    """The calibration target: 40 nights, 2 % noise, 8 % step at 20 vs a flat series."""
    detector = ruptures_detector()
    seeds = range(1000, 1060)            # not the seeds the penalty was calibrated on
    step = measure(detector, Scenario("step", step=0.08), seeds)
    flat = measure(detector, Scenario("flat"), seeds)
    assert step.exact_one_near >= 0.93
    assert flat.false_alarm <= 0.05
