"""``servegate calibrate`` on designs whose outcome is known before simulating (issue 15).

Almost noise-free arms make every decision certain (an A/A night never alarms, any slowdown of
5 % or more is always caught, identical on/off arms are always equivalent with full power); a
single prompt per point is never judgeable (nothing is caught). A design with floor 0 has an A/A
false-alarm rate equal to the one-sided level, checked against the binomial distribution. The
reported tallies, intervals and table are then compared with values worked out here (scipy's
Clopper-Pearson interval as the reference), not with the harness's own arithmetic.
"""

from __future__ import annotations

from repo_files import LEGACY_SUITES

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from servegate.config.judge import JudgeConfig
from servegate.judge import calibrate as cal

GRID = cal.SLOWDOWN_GRID
# suites/ before [design] ([suite].repeats): the designs of the legacy simulation
LEGACY_SUITES = LEGACY_SUITES
LEGACY_NIGHTLY = LEGACY_SUITES / "nightly.toml"            # three repeats


def _design(*, prompts: int = 400, modes: tuple[str, ...] = ("off",), cv: float = 0.001,
            floor: float = 0.02) -> cal.Design:
    config = JudgeConfig(metrics=("mean_ttft_ms",), floors={"mean_ttft_ms": floor},
                         run_to_run_cv=0.0, noop_margin=0.02)
    return cal.Design("det", 1, (4,), (prompts,), 16, 0, config, "mi300x", ttft_cv=cv,
                      tpot_cv=cv, cv_source="test", modes=modes)


