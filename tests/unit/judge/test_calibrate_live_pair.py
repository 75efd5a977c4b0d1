"""servegate calibrate: the head-vs-base live-pair design (issue: A/A false alarm <= 1 % per run
at the suites' stated noise, and the slowdown it catches)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servegate.config import load_suite, suite_path
from servegate.judge import calibrate
from servegate.judge.calibrate_blocks import Noise, live_pair_calibration

REPO = Path(__file__).resolve().parents[3]
AB_CPU = REPO / "tests" / "data" / "suites" / "ab-cpu.toml"


@pytest.mark.parametrize("suite_name", ["premerge", "nightly"])
def test_gpu_suites_live_pair_aa_stays_under_one_percent_at_their_prior(
        suite_name: str) -> None:
    suite = load_suite(suite_path(suite_name))
    design = suite.effective_design
    pair = live_pair_calibration(suite.judge, design.starts, design.blocks, 2,
                                 Noise(suite.judge.run_to_run_cv, 0.01, 0.0), nights=600,
                                 seed=7)
    assert pair["aa_false_alarm_ci"][1] <= 0.025 and pair["aa_false_alarm"] <= 0.01, pair
    assert pair["server_starts"] == 2 * design.starts
    curve = [pair["power_curve"][k] for k in sorted(pair["power_curve"], key=float)]
    assert curve == sorted(curve) and curve[-1] >= 0.99          # power grows with the effect
    assert pair["slowdown_80"] is not None and pair["slowdown_80"] <= 0.3


def test_a_true_start_spread_beyond_the_prior_raises_false_alarms() -> None:
    suite = load_suite(suite_path("premerge"))
    stated = live_pair_calibration(suite.judge, 1, 4, 2, Noise(0.02, 0.01, 0.0), nights=600,
                                   seed=7)
    worse = live_pair_calibration(suite.judge, 1, 4, 2, Noise(0.10, 0.01, 0.0), nights=600,
                                  seed=7)
    assert worse["aa_false_alarm"] > stated["aa_false_alarm"] + 0.05


def test_calibrate_json_reports_head_vs_base_for_every_in_server_row(
        capsys: pytest.CaptureFixture[str]) -> None:
    code = calibrate.main(["--json", "--suite", "cpu", "--suite", str(AB_CPU), "--run-cv",
                           "0.07", "--nights", "300"])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)["designs"]
    assert [r["suite"] for r in rows] == ["cpu", str(AB_CPU)]
    for row in rows:
        pair = row["head_vs_base"]
        assert pair["design"] == "live-pair" and pair["aa_false_alarm"] <= 0.01
    ab = rows[1]                                 # gated only head vs base: the pair's row
    assert ab["design"] == "live-pair" and ab["noop_false_failure"] is None
    assert ab["family_size"] == 2 and ab["server_starts"] == 2
    assert ab["slowdown_80"] == ab["head_vs_base"]["slowdown_80"]
