"""servegate.judge.calibrate (``servegate calibrate``): nights simulated through the judge.

Pinned here: the CLI's help, defaults, argument checks, error path and printed table/JSON (the
simulation replaced by a canned row, the clock by a fixed one); the synthetic run the family is
read from; how ``design_for`` picks the runner, question count and request CVs; the family's kinds
for forced experiments; the lognormal draws' means; how one batch of nights is decided (arms
built by hand so every verdict is certain); and how the per-night decisions are tallied,
rounded and turned into intervals (the decisions scripted per night). Expected values are worked
out by hand or with scipy here.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from repo_files import LEGACY_SUITES
from scipy import stats as sps

from servegate.config.judge import JudgeConfig
from servegate.judge import calibrate
from servegate.judge import calibrate as cal
from servegate.judge.arms import Arm, ratio_interval
from servegate.judge.stats import classify, log_bounds, verdict

Arrays = tuple[np.ndarray, np.ndarray]


# suites/ before [design] ([suite].repeats): the suites the legacy simulation (design_for,
# calibrate) is for; the shipped cpu, premerge and nightly go to calibrate_blocks



LEGACY_CPU = str(LEGACY_SUITES / "cpu.toml")


def _design(*, repeats: int = 1, concs: tuple[int, ...] = (4,), prompts: tuple[int, ...] = (20,),
            questions: int = 0, modes: tuple[str, ...] = ("off",), config: JudgeConfig | None = None,
            ttft_cv: float = 0.3, tpot_cv: float = 0.1, runner: str = "mi300x") -> cal.Design:
    return cal.Design("holes", repeats, concs, prompts, 16, questions,
                      config or JudgeConfig(metrics=("mean_ttft_ms",)), runner, ttft_cv=ttft_cv,
                      tpot_cv=tpot_cv, cv_source="test", modes=modes)


def _clopper_pearson(k: int, n: int) -> list[float]:
    low = 0.0 if k == 0 else float(sps.beta.ppf(0.025, k, n - k + 1))
    high = 1.0 if k == n else float(sps.beta.ppf(0.975, k + 1, n - k))
    return [round(low, 5), round(high, 5)]


# ------------------------------------------------------------------------------------- the CLI

def test_help_names_the_command_its_purpose_and_every_option(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    with pytest.raises(SystemExit) as info:
        cal.main(["--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: servegate calibrate ")
    text = " ".join(out.split())
    assert ("``servegate calibrate``: simulate nights through the judge's own decision code, "
            "per suite design.") in text
    assert "Why:" not in text                       # only the docstring's first paragraph
    for option, help_text in (
            ("--suite SUITE", "suite name (repeatable); default cpu, premerge, nightly"),
            ("--run-cv RUN_CV", "true run-to-run CVs to simulate, comma-separated"),
            ("--batch BATCH", "nights simulated at once"),
            ("--json", "print one JSON document"),
            ("--runner RUNNER", "runner class or architecture to judge as (in-server designs; "
                                "default: one gated-off and one gated-on class the suite covers)"),
            ("--block-cv BLOCK_CV", "true block-to-block CVs inside a start (in-server designs; "
                                    f"default {cal.CPU_BLOCK_CV} on cpu classes, "
                                    f"{','.join(map(str, cal.DEFAULT_BLOCK_CVS))} on GPUs)"),
            ("--interaction-cv INTERACTION_CV",
             "true start x mode interaction CV (default: the suite's prior)")):
        assert f"{option} {help_text}" in text, option


class _Recorder:
    """Stands in for :func:`calibrate.calibrate`: records its arguments, returns a canned row."""

    def __init__(self, row: dict[str, Any]) -> None:
        self.row = row
        self.calls: list[tuple[str, float, int, int, int]] = []

    def __call__(self, design: cal.Design, run_cv: float, *, nights: int, seed: int,
                 batch: int) -> dict[str, Any]:
        self.calls.append((design.suite, run_cv, nights, seed, batch))
        return {**self.row, "suite": design.suite, "run_cv": run_cv, "nights": nights}


ROW: dict[str, Any] = {"repeats": 3, "checks": 7, "aa_false_alarm": 0.0125,
                       "aa_false_alarm_ci": [0.001, 0.25], "noop_false_failure": 0.5,
                       "power": {}, "slowdown_80": 1.0, "runner_class": "cpu"}


def test_defaults_of_the_command(monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Without options: the three true CVs, 1000 nights, the documented seed, batches of 200."""
    fake = _Recorder(ROW)
    monkeypatch.setattr(cal, "calibrate", fake)
    assert cal.main(["--suite", LEGACY_CPU]) == 0
    assert fake.calls == [(LEGACY_CPU, cv, 1000, 20261130, 200) for cv in (0.01, 0.02, 0.04)]
    assert capsys.readouterr().out.splitlines()[-1].startswith("1000 nights per row, seed 20261130")