def _clopper_pearson(k: int, n: int) -> list[float]:
    low = 0.0 if k == 0 else float(sps.beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(sps.beta.ppf(0.975, k + 1, n - k))
    return [round(low, 5), round(high, 5)]


def test_certain_design_catches_every_slowdown_and_never_alarms() -> None:
    row = cal.calibrate(_design(), 0.0, nights=30, seed=5)
    assert (row["suite"], row["repeats"], row["run_cv"], row["nights"], row["checks"]) == (
        "det", 1, 0.0, 30, 1)
    assert row["aa_false_alarm"] == 0.0 and row["noop_false_failure"] == 0.0
    assert row["aa_false_alarm_ci"] == _clopper_pearson(0, 30)
    assert row["noop_false_failure_ci"] == _clopper_pearson(0, 30)
    assert row["power_curve"] == {f"{s:.2f}": 1.0 for s in GRID}
    assert row["power"] == {"0.05": 1.0, "0.10": 1.0}
    assert row["slowdown_80"] == 0.05
    assert row["per_check_confidence"] == 0.95          # one counted check: no Bonferroni
    assert row["noop_gating_nights"] == 0.0             # no `on` mode: no no-op claim
    assert (row["assumed_run_cv"], row["assumed_run_cv_dof"]) == (0.0, 10.0)
    assert row["request_cv"] == {"ttft": 0.001, "tpot": 0.001, "source": "test"}
    assert (row["runner_class"], row["seed"]) == ("mi300x", 5)


def test_every_night_of_every_batch_is_counted() -> None:
    """Nights split over batches (the last one short) are all simulated and all counted."""
    row = cal.calibrate(_design(prompts=50), 0.0, nights=7, seed=1, batch=3)
    assert row["nights"] == 7 and row["power_curve"]["0.05"] == 1.0
    assert row["aa_false_alarm_ci"] == _clopper_pearson(0, 7)


def test_unjudgeable_design_catches_nothing() -> None:
    row = cal.calibrate(_design(prompts=1), 0.0, nights=20, seed=2)
    assert row["power_curve"] == {f"{s:.2f}": 0.0 for s in GRID}
    assert row["slowdown_80"] is None and row["aa_false_alarm"] == 0.0


def test_identical_on_off_arms_are_equivalent_with_full_power() -> None:
    row = cal.calibrate(_design(modes=("off", "on")), 0.0, nights=25, seed=4)
    # off and on baseline checks, the no-op TOST, and the prefill test (counted, not simulated)
    assert row["checks"] == 4 and row["per_check_confidence"] == pytest.approx(1 - 0.05 / 4)
    assert row["noop_gating_nights"] == 1.0 and row["noop_false_failure"] == 0.0
    assert row["aa_false_alarm"] == 0.0


def test_floor_zero_alarms_at_the_one_sided_level() -> None:
    """With no practical floor an A/A check is a plain one-sided test at alpha/2 = 2.5 %."""
    nights = 4000
    row = cal.calibrate(_design(prompts=200, cv=0.05, floor=0.0), 0.0,
                        nights=nights, seed=11, slowdowns=(0.05,))
    k = round(row["aa_false_alarm"] * nights)
    low, high = sps.binom.ppf([0.0005, 0.9995], nights, 0.025)
    assert low <= k <= high, k
    assert row["aa_false_alarm_ci"] == _clopper_pearson(k, nights)


def test_a_slowdown_grid_reports_the_smallest_step_with_80_percent_power() -> None:
    # noisy enough that 1 % is not caught and 50 % always is
    row = cal.calibrate(_design(prompts=20, cv=0.05), 0.0, nights=40, seed=3,
                        slowdowns=(0.5, 0.01))
    assert row["power_curve"]["0.50"] == 1.0 and row["power_curve"]["0.01"] < 0.8
    assert row["slowdown_80"] == 0.5
    assert row["power"] == {}                           # 5 % and 10 % were not simulated


def _suite_file(tmp_path: Path) -> Path:
    path = tmp_path / "det.toml"
    path.write_text("""
[suite]
name = "det"
model = "glm-5.2-mxfp4"
runners = ["mi300x"]
modes = ["off"]
repeats = 1
seed = 1

[load]
input_len = 300
output_len = 16
concurrency = [4]
num_prompts = [20000]
warmup_requests = 1
point_timeout_s = 600

[judge]
metrics = ["mean_ttft_ms"]
floors = { mean_ttft_ms = 0.02 }
run_to_run_cv = 0.0
""")
    return path


def test_the_table_and_json_of_a_suite_file(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    suite = str(_suite_file(tmp_path))
    design = cal.design_for(suite)
    assert (design.suite, design.repeats, design.concurrencies, design.num_prompts,
            design.output_len, design.questions, design.runner_class, design.modes) == (
        suite, 1, (4,), (20000,), 16, 0, "mi300x", ("off",))
    args = ["--suite", suite, "--run-cv", "0,0.5", "--nights", "10", "--seed", "3"]
    assert cal.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("suite      runner      SxB run_cv blk_cv checks       A/A alarm [95% CI]"
                        " no-op fail power 5% power 10%  80% at claim 5.4/9.5%")
    # a legacy design's row: r<repeats> for the shape, a dash for the block CV and the claim
    assert lines[1] == (f"{suite} mi300x       r1   0.0%      -      1   0.0000 [0.0000, 0.3085]"
                        "     0.0000    1.000     1.000      5%              -")
    assert lines[2].startswith(f"{suite} mi300x       r1  50.0%      -      1 ")
    assert lines[2].endswith("              -")
    assert lines[3].startswith("10 nights per row, seed 3, ") and lines[3].endswith(" s")
    assert len(lines) == 4
    assert cal.main([*args, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["run_cv"] for r in doc["designs"]] == [0.0, 0.5]
    assert doc["seed"] == 3 and doc["wall_time_s"] >= 0
    assert doc["designs"][0]["aa_false_alarm_ci"] == _clopper_pearson(0, 10)


def test_a_row_without_80_percent_power_prints_a_dash(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = _suite_file(tmp_path)
    path.write_text(path.read_text().replace("num_prompts = [20000]", "num_prompts = [1]"))
    assert cal.main(["--suite", str(path), "--run-cv", "0", "--nights", "5"]) == 0
    row = capsys.readouterr().out.splitlines()[1]
    # power 5 %, power 10 %, the 80 % step (a dash) and the claim (a dash: a legacy design)
    assert row.endswith("    0.000     0.000       -              -")
    assert row.split()[-4:] == ["0.000", "0.000", "-", "-"]


@pytest.mark.parametrize("args", [["--nights", "0"], ["--batch", "0"], ["--run-cv", "-0.1"],
                                  ["--run-cv", ""]])
def test_bad_numbers_exit_2_naming_the_options(args: list[str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    assert cal.main(["--suite", "nightly", *args]) == 2
    assert capsys.readouterr().err.strip() == (
        "servegate calibrate: --nights and --batch must be >= 1, --run-cv >= 0")


def test_defaults() -> None:
    assert cal.DEFAULT_SUITES == ("cpu", "premerge", "nightly")
    assert cal.DEFAULT_RUN_CVS == (0.01, 0.02, 0.04)
    assert cal.POWER_AT == (0.05, 0.10)


# ------------------------------------------------------------------ the harness's own pieces

def test_design_of_the_legacy_nightly_suite() -> None:
    from servegate.config import load_suite
    suite = load_suite(LEGACY_NIGHTLY)
    design = cal.design_for(str(LEGACY_NIGHTLY))
    assert (design.suite, design.repeats, design.concurrencies, design.num_prompts,
            design.output_len, design.questions, design.modes) == (
        str(LEGACY_NIGHTLY), 3, tuple(suite.load.concurrency), tuple(suite.load.num_prompts),
        1024, 1319, ("off", "on"))
    assert design.runner_class == "mi300x"           # the first class exact fill is off on
    assert design.config == suite.judge
    assert (design.ttft_cv, design.tpot_cv) == (0.30, 0.10)


def test_block_design_of_the_nightly_suite() -> None:
    """The shipped nightly ([design]: 2 starts x 6 blocks) as calibrate_blocks simulates it: on
    a gated class (MI355X) off and on, elsewhere every mode of the suite."""
    from servegate.config import load_suite, suite_path
    from servegate.judge.calibrate_blocks import block_design
    suite = load_suite(suite_path("nightly"))
    gated = block_design(suite, "mi355x")
    assert (gated.suite, gated.runner, gated.starts, gated.blocks, gated.modes,
            gated.concurrencies, gated.questions, gated.gated) == (
        "nightly", "mi355x", 2, 6, ("off", "on"), tuple(suite.load.concurrency), 1319, True)
    assert gated.concurrencies == (4, 8, 16, 32, 64)
    assert gated.config == suite.judge
    ungated = block_design(suite, "mi300x")
    assert (ungated.starts, ungated.blocks, ungated.modes, ungated.questions, ungated.gated) == (
        2, 6, ("off", "on", "forced"), 1319, False)


def test_the_cpu_design_takes_its_request_cvs_from_the_stored_baseline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from servegate.config import suites

    # the legacy cpu suite by its name (the stored baseline is looked up by the name given)
    monkeypatch.setattr(suites, "SUITES_DIR", LEGACY_SUITES)
    design = cal.design_for("cpu")
    assert design.repeats == 1 and design.modes == ("off", "on")
    assert design.runner_class == "cpu" and design.questions > 0
    assert design.cv_source == ("stored CPU baseline baselines/cpu/smollm2-135m/cpu.json "
                                "(log-sd per point, averaged)")
    assert (design.ttft_cv, design.tpot_cv) != (0.30, 0.10)


def test_family_of_a_design_with_claims_and_accuracy() -> None:
    config = JudgeConfig(metrics=("mean_ttft_ms", "median_tpot_ms"), floors={
        "mean_ttft_ms": 0.03}, default_floor=0.07, accuracy_floor=0.015, noop_margin=0.04,
        noop_metrics=("mean_ttft_ms",), run_to_run_cv=0.02, confidence=0.9)
    design = cal.Design("fam", 2, (4, 16), (10, 20), 64, 100, config, "mi300x")
    specs, confidence = cal.family(design)
    kinds = [(s.kind, s.metric, s.mode, s.concurrency, s.floor) for s in specs]
    assert sorted(kinds, key=str) == sorted([
        ("baseline", "mean_ttft_ms", "off", 4, 0.03), ("baseline", "median_tpot_ms", "off", 4, 0.07),
        ("baseline", "mean_ttft_ms", "off", 16, 0.03),
        ("baseline", "median_tpot_ms", "off", 16, 0.07),
        ("baseline", "mean_ttft_ms", "on", 4, 0.03), ("baseline", "median_tpot_ms", "on", 4, 0.07),
        ("baseline", "mean_ttft_ms", "on", 16, 0.03),
        ("baseline", "median_tpot_ms", "on", 16, 0.07),
        ("accuracy", "accuracy", "off", None, 0.015), ("accuracy", "accuracy", "on", None, 0.015),
        ("prefill", "aligned_fraction", "on", 4, 0.0), ("prefill", "aligned_fraction", "on", 16, 0.0),
        ("noop", "mean_ttft_ms", "on", 4, 0.04), ("noop", "mean_ttft_ms", "on", 16, 0.04)],
        key=str)
    assert confidence == pytest.approx(1 - 0.1 / 14)


def test_draws_share_one_server_factor_per_mode_and_repeat() -> None:
    design = cal.Design("d", 2, (4, 8), (3, 5), 16, 0, JudgeConfig(), "mi300x", ttft_cv=0.0,
                        tpot_cv=0.0)
    rng = np.random.default_rng(0)
    draws = cal._draw(rng, design, 6, 0.1)
    ttft, tpot = draws[("off", 4)]
    assert ttft.shape == (6, 2, 3) and draws[("on", 8)][0].shape == (6, 2, 5)
    server = ttft[..., :1] / cal.TTFT_MS                 # no per-request noise: the server factor
    assert np.allclose(ttft / cal.TTFT_MS, server) and np.allclose(tpot / cal.TPOT_MS, server)
    assert np.allclose(draws[("off", 8)][0][..., :1] / cal.TTFT_MS, server)   # same start
    assert not np.allclose(draws[("on", 4)][0][..., :1] / cal.TTFT_MS, server)
    assert np.std(np.log(server)) == pytest.approx(0.1, abs=0.05)
    still = cal._draw(rng, design, 2, 0.0)[("off", 4)]
    assert np.all(still[0] == cal.TTFT_MS) and np.all(still[1] == cal.TPOT_MS)


def test_arm_statistics_as_bench_computes_them() -> None:
    design = cal.Design("d", 1, (4,), (3,), 11, 0, JudgeConfig(), "mi300x")
    ttft = np.array([[[100.0, 200.0, 300.0]]])
    tpot = np.array([[[10.0, 20.0, 30.0]]])
    e2e = ttft + tpot * 10                                        # output 11 tokens
    mean_e2e = cal._arm(ttft, tpot, "mean_e2e_latency_ms", design, 4)
    assert mean_e2e.values.tolist() == [[e2e.mean()]] and mean_e2e.n_requests == 3
    assert float(mean_e2e.pooled[0]) == pytest.approx(e2e.mean())
    duration_s = e2e.sum() / 4 / 1000.0
    for metric, per in (("output_throughput", 11), ("request_throughput", 1),
                        ("total_throughput", 11)):
        got = cal._arm(ttft, tpot, metric, design, 4).values
        assert got.shape == (1, 1) and float(got[0, 0]) == pytest.approx(per * 3 / duration_s)
    itl = cal._arm(ttft, tpot, "median_itl_ms", design, 4)
    assert itl.values.tolist() == [[20.0]] and itl.pooled is None
    with pytest.raises(ValueError) as info:
        cal._arm(ttft, tpot, "max_output_tokens_per_s", design, 4)
    assert str(info.value) == "calibrate: no simulation for metric 'max_output_tokens_per_s'"


def test_accuracy_codes_per_night() -> None:
    rng = np.random.default_rng(1)
    lenient = cal._accuracy_codes(rng, 50, 400, 0.5, 0.95)
    assert lenient.shape == (50,) and set(lenient.tolist()) == {0}
    strict = cal._accuracy_codes(rng, 400, 400, 0.0, 0.95)
    assert 0 < int((strict == 1).sum()) < 40            # about alpha/2 of nights at floor 0
