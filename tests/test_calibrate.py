"""``servegate calibrate``: the JSON contract, and that its vectorised nights decide exactly as
the judge does for one night (few nights here; the >= 1000-night table is in docs/judge.md)."""

from __future__ import annotations

from repo_files import LEGACY_SUITES

import json
from pathlib import Path

import numpy as np
import pytest

from servegate.config.judge import JudgeConfig
from servegate.judge import calibrate as cal
from servegate.judge.arms import Arm, ratio_interval
from servegate.judge.stats import classify, log_bounds, verdict

KEYS = {"suite", "repeats", "run_cv", "nights", "checks", "aa_false_alarm",
        "aa_false_alarm_ci", "noop_false_failure", "power"}
# suites/nightly.toml before [design] (three repeats: a server start per mode and repeat), the
# design the legacy simulation (design_for, calibrate) is for
LEGACY_NIGHTLY = str(LEGACY_SUITES
                     / "nightly.toml")


def test_json_contract_and_seeded(capsys):
    args = ["--json", "--suite", LEGACY_NIGHTLY, "--run-cv", "0.02", "--nights", "60",
            "--seed", "7"]
    assert cal.main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    [row] = doc["designs"]
    assert set(row) >= KEYS
    assert set(row["power"]) == {"0.05", "0.10"}
    assert (row["suite"], row["repeats"], row["run_cv"], row["nights"]) == (
        LEGACY_NIGHTLY, 3, 0.02, 60)
    low, high = row["aa_false_alarm_ci"]
    assert low <= row["aa_false_alarm"] <= high
    assert row["checks"] > 60                        # baseline checks + no-op claims + accuracy
    assert cal.main(args) == 0
    again = json.loads(capsys.readouterr().out)["designs"][0]
    assert again == row                              # seeded: the same nights again


def test_power_grows_with_the_slowdown_and_aa_stays_quiet():
    row = cal.calibrate(cal.design_for(LEGACY_NIGHTLY), 0.02, nights=120, seed=3)
    assert row["repeats"] == 3
    curve = [row["power_curve"][k] for k in sorted(row["power_curve"], key=float)]
    assert curve == sorted(curve) and curve[-1] > 0.95
    assert row["aa_false_alarm"] <= 0.05


def test_bad_input_exits_2(capsys):
    assert cal.main(["--suite", "no-such-suite", "--nights", "5"]) == 2
    assert cal.main(["--nights", "0"]) == 2


@pytest.mark.parametrize(("repeats", "metric"), [(1, "mean_ttft_ms"), (3, "median_tpot_ms"),
                                                 (3, "output_throughput")])
def test_vectorised_nights_decide_like_the_judge(repeats, metric):
    """The harness's batch decision equals ratio_interval + verdict on each night alone."""
    config = JudgeConfig(run_to_run_cv=0.03, run_to_run_cv_dof=10)
    design = cal.Design("x", repeats, (4,), (40,), 64, 0, config, "mi300x")
    rng = np.random.default_rng(11)
    cur = cal._draw(rng, design, 12, 0.03)[("off", 4)]
    ref = cal._draw(rng, design, 12, 0.03)[("off", 4)]
    cur = (cur[0] * 1.04, cur[1] * 1.04)             # something to decide
    a, b = cal._arm(*cur, metric, design, 4), cal._arm(*ref, metric, design, 4)
    theta, se, df = cal._codes_ratio(a, b, config, False)
    low, high = log_bounds(theta, se, df, 0.99)
    codes = classify(np.expm1(low), np.expm1(high), 0.02, "lower" if "ms" in metric else "higher")
    quantity = {"mean_ttft_ms": 0, "median_tpot_ms": 1}.get(metric)
    for night in range(12):
        def arm(data, label, night=night):
            requests = {} if quantity is None else {
                ("ttft_ms", "tpot_ms")[quantity]: list(data[quantity][night].ravel())}
            values = cal._arm(data[0][night:night + 1], data[1][night:night + 1], metric,
                              design, 4).values[0]
            return Arm(label, list(range(repeats)), {metric: list(values)}, requests)
        iv = ratio_interval(arm(cur, "run"), arm(ref, "base"), metric, config=config,
                            confidence=0.99, key="k")
        expected = verdict(iv, "lower" if "ms" in metric else "higher", 0.02)
        assert expected == {0: "pass", 1: "regression", 2: "improvement", 3: "inconclusive"}[
            int(codes[night])], night
