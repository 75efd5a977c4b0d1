"""servegate.commands.calibrate (``servegate calibrate``): nights simulated through the judge.

Pinned here: the CLI's help, defaults, argument checks, error path and printed table/JSON, and
which designs it asks the block simulation for (the simulations replaced by canned rows, the
clock by a fixed one; the simulations themselves are calibration/test_in_server.py's). Every suite,
with ``[design]`` or from before it, is simulated by :mod:`servegate.calibration`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from repo_files import LEGACY_SUITES

from servegate.commands import calibrate as cal
from servegate.config.judge import JudgeConfig

# suites/ before [design] ([suite].repeats): simulated as their effective design, a start per
# repeat holding one block
LEGACY_CPU = str(LEGACY_SUITES / "cpu.toml")


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


def test_an_unknown_suite_is_reported_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert cal.main(["--suite", "no-such-suite-xyz", "--nights", "1"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()
    assert line.startswith("servegate calibrate: ") and "no-such-suite-xyz" in line


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
    assert cal.DEFAULT_BLOCK_CVS == (0.01,)


def test_bad_input_exits_2(capsys):
    assert cal.main(["--suite", "no-such-suite", "--nights", "5"]) == 2
    assert cal.main(["--nights", "0"]) == 2



# ------------------------------------------- in-server ([design]) suites on the command line

class _BlockRecorder:
    """Stands in for calibration's two simulations (tested in calibration/test_in_server.py):
    records what the command asks each to simulate and returns canned rows, so the table and
    the rows built from them can be checked exactly."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.designs: list[tuple[str, Any, int, int, int]] = []
        self.shapes: list[tuple[int, int]] = []
        self.pairs: list[tuple[int, int, int, Any, int, int]] = []
        self.pair_slowdown_80: float | None = 0.7
        self.honesty: list[tuple[str, Any, int, int, int, int]] = []
        self.heavy: list[tuple[str, float, int, int, int]] = []
        self.pair_options: list[dict[str, Any]] = []
        monkeypatch.setattr(cal.blocks, "calibrate_design", self.design)
        monkeypatch.setattr(cal.pairs, "live_pair_calibration", self.pair)
        monkeypatch.setattr(cal.honesty, "claim_honesty", self.claim)

    def claim(self, design: Any, noise: Any, *, nights: int, seed: int, history: int,
              batch: int) -> dict[str, Any] | None:
        self.honesty.append((design.runner, noise, nights, seed, history, batch))
        if not design.gated:
            return None
        side = {"claim_coverage": {"0.054": 0.5}, "false_refutation_at_claim": 0.25,
                "claim_power": {"0.054": 0.125}, "aa_false_alarm": 0.0}
        return {"history_nights": history, "claimed_improvement": 0.04,
                "first_night": side, "with_history": {**side, "aa_false_alarm": 0.001}}

    def design(self, design: Any, noise: Any, *, nights: int, seed: int,
               batch: int) -> dict[str, Any]:
        if noise.heavy:                     # the same design in the heavy-tailed world
            self.heavy.append((design.runner, noise.run_cv, nights, seed, batch))
        else:
            self.designs.append((design.runner, noise, nights, seed, batch))
            self.shapes.append((design.starts, design.blocks))
        return {"suite": design.suite, "runner": design.runner, "runner_class": design.runner,
                "starts": design.starts,
                "blocks": design.blocks, "run_cv": noise.run_cv, "block_cv": noise.block_cv,
                "checks": 6, "aa_false_alarm": 0.0125, "aa_false_alarm_ci": [0.001, 0.25],
                "noop_false_failure": None, "power": {"0.05": 0.5, "0.10": 0.875},
                "slowdown_80": 0.1, "claim_power": {"0.054": 0.81, "0.095": 0.996}}

    def pair(self, config: JudgeConfig, starts: int, blocks: int, modes: int, noise: Any, *,
             nights: int, seed: int, looks: tuple[int, ...] = (), **options: Any
             ) -> dict[str, Any]:
        self.pairs.append((starts, blocks, modes, noise, nights, seed))
        self.pair_options.append(options)
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
        f"           head vs base, live pair ({2 * design.starts} server starts at most, 4 "
        "gated): A/A 0.0040 [0.0005, 0.0144], 80 % power at a 70% TTFT slowdown"]
    # the same design in the heavy-tailed, bursty world; a nightly runs no crossover
    assert sims.heavy == [("mi355x", 0.02, 7, 3, 5)]
    assert sims.pair_options == [{"stored": 0, "changes": 0, "crossover": False}]
    assert lines[3] == (
        "           claim (first night | 14 nights of history): coverage at 5.4% 0.500 | "
        "0.500, false refutation at 4% 0.250 | 0.250, power at 5.4% 0.125 | 0.125, A/A "
        "0.000 | 0.001")
    assert sims.honesty == [("mi355x", noise, 7, 3, 14, 5)]
    assert lines[4].startswith("           sustained 3% over 14 reference nights: flagged "
                               "within 3 nights ") and "nights with one" in lines[4]
    assert lines[5].startswith("7 nights per row, seed 3, ") and len(lines) == 6
    sims.pair_slowdown_80 = None                        # never 80 % on the grid: a dash
    assert cal.main(["--suite", "nightly", "--runner", "mi355x", "--run-cv", "0.02",
                     "--nights", "7"]) == 0
    assert capsys.readouterr().out.splitlines()[2].endswith("80 % power at a - TTFT slowdown")


