"""Pricing a suite before it is booked: counts from the real plan, minutes from the profile's
speed model, loads in parallel only where a live pair fits."""

from __future__ import annotations

import dataclasses
import math

import pytest

from servegate.config import load_suite, suite_path
from servegate.core.paths import REPO_ROOT
from servegate.plan.cost import (
    CLIENT_WARMUP_OUTPUT,
    HEAD_VS_BASE_SUITES,
    Cell,
    CostError,
    cells,
    estimate,
    point_seconds,
    sized_suite,
)
from servegate.plan.design import build_block_plan


def test_cpu_cell_is_the_speed_models_arithmetic_over_the_suites_blocks_and_gsm8k() -> None:
    suite = load_suite(suite_path("cpu"))
    speed = suite.server_for("cpu").speed
    load, g = suite.load, suite.gsm8k
    assert speed is not None and g is not None and g.questions and load.warmup_requests == 0
    c, n = load.concurrency[0], load.num_prompts[0]
    point = (speed.block_overhead_s + n * load.input_len / speed.prefill_tokens_per_s
             + (load.output_len - 1) * speed.decode_step_ms(c) / 1000)
    gsm8k = (g.questions * 150 * (g.shots + 1) / speed.prefill_tokens_per_s
             + min(speed.gsm8k_output_tokens, g.max_tokens) * speed.decode_step_ms(g.concurrency)
             / 1000)
    modes = len(suite.modes)
    sized = sized_suite(suite, "cpu", suite.modes).effective_design
    assert sized.forced_blocks is not None        # forced only in the first rounds
    points = (modes - 1) * sized.blocks + min(sized.blocks, sized.forced_blocks)
    got = estimate(suite, Cell("cpu", suite.modes, "run", 1))
    assert (got["server_starts"], got["points"], got["waves"]) == (1, points, points)
    assert got["gsm8k_questions"] == modes * g.questions
    serving = points * point + modes * gsm8k
    assert got["serving_minutes"] == round(serving / 60, 1)
    assert got["wall_minutes"] == round((serving + speed.model_load_s) / 60, 1)
    assert got["gpus_held"] == 0 and got["gpu_minutes"] == 0
    assert got["speed"]["model_load_s"]["value"] == speed.model_load_s


def test_premerge_counts_every_block_wave_token_and_step_of_both_trees() -> None:
    suite = load_suite(suite_path("premerge"))
    [cell] = cells(suite, "gfx95", "premerge")
    assert (cell.runner_class, cell.modes, cell.trees) == ("mi355x", ("off", "on"), 2)
    got = estimate(suite, cell)
    load, design = suite.load, suite.effective_design
    rounds = 2 * design.starts * design.blocks * 2            # trees x starts x blocks x modes
    waves = sum(math.ceil(n / c) for c, n in zip(load.concurrency, load.num_prompts,
                                                 strict=True))
    requests = sum(load.num_prompts)
    assert got["server_starts"] == 2 and got["blocks"] == rounds
    assert got["points"] == rounds * len(load.concurrency)
    assert got["waves"] == rounds * waves and got["requests"] == rounds * requests
    assert got["prefill_tokens"] == rounds * requests * load.input_len
    # each point decodes its shaped output (c16: 256, c64: 16 tokens), warm-ups at most 32
    assert [load.output_len_at(c) for c in load.concurrency] == [256, 16]
    steps = sum(math.ceil(n / c) * (load.output_len_at(c) - 1)
                + min(load.output_len_at(c), CLIENT_WARMUP_OUTPUT) - 1
                for c, n in zip(load.concurrency, load.num_prompts, strict=True))
    assert got["decode_steps"] == rounds * steps == rounds * (255 + 31 + 2 * 15 + 15)
    assert got["warmup_points"] == 2 * 2 * design.warmup_blocks   # trees x modes per start
    assert got["gsm8k_questions"] == 2 * 2 * 560
    assert got["live_pair"] is True and got["gpus_held"] == 8
    assert got["gpu_minutes"] == pytest.approx(8 * got["wall_minutes"], abs=0.5)


