"""servegate.calibration.history: the claim's interval honesty on a runner's first night (the
suite's typed priors) and with 14 nights of learned history, seeded: the issue-33 acceptance
figures (docs/judge.md, "Priors learned from the nights")."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import pytest

from servegate import calibration as cb
from servegate.calibration.history import claim_honesty, learn_priors, runner_health
from servegate.commands import calibrate as cal
from servegate.config import load_suite, suite_path

SEED = 20261130
NIGHTS = 600


@pytest.fixture(scope="module")
def design() -> cb.BlockDesign:
    return cb.block_design(load_suite(suite_path("nightly")), "mi355x")


@pytest.fixture(scope="module")
def seven_times_the_prior(design: cb.BlockDesign) -> dict[str, Any]:
    out = claim_honesty(design, cb.Noise(0.02, 0.01, 0.02), nights=NIGHTS, seed=SEED)
    assert out is not None
    return out


def test_with_history_the_claim_is_honest_at_seven_times_the_prior(
        seven_times_the_prior: dict[str, Any], design: cb.BlockDesign) -> None:
    """True interaction 2 % (prior 0.3 %): with 14 nights of history the claim's interval
    covers a true 5.4 % improvement on >= 97 % of nights, refutes a claim exactly at its
    size on <= 5 %, and the A/A family alarms on <= 1 %."""
    history = seven_times_the_prior["with_history"]
    assert history["claim_coverage"]["0.054"] >= 0.97
    assert history["false_refutation_at_claim"] <= 0.05
    assert history["aa_false_alarm"] <= 0.01
    assert 0.0 <= history["claim_power"]["0.054"] < history["claim_power"]["0.095"]
    learned = history["learned"]
    # starts - 1 degrees of freedom a night (the nightly's 4 starts: 3) over 14 nights
    assert learned["learned_dof_median"] == (design.starts - 1) * 14
    assert 0.014 < learned["learned_interaction_sd_median"] < 0.026


def test_a_first_night_on_the_typed_prior_is_not_honest(design: cb.BlockDesign) -> None:
    """What the history fixes: three starts on one half (the nightly before its halves)
    measure the interaction with two dof, so on the first night the typed prior (0.3 %, 4 dof)
    makes intervals too narrow even though the stated-level test widens the nights that
    refute it."""
    one_half = dataclasses.replace(design, starts=3, blocks=4, halves=False)
    seven_times_the_prior = claim_honesty(one_half, cb.Noise(0.02, 0.01, 0.02), nights=NIGHTS,
                                          seed=SEED)
    assert seven_times_the_prior is not None
    first = seven_times_the_prior["first_night"]
    history = seven_times_the_prior["with_history"]
    assert first["claim_coverage"]["0.054"] < 0.9 < history["claim_coverage"]["0.054"]
    assert first["false_refutation_at_claim"] > 2 * history["false_refutation_at_claim"]
    assert 0.3 < first["prior_refuted"]["0.054"] < 0.7          # the test fires, often
    assert history["prior_refuted"]["0.054"] < 0.05
    assert first["interaction_prior"] == {"cv": 0.003, "dof": 4.0,
                                          "source": "[judge] interaction_cv of suite nightly"}
    assert seven_times_the_prior["claimed_improvement"] == 0.04
    assert set(first["claim_coverage"]) == {"0.054", "0.095", "0.04"}


def test_at_the_prior_the_claim_keeps_its_power(design: cb.BlockDesign) -> None:
    out = claim_honesty(design, cb.Noise(0.02, 0.01, 0.003), nights=400, seed=SEED)
    assert out is not None
    for key in ("first_night", "with_history"):
        assert out[key]["claim_power"]["0.054"] >= 0.80, key
        assert out[key]["aa_false_alarm"] <= 0.01


def test_a_design_without_a_claim_has_no_honesty_row() -> None:
    off_gate = cb.block_design(load_suite(suite_path("nightly")), "mi300x")
    assert claim_honesty(off_gate, cb.Noise(0.02, 0.01, 0.003), nights=5, seed=1) is None


def test_one_start_a_night_learns_nothing_and_says_so() -> None:
    """premerge (1 start x 4 blocks): no night measures the interaction, the typed prior
    stays on both sides, and the row is valid JSON (no NaN)."""
    premerge = cb.block_design(load_suite(suite_path("premerge")), "mi355x")
    out = claim_honesty(premerge, cb.Noise(0.02, 0.01, 0.02), nights=40, seed=SEED)
    assert out is not None
    learned = out["with_history"]["learned"]
    assert learned["learned_dof_median"] == 0.0 and learned["learned_interaction_sd_median"] is None
    assert "1 start a night measures no start x mode interaction" in learned["why"]
    json.dumps(out, allow_nan=False)


def test_learned_priors_come_from_the_nights_by_the_historys_estimator(
        design: cb.BlockDesign) -> None:
    """Each check's learned prior: the claim's the on-off interaction (starts - 1 dof a night
    over 14 nights), the baseline aggregates' a start level; a larger world teaches a larger
    figure."""
    checks = cb.family(design)
    rng = np.random.default_rng(3)
    small, _ = learn_priors(rng, design, checks, cb.Noise(0.02, 0.01, 0.005), 300, 14)
    large, summary = learn_priors(rng, design, checks, cb.Noise(0.02, 0.01, 0.05), 300, 14)
    claim = next(c.name for c in checks if c.kind == "claim_ttft")
    assert set(small) == {c.name for c in checks
                          if c.kind not in ("claim_accuracy", "noop_prefill")}
    full = (design.starts - 1) * 14
    assert np.all(small[claim][1] <= full) and np.median(small[claim][1]) == full
    assert np.median(large[claim][0]) > 20 * np.median(small[claim][0])
    assert summary["learned_interaction_sd_median"] == pytest.approx(0.05, rel=0.2)


def test_cli_reports_claim_honesty_and_checks_its_options(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert cal.main(["--json", "--suite", "nightly", "--runner", "gfx95", "--run-cv", "0.02",
                     "--block-cv", "0.01", "--interaction-cv", "0.02", "--nights", "20",
                     "--history-nights", "5"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["designs"]
    assert row["interaction_cv"] == 0.02 and row["claim_honesty"]["history_nights"] == 5
    assert {"first_night", "with_history"} <= set(row["claim_honesty"])
    sustained = row["sustained_shift"]                      # 20 nights: 4 histories
    assert sustained["histories"] == 4 and sustained["reference_nights"] == 5
    assert set(sustained) >= {"false_alarms_per_quarter", "0.03", "0.05"}
    assert row["one_night_vs_history"]["history_nights"] == 5
    for key in ("aa_false_alarm", "claim_power", "claim_false_confirmation", "power"):
        assert key in row                                   # the existing contract stays
    assert cal.main(["--json", "--suite", "nightly", "--runner", "gfx95", "--run-cv", "0.02",
                     "--nights", "5", "--history-nights", "0"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["designs"]
    assert not {"claim_honesty", "sustained_shift", "one_night_vs_history"} & set(row)
    for bad in (["--history-nights", "-1"], ["--interaction-cv", "1.5"]):
        assert cal.main(["--suite", "nightly", "--nights", "5", *bad]) == 2
        assert "--history-nights must be >= 0 and --interaction-cv in [0, 1)" in \
            capsys.readouterr().err


def test_the_runner_health_signal_is_quiet_on_heavy_tailed_bursts_and_names_a_broken_start(
        design: cb.BlockDesign) -> None:
    """The signal (a start level out of profile) on healthy nights of heavy-tailed, bursty
    blocks stays under 1 %, and names a night whose first start ran 20 % slow in every mode
    (run CV 2 %); with one start a night nothing measures it."""
    for heavy in (False, True):
        found = runner_health(design, cb.Noise(0.02, 0.01, 0.003, heavy=heavy), nights=60,
                              seed=SEED)
        assert found is not None and found["history_nights"] == 14
        assert found["healthy_nights_named"] <= 0.01
        assert found["broken_start_named"] >= 0.9
    premerge = cb.block_design(load_suite(suite_path("premerge")), "mi355x")
    assert runner_health(premerge, cb.Noise(0.02, 0.01, 0.003), nights=5, seed=SEED) is None