def test_premerge_on_a_gpu_class_learns_its_pair_and_plans_a_crossover(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """One start per tree on GPU halves: the pair's start level from --stored-pairs (some of
    them real changes), the second start with the halves swapped only when undecided."""
    sims = _BlockRecorder(monkeypatch)
    assert cal.main(["--suite", "premerge", "--runner", "gfx95", "--run-cv", "0.02",
                     "--nights", "3", "--stored-pairs", "20", "--stored-changes", "2"]) == 0
    assert sims.pair_options == [{"stored": 20, "changes": 2, "crossover": True}]
    assert cal.main(["--suite", "premerge", "--runner", "gfx95", "--stored-pairs", "2",
                     "--stored-changes", "3"]) == 2
    assert "--stored-changes must be in [0, --stored-pairs], got 3 of 2" in \
        capsys.readouterr().err


def test_in_server_defaults_pick_a_class_per_gate_and_a_timed_design_its_block_noise_range(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """GPU classes at their assumed block CV; the cpu suite, sized in time, across the block
    CVs it must gate at, on the speed model's CPU and one twice as slow."""
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
        *[("cpu", cal.blocks.Noise(0.03, cv, cpu.judge.interaction_cv))
          for _slower in (1, 2) for cv in cal.TIMED_BLOCK_CVS]]
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
    minutes = row.pop("expected_serving_minutes")      # priced by servegate.plan.cost (1 tree)
    assert row.pop("expected_point_minutes")["aa"] < minutes["aa"]     # the blocks alone
    assert set(minutes) == {"max", "aa"} and 0 < minutes["aa"] == minutes["max"]
    assert set(pair["expected_serving_minutes"]) == {"max", "aa"}      # both trees
    assert pair["expected_serving_minutes"]["max"] > minutes["max"]
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




def test_defaults_of_the_command(monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Without options: the three true CVs, 1000 nights, the documented seed, batches of 200,
    and for the cpu suite (sized in time) its block CV range on a CPU and one twice as slow."""
    sims = _BlockRecorder(monkeypatch)
    assert cal.main(["--suite", "cpu", "--runner", "cpu"]) == 0
    assert [(runner, noise.run_cv, noise.block_cv, nights, seed, batch)
            for runner, noise, nights, seed, batch in sims.designs] == [
        ("cpu", cv, block_cv, 1000, 20261130, 200) for _slower in (1, 2)
        for cv in (0.01, 0.02, 0.04) for block_cv in cal.TIMED_BLOCK_CVS]
    assert [(nights, seed) for *_, nights, seed in sims.pairs] == [(1000, 20261130)] * 24
    assert capsys.readouterr().out.splitlines()[-1].startswith("1000 nights per row, seed 20261130")


def test_argv_defaults_to_the_command_line_and_one_night_is_enough(
        monkeypatch: pytest.MonkeyPatch) -> None:
    sims = _BlockRecorder(monkeypatch)
    monkeypatch.setattr(sys, "argv", ["servegate calibrate", "--suite", "cpu", "--runner", "cpu",
                                      "--nights", "1", "--batch", "1", "--run-cv", "0",
                                      "--block-cv", "0.03", "--seed", "9"])
    assert cal.main() == 0
    noise = cal.blocks.Noise(0.0, 0.03, cal.load_suite(cal.suite_path("cpu")).judge.interaction_cv)
    assert sims.designs == [("cpu", noise, 1, 9, 1)] * 2      # a CPU and one twice as slow


def test_json_of_a_canned_row_with_the_clocks_wall_time(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The JSON is indented by one space; the wall time is the clock's difference, to 0.1 s;
    every row carries its live pair as ``head_vs_base``."""
    _BlockRecorder(monkeypatch)
    clock = iter([100.0, 102.34])
    monkeypatch.setattr(cal, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    assert cal.main(["--suite", "nightly", "--runner", "mi355x", "--run-cv", "0.02",
                     "--block-cv", "0.01", "--nights", "8", "--seed", "5", "--json"]) == 0
    out = capsys.readouterr().out
    assert out.startswith('{\n "designs": [\n  {\n   "suite": "nightly",')
    doc = json.loads(out)
    assert doc["wall_time_s"] == 2.3 and doc["seed"] == 5
    (row,) = doc["designs"]
    assert (row["runner_class"], row["run_cv"], row["block_cv"]) == ("mi355x", 0.02, 0.01)
    assert row["head_vs_base"]["design"] == "live-pair"


def test_a_suite_from_before_design_is_simulated_as_a_start_per_repeat(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A legacy suite file ([suite].repeats, no [design]): each repeat one start of one block,
    and the live pair of the same shape."""
    from servegate.config import load_suite

    sims = _BlockRecorder(monkeypatch)
    repeats = load_suite(Path(LEGACY_CPU)).repeats
    assert cal.main(["--suite", LEGACY_CPU, "--runner", "cpu", "--run-cv", "0.02",
                     "--nights", "3"]) == 0
    assert sims.pairs[0][:2] == (repeats, 1)
    assert sims.shapes == [(repeats, 1)]