def test_a_live_pair_loads_both_trees_at_once_and_a_4_gpu_runner_one_after_the_other() -> None:
    suite = load_suite(suite_path("premerge"))
    live = estimate(suite, Cell("mi355x", ("off", "on"), "gate", 2))
    serial = estimate(suite, Cell("mi325x", ("off", "on"), "gate", 2))
    load_live = suite.server_for("mi355x").speed.model_load_s        # type: ignore[union-attr]
    load_serial = suite.server_for("mi325x").speed.model_load_s      # type: ignore[union-attr]
    assert live["minutes"]["model_loads"] == round(load_live / 60, 1)
    assert serial["live_pair"] is False
    assert serial["minutes"]["model_loads"] == round(2 * load_serial / 60, 1)


def test_nightly_prices_the_gate_cell_and_the_forced_experiment_where_the_gate_is_off() -> None:
    suite = load_suite(suite_path("nightly"))
    assert [(c.runner_class, c.modes, c.role) for c in cells(suite, "gfx942", "nightly")] == [
        ("mi325x", ("off", "on"), "gate"), ("mi325x", ("off", "forced"), "experiment")]
    assert [c.role for c in cells(suite, "gfx95", "nightly")] == ["gate"]
    got = estimate(suite, cells(suite, "gfx95", "nightly")[0], with_accuracy=False)
    assert got["gsm8k_questions"] == 0 and got["minutes"]["gsm8k"] == 0
    assert got["server_starts"] == suite.effective_design.starts


def test_the_trees_gate_decides_the_nightly_experiment() -> None:
    """A tree whose gate opens on gfx942 (servegate.serve.gate) needs no forced experiment
    there; one whose gate stays closed on gfx95 gets one; None keeps released sglang's."""
    suite = load_suite(suite_path("nightly"))
    assert [c.role for c in cells(suite, "gfx942", "nightly", gate_open=True)] == ["gate"]
    assert [(c.modes, c.role) for c in cells(suite, "gfx95", "nightly", gate_open=False)] == [
        (("off", "on"), "gate"), (("off", "forced"), "experiment")]
    assert cells(suite, "gfx942", "nightly", gate_open=None) == cells(suite, "gfx942", "nightly")


def test_measured_figures_replace_the_load_and_scale_the_serving_time() -> None:
    suite = load_suite(suite_path("cpu"))
    suite = dataclasses.replace(suite, design=dataclasses.replace(    # counted, not timed
        suite.design, max_minutes=None, min_block_seconds=None))
    cell = Cell("cpu", suite.modes, "run", 1)
    model = estimate(suite, cell)
    measured = estimate(suite, cell, measured_scale=2.0, measured_load_s=120.0)
    assert measured["minutes"]["model_loads"] == 2.0
    assert measured["serving_minutes"] == pytest.approx(2 * model["serving_minutes"], abs=0.15)


def test_a_runner_section_without_a_speed_table_is_refused_naming_the_profile() -> None:
    suite = load_suite(suite_path("cpu"))
    runner = dataclasses.replace(suite.model.runners["cpu"], speed=None)
    model = dataclasses.replace(suite.model, runners={**suite.model.runners, "cpu": runner})
    with pytest.raises(CostError, match=r"smollm2-135m.toml: no \[runners.<section>.speed\]"):
        estimate(dataclasses.replace(suite, model=model), Cell("cpu", ("off",), "run", 1))


def test_the_head_vs_base_suites_are_the_ones_the_premerge_workflow_runs_with_ab() -> None:
    premerge = (REPO_ROOT / "ci" / "workflows" / "premerge.yml").read_text()
    nightly = (REPO_ROOT / "ci" / "workflows" / "nightly.yml").read_text()
    for name in HEAD_VS_BASE_SUITES:
        assert f"--suite {name} --modes" in premerge and "-s ab --" in premerge
    assert "-s ab" not in nightly


def test_profiled_blocks_are_counted_and_priced_per_mode_tree_and_start() -> None:
    from servegate.plan.cost import PROFILE_OVERHEAD, point_seconds
    from servegate.plan.design import build_block_plan

    suite = load_suite(suite_path("cpu"))
    cell = Cell("cpu", suite.modes, "run", 1)
    plain = estimate(suite, cell, with_accuracy=False)
    profiled = estimate(suite, cell, with_accuracy=False, with_profile=True)
    assert plain["profiled_blocks"] == 0 and plain["minutes"]["profiles"] == 0.0
    assert profiled["profiled_blocks"] == len(suite.modes)      # one start, one tree
    assert profiled["points"] == plain["points"]                # never points
    speed = suite.server_for("cpu").speed
    assert speed is not None
    one = point_seconds(speed, suite, build_block_plan(
        suite.modes, suite.load.concurrency, suite.load.num_prompts, 1, 1, suite.seed)[0]
        .points[0])[0]
    assert profiled["minutes"]["profiles"] == round(len(suite.modes) * PROFILE_OVERHEAD * one
                                                    / 60, 1)
    assert any("profiled block(s)" in note for note in profiled["notes"])
    two_trees = estimate(suite, Cell("cpu", ("off", "on"), "run", 2), with_accuracy=False,
                         with_profile=True)
    assert two_trees["profiled_blocks"] == 2 * 2