def test_argv_defaults_to_the_command_line_and_one_night_is_enough(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _Recorder(ROW)
    monkeypatch.setattr(cal, "calibrate", fake)
    monkeypatch.setattr(sys, "argv", ["servegate calibrate", "--suite", LEGACY_CPU,
                                      "--nights", "1", "--batch", "1", "--run-cv", "0",
                                      "--seed", "9"])
    assert cal.main() == 0
    assert fake.calls == [(LEGACY_CPU, 0.0, 1, 9, 1)]


def test_table_and_json_of_a_canned_row(monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Powers not simulated print as 0; the 80 % step as a whole percent; a legacy row's shape
    as r<repeats> and a dash for the block CV and the claim; the wall time is the clock's
    difference, to 0.1 s; the JSON is indented by one space."""
    from servegate.config import suites

    # "cpu" resolves to the legacy file, so the row's suite is the short name (its column's
    # padding is pinned too)
    monkeypatch.setattr(suites, "SUITES_DIR", LEGACY_SUITES)
    monkeypatch.setattr(cal, "calibrate", _Recorder(ROW))
    clock = iter([100.0, 102.34, 200.0, 202.34])
    monkeypatch.setattr(cal, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    args = ["--suite", "cpu", "--run-cv", "0.02", "--nights", "8", "--seed", "5"]
    assert cal.main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == ("suite      runner      SxB run_cv blk_cv checks       A/A alarm [95% CI]"
                        " no-op fail power 5% power 10%  80% at claim 5.4/9.5%")
    assert lines[1] == ("cpu        cpu          r3   2.0%      -      7   0.0125 [0.0010, 0.2500]"
                        "     0.5000    0.000     0.000    100%              -")
    assert lines[2] == "8 nights per row, seed 5, 2.3 s"
    assert cal.main([*args, "--json"]) == 0
    out = capsys.readouterr().out
    assert out.startswith('{\n "designs": [\n  {\n   "repeats": 3,')
    doc = json.loads(out)
    assert doc["wall_time_s"] == 2.3 and doc["seed"] == 5
    assert doc["designs"] == [{**ROW, "suite": "cpu", "run_cv": 0.02, "nights": 8}]


def test_an_unknown_suite_is_reported_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert cal.main(["--suite", "no-such-suite-xyz", "--nights", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert line.startswith("servegate calibrate: ") and "no-such-suite-xyz" in line


# ------------------------------------------------------------------------------ the family

def test_the_synthetic_run_has_one_point_per_repeat_concurrency_and_mode() -> None:
    config = JudgeConfig(metrics=("mean_ttft_ms", "output_throughput"))
    design = _design(repeats=2, concs=(4, 8), prompts=(10, 30), questions=101,
                     modes=("off", "on"), config=config, runner="h100")
    run = cal._skeleton_run(design)
    requests = {q: [1.0, 1.1, 0.9] for q in ("ttft_ms", "tpot_ms", "e2e_latency_ms")}
    expected_points = [
        {"mode": mode, "concurrency": conc, "repeat": repeat,
         "metrics": {"mean_ttft_ms": 1.0 + 0.01 * repeat,
                     "output_throughput": 1.0 + 0.01 * repeat},
         "requests": requests, "alignment": {"prefill_tokens": [256, 236]},
         "exact_fill_effective": False, "n": n}
        for repeat in (0, 1) for conc, n in ((4, 10), (8, 30)) for mode in ("off", "on")]
    assert run == {"suite": "holes", "runner_class": "h100", "model_profile": "calibrate",
                   "complete": True, "points": expected_points,
                   "fingerprint": {"runner_class": "h100"},
                   "accuracy": {"off": {"n": 101, "correct": 50},
                                "on": {"n": 101, "correct": 50}}}
    assert all(isinstance(a["correct"], int) for a in run["accuracy"].values())


def test_concurrencies_and_prompt_counts_must_pair_up() -> None:
    design = _design(concs=(4, 8), prompts=(10,))
    with pytest.raises(ValueError):
        cal._skeleton_run(design)
    with pytest.raises(ValueError):
        cal._draw(np.random.default_rng(0), design, 2, 0.01)


def test_gated_claims_are_counted_but_not_simulated() -> None:
    """On a gated runner `on` must improve TTFT and keep accuracy: claims that are neither the
    no-op nor its prefill test ("other": counted, never simulated)."""
    design = _design(modes=("off", "on"), questions=10, runner="mi355x")
    specs, confidence = cal.family(design)
    assert sorted((s.kind, s.metric, s.mode) for s in specs) == [
        ("accuracy", "accuracy", "off"), ("accuracy", "accuracy", "on"),
        ("baseline", "mean_ttft_ms", "off"), ("baseline", "mean_ttft_ms", "on"),
        ("other", "accuracy", "on"), ("other", "mean_ttft_ms", "on")]
    assert confidence == pytest.approx(1 - 0.05 / 6)


def _suite(tmp_path: Path, runners: str, gsm8k: str = "") -> str:
    path = tmp_path / "s.toml"
    path.write_text(f"""
[suite]
name = "s"
model = "glm-5.2-mxfp4"
runners = [{runners}]
modes = ["off", "on"]
repeats = 2
seed = 1

[load]
input_len = 300
output_len = 16
concurrency = [4]
num_prompts = [20]
warmup_requests = 1
point_timeout_s = 600
{gsm8k}
[judge]
metrics = ["mean_ttft_ms"]
""")
    return str(path)


GSM8K = """
[gsm8k]
questions = {}
shots = 5
concurrency = 4
max_tokens = 160
seed = 1
"""


def test_design_for_a_gated_only_suite_judges_on_mi300x(tmp_path: Path) -> None:
    design = cal.design_for(_suite(tmp_path, '"mi355x"', GSM8K.format(200)))
    assert design.runner_class == "mi300x" and design.questions == 200
    assert design.modes == ("off", "on") and design.repeats == 2


def test_design_for_all_questions_means_the_whole_test_split(tmp_path: Path) -> None:
    design = cal.design_for(_suite(tmp_path, '"mi355x", "h100"', GSM8K.format('"all"')))
    assert design.runner_class == "h100" and design.questions == 1319


def test_cpu_design_reads_each_cv_from_its_own_quantity(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path) -> None:
    e = float(np.e)
    doc = {"points": [{"requests": {"ttft_ms": [1.0, e, e * e],             # log-sd 1
                                    "tpot_ms": [1.0, e ** 0.5, e]}}]}       # log-sd 0.5
    path = tmp_path / "cpu" / "smollm2-135m" / "cpu.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    monkeypatch.setattr(cal, "BASELINES_DIR", tmp_path)
    from servegate.config import suites

    monkeypatch.setattr(suites, "SUITES_DIR", LEGACY_SUITES)     # the legacy cpu, by its name
    design = cal.design_for("cpu")
    assert design.ttft_cv == pytest.approx(1.0) and design.tpot_cv == pytest.approx(0.5)


# ------------------------------------------------------------------------------ simulation

def test_request_draws_have_the_nominal_means() -> None:
    """The lognormal per-request factors are mean-corrected: TTFT averages 1000 ms and TPOT
    50 ms whatever the CV (here 0.5: a missing or doubled correction is 4 % or more off)."""
    design = _design(prompts=(4000,), ttft_cv=0.5, tpot_cv=0.5)
    ttft, tpot = cal._draw(np.random.default_rng(3), design, 50, 0.0)[("off", 4)]
    assert ttft.mean() == pytest.approx(cal.TTFT_MS, rel=0.01)
    assert tpot.mean() == pytest.approx(cal.TPOT_MS, rel=0.01)
    assert np.std(np.log(ttft)) == pytest.approx(0.5, rel=0.02)


def _judge(design: cal.Design, specs: list[cal.Spec], current: dict[tuple[str, int], Arrays],
           baseline: dict[tuple[str, int], Arrays], nights: int,
           confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return cal._judge_batch(design, specs, confidence, current, baseline,
                            np.random.default_rng(0), nights)


def _arrays(factors: list[float], nights: int = 4, prompts: int = 30, seed: int = 0) -> Arrays:
    """Per-request TTFT/TPOT with one factor per repeat and 1 % per-request noise."""
    rng = np.random.default_rng(seed)
    noise = np.exp(rng.normal(0.0, 0.01, (nights, len(factors), prompts)))
    scale = np.asarray(factors)[None, :, None]
    return 1000.0 * scale * noise, 50.0 * scale * noise


def _noop_config(**kw: float) -> JudgeConfig:
    return JudgeConfig(metrics=("mean_ttft_ms",), noop_margin=0.05, run_to_run_cv=0.0, **kw)


def test_noop_fails_only_where_on_differs_from_off_in_the_same_run() -> None:
    """c4: `on` 30 % slower than `off` with tight repeats (gating, fails); c8: on and off equal
    on average but repeats scattered (not gating, no failure). The baseline run's on/off are the
    other way round, so reading either arm from it would hide the c4 failure."""
    design = _design(repeats=3, concs=(4, 8), prompts=(30, 30), modes=("off", "on"),
                     config=_noop_config(noop_min_power=1.0))
    flat = [1.0, 1.0, 1.0]
    current = {("off", 4): _arrays(flat), ("on", 4): _arrays([1.3] * 3, seed=1),
               ("off", 8): _arrays([0.5, 1.0, 2.0], seed=2),
               ("on", 8): _arrays([2.0, 1.0, 0.5], seed=3)}
    baseline = {("off", 4): _arrays([1.3] * 3, seed=4), ("on", 4): _arrays(flat, seed=5),
                ("off", 8): _arrays(flat, seed=6), ("on", 8): _arrays(flat, seed=7)}
    specs = [cal.Spec("noop", "mean_ttft_ms", "on", 4, 0.05),
             cal.Spec("noop", "mean_ttft_ms", "on", 8, 0.05)]
    alarm, noop_fail, gating = _judge(design, specs, current, baseline, 4)
    assert alarm.tolist() == noop_fail.tolist() == gating.tolist() == [True] * 4
    alarm, noop_fail, gating = _judge(design, specs[1:], current, baseline, 4)
    assert alarm.tolist() == noop_fail.tolist() == gating.tolist() == [False] * 4
    # identical on/off: equivalent, power exactly 1 (gates at noop_min_power 1.0), no failure
    same = {**current, ("on", 4): current[("off", 4)]}
    alarm, noop_fail, gating = _judge(design, specs[:1], same, baseline, 4)
    assert gating.tolist() == [True] * 4 and not noop_fail.any() and not alarm.any()


def test_noop_pairs_on_and_off_by_repeat() -> None:
    """`on` 1 % slower than `off` in every repeat while the repeats scatter by 2x: paired by
    repeat the no-op is shown equivalent (gating); unpaired it could not be. (Throughput: a
    summary-only metric, so the repeats' own spread decides.)"""
    design = _design(repeats=3, modes=("off", "on"), config=_noop_config())
    current = {("off", 4): _arrays([0.5, 1.0, 2.0]),
               ("on", 4): _arrays([0.505, 1.01, 2.02], seed=1)}
    _, noop_fail, gating = _judge(design, [cal.Spec("noop", "output_throughput", "on", 4, 0.05)],
                                  current, current, 4)
    assert gating.tolist() == [True] * 4 and not noop_fail.any()


def test_baseline_checks_are_unpaired_and_follow_the_metric_direction() -> None:
    design = _design(repeats=3, config=JudgeConfig(metrics=("mean_ttft_ms",),
                                                   run_to_run_cv=0.0))
    base = {("off", 4): _arrays([0.5, 1.0, 2.0])}
    # 10 % slower in every repeat of a scattered run: a paired test would call it; the judge
    # compares a run with a baseline from another sitting unpaired, so it is inconclusive
    # (throughput: a summary-only metric, so the repeats' spread decides)
    slower = {("off", 4): _arrays([0.55, 1.1, 2.2], seed=1)}
    spec = cal.Spec("baseline", "output_throughput", "off", 4, 0.02)
    assert not _judge(design, [spec], slower, base, 4)[0].any()
    # twice as slow with tight repeats: TTFT up is a regression, and so is throughput down
    tight = {("off", 4): _arrays([1.0] * 3, seed=2)}
    double = {("off", 4): _arrays([2.0] * 3, seed=3)}
    for metric in ("mean_ttft_ms", "output_throughput"):
        spec = cal.Spec("baseline", metric, "off", 4, 0.02)
        assert _judge(design, [spec], double, tight, 4)[0].tolist() == [True] * 4, metric
        assert not _judge(design, [spec], tight, double, 4)[0].any(), metric


def _fixed_accuracy(diff: list[float], se: float) -> Callable[..., Arrays]:
    """A test double for the Agresti-Min estimate (tested itself in tests/unit/accuracy/test_paired.py):
    fixed paired differences, so what is checked is the harness's
    direction and wiring, not the estimate."""
    def agresti_min(a_only: np.ndarray, b_only: np.ndarray, n: int) -> Arrays:
        assert a_only.shape == b_only.shape == (len(diff),)
        return np.asarray(diff), np.full(len(diff), se)
    return agresti_min


def test_accuracy_is_judged_higher_is_better(monkeypatch: pytest.MonkeyPatch) -> None:
    """Given the paired difference cur - base and its se, the interval diff -+ 1.96 se is judged
    one-sided: a drop past the floor is a regression (1), a rise past it an improvement (2)."""
    monkeypatch.setattr(cal, "agresti_min", _fixed_accuracy([-0.1, 0.1, 0.0, -0.03], 0.01))
    codes = cal._accuracy_codes(np.random.default_rng(0), 4, 50, 0.02, 0.95)
    assert codes.tolist() == [1, 2, 0, 3]


def test_accuracy_alarms_add_to_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    design = _design(questions=50, modes=("off", "on"))
    tight, double = _arrays([1.0], nights=3), _arrays([2.0], nights=3, seed=1)
    baseline_spec = cal.Spec("baseline", "mean_ttft_ms", "off", 4, 0.02)
    accuracy = cal.Spec("accuracy", "accuracy", "off", None, 0.02)
    prefill = cal.Spec("prefill", "aligned_fraction", "on", 4, 0.0)
    # the accuracy of night 2 drops by 10 points, the others' do not move
    monkeypatch.setattr(cal, "agresti_min", _fixed_accuracy([0.0, 0.0, -0.1], 0.01))
    quiet = {("off", 4): tight, ("on", 4): tight}
    alarm = _judge(design, [baseline_spec, accuracy, prefill], quiet, quiet, 3)[0]
    assert alarm.tolist() == [False, False, True]
    # a slowed night stays an alarm whatever the accuracy says
    slow = {("off", 4): double, ("on", 4): tight}
    alarm = _judge(design, [baseline_spec, accuracy, prefill], slow, quiet, 3)[0]
    assert alarm.tolist() == [True, True, True]
    # the prefill test is not simulated: with no accuracy spec nothing alarms
    assert not _judge(design, [baseline_spec, prefill], quiet, quiet, 3)[0].any()


# ------------------------------------------------------------------------------ the tally

class _Script:
    """A test double for `_judge_batch` (tested above on hand-built arms). Stands in for one
    batch's decisions: which of the 15 nights (counted across batches) alarm,
    fail the no-op, gate it, and are caught at each slowdown (read off the slowed TTFT)."""

    def __init__(self) -> None:
        self.alarm = {0, 4, 9, 14}                         # 4/15
        self.noop_fail = {3, 11}                           # 2/15
        self.gating = {0, 1, 2, 3, 5, 8, 11}               # 7/15
        self.caught = {0.05: {7}, 0.1: {1, 2, 3, 4, 5}, 0.5: set(range(12)),
                       1.0: set(range(15))}
        self.done = 0
        self.sizes: list[int] = []
        self.current: dict[tuple[str, int], Arrays] = {}

    def __call__(self, design: cal.Design, specs: list[cal.Spec], confidence: float,
                 current: dict[tuple[str, int], Arrays], baseline: dict[tuple[str, int], Arrays],
                 rng: np.random.Generator, nights: int, *_: Any) -> tuple[np.ndarray, ...]:
        if any(s.kind != "baseline" for s in specs):      # the A/A nights: the whole family
            self.current, nights_at = current, range(self.done, self.done + nights)
            self.done += nights
            self.sizes.append(nights)
            return tuple(np.array([i in chosen for i in nights_at])
                         for chosen in (self.alarm, self.noop_fail, self.gating))
        key = next(iter(current))
        ratio = current[key][0] / self.current[key][0]
        assert np.allclose(current[key][1], self.current[key][1])     # TPOT untouched
        slowdown = round(float(ratio.mean()) - 1, 6)
        assert np.allclose(ratio, 1 + slowdown)
        caught = np.array([i in self.caught[slowdown]
                           for i in range(self.done - nights, self.done)])
        return caught, np.zeros(nights, bool), np.zeros(nights, bool)


def test_decisions_are_tallied_over_batches_rounded_and_given_intervals(
        monkeypatch: pytest.MonkeyPatch) -> None:
    config = JudgeConfig(metrics=("mean_ttft_ms", "median_tpot_ms"))
    design = _design(modes=("off", "on"), config=config, ttft_cv=0.123456, tpot_cv=0.654321,
                     prompts=(5,))
    script = _Script()
    monkeypatch.setattr(cal, "_judge_batch", script)
    row = cal.calibrate(design, 0.02, nights=15, seed=1, batch=4, slowdowns=(0.05, 0.1, 0.5, 1.0))
    assert script.sizes == [4, 4, 4, 3]
    # 4 baseline checks, 2 no-op TOSTs, 1 prefill test
    assert row["checks"] == 7 and row["per_check_confidence"] == 0.99285714
    assert row["aa_false_alarm"] == 0.26667 and row["aa_false_alarm_ci"] == _clopper_pearson(4, 15)
    assert row["noop_false_failure"] == 0.13333
    assert row["noop_false_failure_ci"] == _clopper_pearson(2, 15)
    assert row["noop_gating_nights"] == 0.4667
    assert row["power_curve"] == {"0.05": 0.0667, "0.10": 0.3333, "0.50": 0.8, "1.00": 1.0}
    assert row["power"] == {"0.05": 0.0667, "0.10": 0.3333}
    assert row["slowdown_80"] == 0.5                     # exactly 80 % counts
    assert row["request_cv"] == {"ttft": 0.1235, "tpot": 0.6543, "source": "test"}


def test_nights_are_simulated_200_at_a_time_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    script = _Script()
    script.caught = {0.05: set()}
    monkeypatch.setattr(cal, "_judge_batch", script)
    cal.calibrate(_design(modes=("off", "on"), prompts=(2,)), 0.0, nights=450, seed=1,
                  slowdowns=(0.05,))
    assert script.sizes == [200, 200, 50]


def test_each_true_cv_has_its_own_random_stream() -> None:
    """Two nearly equal true CVs give different nights (not the same draws rescaled)."""
    design = _design(prompts=(30,), ttft_cv=0.3)
    rows = [cal.calibrate(design, cv, nights=30, seed=2, slowdowns=(0.05, 0.1, 0.15, 0.2))
            for cv in (1e-6, 2e-6)]
    assert rows[0]["power_curve"] != rows[1]["power_curve"]


# ``servegate calibrate`` on designs whose outcome is known before simulating (issue 15).
#
# Almost noise-free arms make every decision certain (an A/A night never alarms, any slowdown of
# 5 % or more is always caught, identical on/off arms are always equivalent with full power); a
# single prompt per point is never judgeable (nothing is caught). A design with floor 0 has an A/A
# false-alarm rate equal to the one-sided level, checked against the binomial distribution. The
# reported tallies, intervals and table are then compared with values worked out here (scipy's
# Clopper-Pearson interval as the reference), not with the harness's own arithmetic.


GRID = cal.SLOWDOWN_GRID


LEGACY_NIGHTLY = LEGACY_SUITES / "nightly.toml"            # three repeats


def _deterministic_design(*, prompts: int = 400, modes: tuple[str, ...] = ("off",), cv: float = 0.001,
            floor: float = 0.02) -> cal.Design:
    config = JudgeConfig(metrics=("mean_ttft_ms",), floors={"mean_ttft_ms": floor},
                         run_to_run_cv=0.0, noop_margin=0.02)
    return cal.Design("det", 1, (4,), (prompts,), 16, 0, config, "mi300x", ttft_cv=cv,
                      tpot_cv=cv, cv_source="test", modes=modes)


def test_certain_design_catches_every_slowdown_and_never_alarms() -> None:
    row = cal.calibrate(_deterministic_design(), 0.0, nights=30, seed=5)
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
    row = cal.calibrate(_deterministic_design(prompts=50), 0.0, nights=7, seed=1, batch=3)
    assert row["nights"] == 7 and row["power_curve"]["0.05"] == 1.0
    assert row["aa_false_alarm_ci"] == _clopper_pearson(0, 7)


def test_unjudgeable_design_catches_nothing() -> None:
    row = cal.calibrate(_deterministic_design(prompts=1), 0.0, nights=20, seed=2)
    assert row["power_curve"] == {f"{s:.2f}": 0.0 for s in GRID}
    assert row["slowdown_80"] is None and row["aa_false_alarm"] == 0.0


def test_identical_on_off_arms_are_equivalent_with_full_power() -> None:
    row = cal.calibrate(_deterministic_design(modes=("off", "on")), 0.0, nights=25, seed=4)
    # off and on baseline checks, the no-op TOST, and the prefill test (counted, not simulated)
    assert row["checks"] == 4 and row["per_check_confidence"] == pytest.approx(1 - 0.05 / 4)
    assert row["noop_gating_nights"] == 1.0 and row["noop_false_failure"] == 0.0
    assert row["aa_false_alarm"] == 0.0


def test_floor_zero_alarms_at_the_one_sided_level() -> None:
    """With no practical floor an A/A check is a plain one-sided test at alpha/2 = 2.5 %."""
    nights = 4000
    row = cal.calibrate(_deterministic_design(prompts=200, cv=0.05, floor=0.0), 0.0,
                        nights=nights, seed=11, slowdowns=(0.05,))
    k = round(row["aa_false_alarm"] * nights)
    low, high = sps.binom.ppf([0.0005, 0.9995], nights, 0.025)
    assert low <= k <= high, k
    assert row["aa_false_alarm_ci"] == _clopper_pearson(k, nights)


def test_a_slowdown_grid_reports_the_smallest_step_with_80_percent_power() -> None:
    # noisy enough that 1 % is not caught and 50 % always is
    row = cal.calibrate(_deterministic_design(prompts=20, cv=0.05), 0.0, nights=40, seed=3,
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


# ``servegate calibrate``: the JSON contract, and that its vectorised nights decide exactly as
# the judge does for one night (few nights here; the >= 1000-night table is in docs/judge.md).


KEYS = {"suite", "repeats", "run_cv", "nights", "checks", "aa_false_alarm",
        "aa_false_alarm_ci", "noop_false_failure", "power"}


# suites/nightly.toml before [design] (three repeats: a server start per mode and repeat), the
# design the legacy simulation (design_for, calibrate) is for
LEGACY_NIGHTLY_ARG = str(LEGACY_SUITES
                     / "nightly.toml")


def test_json_contract_and_seeded(capsys):
    args = ["--json", "--suite", LEGACY_NIGHTLY_ARG, "--run-cv", "0.02", "--nights", "60",
            "--seed", "7"]
    assert cal.main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    [row] = doc["designs"]
    assert set(row) >= KEYS
    assert set(row["power"]) == {"0.05", "0.10"}
    assert (row["suite"], row["repeats"], row["run_cv"], row["nights"]) == (
        LEGACY_NIGHTLY_ARG, 3, 0.02, 60)
    low, high = row["aa_false_alarm_ci"]
    assert low <= row["aa_false_alarm"] <= high
    assert row["checks"] > 60                        # baseline checks + no-op claims + accuracy
    assert cal.main(args) == 0
    again = json.loads(capsys.readouterr().out)["designs"][0]
    assert again == row                              # seeded: the same nights again


def test_power_grows_with_the_slowdown_and_aa_stays_quiet():
    row = cal.calibrate(cal.design_for(LEGACY_NIGHTLY_ARG), 0.02, nights=120, seed=3)
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


# The calibration's per-request spread read from a stored CPU baseline (issue 15), checked
# against the committed baseline's own samples and hand-written documents.


def _with_baselines(monkeypatch: pytest.MonkeyPatch, root: Path, doc: object) -> None:
    path = root / "cpu" / "m" / "s.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    monkeypatch.setattr(calibrate, "BASELINES_DIR", root)


def test_log_sd_averaged_over_points(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    e = math.e
    doc = {"points": [
        {"requests": {"ttft_ms": [1.0, e, e * e], "tpot_ms": [1.0, 1.0, e, e]}},
        # a non-positive sample is dropped; then only 2 left for ttft: that point is skipped
        {"requests": {"ttft_ms": [1.0, e, 0.0], "tpot_ms": [e, e * e, e ** 3]}},
    ]}
    _with_baselines(monkeypatch, tmp_path, doc)
    ttft, tpot = calibrate._stored_request_cvs("m", "s")
    assert ttft == pytest.approx(1.0)                         # sd of logs 0, 1, 2 (ddof 1)
    sd_tpot_1 = float(np.std([0, 0, 1, 1], ddof=1))           # 0.57735
    assert tpot == pytest.approx((sd_tpot_1 + 1.0) / 2)


@pytest.mark.parametrize("doc", [
    {"points": []},
    {},
    {"points": [{"requests": {"ttft_ms": [1.0, 2.0, 3.0]}}]},         # no tpot samples
    {"points": [{"requests": {"ttft_ms": [1.0, 2.0], "tpot_ms": [1.0, 2.0, 3.0]}}]},
    {"points": [{"requests": None}]},
])
def test_too_few_samples_give_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                      doc: object) -> None:
    _with_baselines(monkeypatch, tmp_path, doc)
    assert calibrate._stored_request_cvs("m", "s") is None


def test_missing_baseline_gives_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(calibrate, "BASELINES_DIR", tmp_path)
    assert calibrate._stored_request_cvs("m", "s") is None


# ------------------------------------------- in-server ([design]) suites on the command line

class _BlockRecorder:
    """Stands in for calibrate_blocks' two simulations (tested in test_calibrate_blocks.py):
    records what the command asks each to simulate and returns canned rows, so the table and
    the rows built from them can be checked exactly."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.designs: list[tuple[str, Any, int, int, int]] = []
        self.pairs: list[tuple[int, int, int, Any, int, int]] = []
        self.pair_slowdown_80: float | None = 0.7
        monkeypatch.setattr(cal.blocks, "calibrate_design", self.design)
        monkeypatch.setattr(cal.blocks, "live_pair_calibration", self.pair)

    def design(self, design: Any, noise: Any, *, nights: int, seed: int,
               batch: int) -> dict[str, Any]:
        self.designs.append((design.runner, noise, nights, seed, batch))
        return {"suite": design.suite, "runner": design.runner, "runner_class": design.runner,
                "starts": design.starts,
                "blocks": design.blocks, "run_cv": noise.run_cv, "block_cv": noise.block_cv,
                "checks": 6, "aa_false_alarm": 0.0125, "aa_false_alarm_ci": [0.001, 0.25],
                "noop_false_failure": None, "power": {"0.05": 0.5, "0.10": 0.875},
                "slowdown_80": 0.1, "claim_power": {"0.054": 0.81, "0.095": 0.996}}

    def pair(self, config: JudgeConfig, starts: int, blocks: int, modes: int, noise: Any, *,
             nights: int, seed: int) -> dict[str, Any]:
        self.pairs.append((starts, blocks, modes, noise, nights, seed))
        return {"design": "live-pair", "starts": starts, "blocks": blocks,
                "server_starts": 2 * starts, "family_size": 2 * modes,
                "aa_false_alarm": 0.004, "aa_false_alarm_ci": [0.0005, 0.0144],
                "power_curve": {"0.05": 0.25, "0.10": 0.5, "0.70": 0.9},
                "slowdown_80": self.pair_slowdown_80}


def test_an_in_server_row_and_its_live_pair_in_the_table(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    sims = _BlockRecorder(monkeypatch)
    assert cal.main(["--suite", "nightly", "--runner", "mi355x", "--run-cv", "0.02",
                     "--block-cv", "0.065", "--interaction-cv", "0.004", "--nights", "7",
                     "--seed", "3", "--batch", "5"]) == 0
    design = cal.load_suite(cal.suite_path("nightly")).effective_design
    noise = cal.blocks.Noise(0.02, 0.065, 0.004)
    assert sims.designs == [("mi355x", noise, 7, 3, 5)]
    assert sims.pairs == [(design.starts, design.blocks, 2, noise, 7, 3)]
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:3] == [
        f"nightly    mi355x      {design.starts}x{design.blocks}   2.0%   6.5%      6   0.0125 "
        "[0.0010, 0.2500]          -    0.500     0.875     10%      0.81/1.00",
        f"           head vs base, live pair ({2 * design.starts} server starts, 4 gated): "
        "A/A 0.0040 [0.0005, 0.0144], 80 % power at a 70% TTFT slowdown"]
    assert lines[3].startswith("7 nights per row, seed 3, ") and len(lines) == 4
    sims.pair_slowdown_80 = None                        # never 80 % on the grid: a dash
    assert cal.main(["--suite", "nightly", "--runner", "mi355x", "--run-cv", "0.02",
                     "--nights", "7"]) == 0
    assert capsys.readouterr().out.splitlines()[2].endswith("80 % power at a - TTFT slowdown")


def test_in_server_defaults_pick_a_class_per_gate_and_the_measured_block_noise(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sims = _BlockRecorder(monkeypatch)
    assert cal.main(["--suite", "nightly", "--suite", "cpu", "--run-cv", "0.03",
                     "--nights", "4"]) == 0
    nightly, cpu = (cal.load_suite(cal.suite_path(n)) for n in ("nightly", "cpu"))
    gated = {c: cal.REGISTRY[c].gated for c in nightly.runner_classes() if c in cal.REGISTRY}
    first_off = next(c for c, g in gated.items() if not g)
    first_on = next(c for c, g in gated.items() if g)
    assert [(r, n) for r, n, *_ in sims.designs] == [
        (first_off, cal.blocks.Noise(0.03, 0.01, nightly.judge.interaction_cv)),
        (first_on, cal.blocks.Noise(0.03, 0.01, nightly.judge.interaction_cv)),
        ("cpu", cal.blocks.Noise(0.03, cal.CPU_BLOCK_CV, cpu.judge.interaction_cv))]
    assert {(nights, seed, batch) for *_, nights, seed, batch in sims.designs} == {
        (4, 20261130, 200)}


def test_a_suite_gated_only_head_vs_base_is_the_live_pairs_row(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    sims = _BlockRecorder(monkeypatch)
    suite = str(Path(__file__).resolve().parents[2] / "data" / "suites" / "ab-cpu.toml")
    assert cal.main(["--json", "--suite", suite, "--run-cv", "0.07", "--nights", "9"]) == 0
    assert sims.designs == []                          # no family of its own to simulate
    (row,) = json.loads(capsys.readouterr().out)["designs"]
    pair = row.pop("head_vs_base")
    assert pair["design"] == "live-pair"
    noise = sims.pairs[0][3]
    assert row == {
        "suite": suite, "runner": "cpu", "runner_class": "cpu", "design": "live-pair",
        "starts": pair["starts"], "blocks": pair["blocks"],
        "server_starts": pair["server_starts"], "run_cv": 0.07, "block_cv": cal.CPU_BLOCK_CV,
        "interaction_cv": noise.interaction_cv, "nights": 9, "checks": pair["family_size"],
        "family_size": pair["family_size"], "aa_false_alarm": 0.004,
        "aa_false_alarm_ci": [0.0005, 0.0144], "noop_false_failure": None,
        "power": {"0.05": 0.25, "0.10": 0.5}, "power_curve": pair["power_curve"],
        "slowdown_80": 0.7, "claim_power": None, "claim_false_confirmation": None}


def test_a_suite_naming_no_runner_is_judged_as_an_mi300x(tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[2] / "data" / "suites" / "ab-cpu.toml"
    path = tmp_path / "ab-cpu.toml"                    # a suite's name is its file's
    path.write_text(source.read_text().replace('runners = ["cpu"]', "runners = []"))
    assert cal._runner_classes(str(path), None) == ["mi300x"]
    assert cal._runner_classes(str(source), None) == ["cpu"]
    assert cal._runner_classes(str(source), "gfx95") == ["mi355x"]     # an architecture


def test_a_seed_reproduces_a_noisy_design_and_another_seed_does_not() -> None:
    """Mid-range rates (run CV 0.1: neither 0 nor 1) so that any unseeded draw would show."""
    design = cal.design_for(LEGACY_NIGHTLY_ARG)
    rows = [cal.calibrate(design, 0.1, nights=24, seed=s, batch=12, slowdowns=(0.05, 0.1, 0.2))
            for s in (3, 3, 4)]
    assert 0 < rows[0]["power_curve"]["0.10"] < 1
    assert rows[0] == rows[1]
    assert rows[0]["power_curve"] != rows[2]["power_curve"]


def test_the_paired_accuracy_draws_follow_the_seed() -> None:
    """Only flaky questions can disagree between the two sides; which ones do is the seed's."""
    codes = [cal._accuracy_codes(np.random.default_rng(s), 400, 40, 0.0, 0.6).tolist()
             for s in (5, 5, 6)]
    assert codes[0] == codes[1] and codes[0] != codes[2]
    # recorded at seed 5: the draws documented calibrations were made with (one stream: the
    # shared outcomes, the flaky questions, then each side's coin)
    assert np.bincount(codes[0], minlength=4).tolist() == [0, 19, 18, 363]