@pytest.mark.parametrize("suite_name", ["cpu", "nightly"])
def test_warm_up_blocks_are_priced_per_start_and_mode_in_serving_and_wall_minutes(
        suite_name: str) -> None:
    """A design with warm-ups: each start runs ``warmup_blocks`` unmeasured blocks per mode
    before its measured ones, each as long as that mode's first block; plan's minutes carry
    exactly them (the serving, the wall and the warm-up figures), at one and at two starts."""
    suite = load_suite(suite_path(suite_name))
    suite = dataclasses.replace(suite, design=dataclasses.replace(
        suite.design, halves=False, max_minutes=None, min_block_seconds=None))
    runner = "cpu" if suite_name == "cpu" else "mi355x"
    speed = suite.server_for(runner).speed
    cell = Cell(runner, suite.modes, "run", 1)
    for starts in (1, 2):
        plain = dataclasses.replace(suite, design=dataclasses.replace(
            suite.design, starts=starts, warmup_blocks=0))
        warmed = dataclasses.replace(plain, design=dataclasses.replace(
            plain.design, warmup_blocks=2))
        without, with_warmups = estimate(plain, cell), estimate(warmed, cell)
        slots = build_block_plan(cell.modes, suite.load.concurrency, suite.load.num_prompts,
                                 starts, plain.design.blocks, suite.seed)
        firsts = [next(p for p in slot.points if p.mode == mode)
                  for slot in slots for mode in cell.modes]
        expected_s = 2 * sum(point_seconds(speed, suite, p)[0] for p in firsts)
        assert with_warmups["warmup_points"] == 2 * starts * len(cell.modes)
        assert without["warmup_points"] == 0 and without["minutes"]["warmups"] == 0
        assert with_warmups["minutes"]["warmups"] == round(expected_s / 60, 1)
        grown = with_warmups["serving_minutes"] - without["serving_minutes"]
        assert grown == pytest.approx(expected_s / 60, abs=0.11)
        assert with_warmups["wall_minutes"] - without["wall_minutes"] == pytest.approx(
            expected_s / 60, abs=0.11)
def test_halves_price_two_starts_at_once_and_the_gpus_they_leave_idle() -> None:
    """The nightly's 4 starts on an 8-GPU runner: rounds of two (two loads, serving the
    longer start of each round, GSM8K's two modes one per half), every held GPU busy while
    serving; the same design one start at a time holds the same 8 GPUs with half of them idle
    and pays four loads and every start's serving in series."""
    suite = load_suite(suite_path("nightly"))
    cell = Cell("mi355x", ("off", "on"), "gate", 1)
    halves = estimate(suite, cell)
    serial = estimate(dataclasses.replace(suite, design=dataclasses.replace(
        suite.design, halves=False)), cell)
    load = suite.server_for("mi355x").speed.model_load_s / 60   # type: ignore[union-attr]
    assert (halves["halves"], serial["halves"]) == (True, False)
    assert halves["minutes"] == {**serial["minutes"], "model_loads": round(2 * load, 1)}
    assert serial["minutes"]["model_loads"] == round(4 * load, 1)
    assert halves["serving_minutes"] == pytest.approx(serial["serving_minutes"] / 2, abs=0.1)
    assert halves["gpu_minutes_used"] == serial["gpu_minutes_used"]
    assert (halves["idle_share"], serial["idle_share"]) == (0.0, 0.5)
    assert halves["gpu_minutes"] == pytest.approx(8 * halves["wall_minutes"], abs=0.5)
    no_gsm8k = estimate(suite, cell, with_accuracy=False)
    assert no_gsm8k["serving_minutes"] == pytest.approx(
        halves["serving_minutes"] - halves["minutes"]["gsm8k"] / 2, abs=0.1)


def test_a_design_sized_in_time_runs_the_blocks_of_the_last_look_within_its_cap() -> None:
    """[design] max_minutes: the blocks a machine the speed model describes runs are those of
    the last look whose rounds end within the cap (bench_looks keeps it there); twice as slow,
    fewer; min_block_seconds sets the waves a block runs, each a [load] point's prompts."""
    suite = load_suite(suite_path("cpu"))
    design = suite.effective_design
    assert design.max_minutes is not None and design.min_block_seconds is not None
    speed = suite.server_for("cpu").speed
    assert speed is not None
    block_s = point_seconds(speed, suite, build_block_plan(
        suite.modes, suite.load.concurrency, suite.load.num_prompts, 1, 1, 1)[0].points[0])[0]
    cap_s = 60 * design.max_minutes
    schedule = (*design.looks, design.blocks)
    for slower in (1.0, 2.0):
        sized = sized_suite(suite, "cpu", suite.modes, slower)
        blocks = sized.effective_design.blocks
        assert sized.load.num_prompts == suite.load.num_prompts       # one wave: long enough
        def start_s(k: int, slower: float = slower) -> float:   # forced in the first rounds
            return slower * block_s * (2 * k + min(k, design.forced_blocks or 0))
        following = schedule[schedule.index(blocks) + 1:]      # none: every round fits
        assert start_s(blocks) <= cap_s and (not following or cap_s < start_s(following[0]))
        assert sized.effective_design.looks == tuple(k for k in design.looks if k < blocks)
    assert sized_suite(suite, "cpu", suite.modes, 2.0).effective_design.blocks < \
        sized_suite(suite, "cpu", suite.modes).effective_design.blocks
    longer = dataclasses.replace(suite, design=dataclasses.replace(design, min_block_seconds=10))
    wave = block_s - speed.block_overhead_s
    waves = math.ceil((10 - speed.block_overhead_s) / wave)
    assert waves > 1 and sized_suite(longer, "cpu", suite.modes).load.num_prompts == tuple(
        n * waves for n in suite.load.num_prompts)
    counted = dataclasses.replace(suite, design=dataclasses.replace(
        design, max_minutes=None, min_block_seconds=None))
    assert sized_suite(counted, "cpu", suite.modes) is counted


def test_the_cap_counts_forced_rounds_earlier_starts_and_falls_back_to_the_first_look() -> None:
    """sized_suite's schedule arithmetic on the cpu suite (3 modes, forced in the first 4
    rounds): a cap between the 8- and 12-round starts keeps 8 (12 rounds cost 2 x 12 + 4
    blocks); a second start costs its full schedule first; a cap below the first look still
    runs it; a design with a cap but no block length keeps its waves and is still capped; a
    block length half an overhead short of 3 waves plus the overhead takes 3 waves, not 4."""
    suite = load_suite(suite_path("cpu"))
    design, speed = suite.effective_design, suite.server_for("cpu").speed
    assert speed is not None and design.forced_blocks == 4
    block_s = point_seconds(speed, suite, build_block_plan(
        suite.modes, suite.load.concurrency, suite.load.num_prompts, 1, 1, 1)[0].points[0])[0]

    def blocks(minutes: float, starts: int = 1, min_block_s: float | None = 1.5) -> int:
        changed = dataclasses.replace(suite, design=dataclasses.replace(
            design, starts=starts, max_minutes=minutes, min_block_seconds=min_block_s))
        return sized_suite(changed, "cpu", suite.modes).effective_design.blocks

    assert blocks(block_s * (2 * 12 + 1) / 60) == 8          # 12 rounds: 28 blocks, not 24.25
    assert blocks(block_s * (2 * 12 + 4) * 1.000001 / 60) == 12
    assert blocks(block_s * (2 * 40 + 4 + 2 * 12 + 4) * 1.000001 / 60, starts=2) == 12
    assert blocks(block_s / 60) == 8                          # nothing fits: the first look
    assert blocks(block_s * (2 * 12 + 1) / 60, min_block_s=None) == 8
    capped_only = dataclasses.replace(suite, design=dataclasses.replace(
        design, min_block_seconds=None))
    assert sized_suite(capped_only, "cpu", suite.modes).load.num_prompts == suite.load.num_prompts
    wave = block_s - speed.block_overhead_s
    longer = dataclasses.replace(suite, design=dataclasses.replace(
        design, min_block_seconds=3 * wave + 0.5 * speed.block_overhead_s))
    assert sized_suite(longer, "cpu", suite.modes).load.num_prompts == tuple(
        3 * n for n in suite.load.num_prompts)
