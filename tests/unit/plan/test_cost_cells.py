"""Which cells plan prices for a runner (an explicit --modes, a CPU or emulated class: one
``run`` cell with the suite's or the given modes) and the price of a profiled block (a wave at
the suite's highest concurrency, priced like that point's block at that many prompts)."""

from __future__ import annotations

import dataclasses

import pytest

from servegate.config import load_suite, suite_path
from servegate.core import runner_classes
from servegate.plan.cost import (
    PROFILE_OVERHEAD,
    Cell,
    cells,
    estimate,
    gsm8k_seconds,
    point_seconds,
    profile_seconds,
)
from servegate.plan.design import build_block_plan, live_pair_layout


@pytest.mark.parametrize(("workflow", "trees"), [("nightly", 1), ("premerge", 2)])
def test_explicit_modes_are_one_run_cell_of_the_runners_class(workflow: str, trees: int) -> None:
    suite = load_suite(suite_path("nightly"))
    assert cells(suite, "gfx95", workflow, modes=("off", "forced")) == [
        Cell("mi355x", ("off", "forced"), "run", trees)]


@pytest.mark.parametrize(("runner", "workflow", "trees"), [
    ("cpu", "nightly", 1), ("cpu", "premerge", 2), ("cpu-gfx95", "nightly", 1),
    ("cpu-gfx95", "premerge", 2)])
def test_a_cpu_or_emulated_class_is_one_run_cell_in_the_suites_modes(
        runner: str, workflow: str, trees: int) -> None:
    """No gate cell and no forced experiment on a CPU machine (real or emulated gfx95): the
    suite's own modes in one cell."""
    suite = load_suite(suite_path("cpu"))
    assert cells(suite, runner, workflow) == [Cell(runner, suite.modes, "run", trees)]


def test_an_unknown_runner_is_refused_listing_the_known_classes() -> None:
    suite = load_suite(suite_path("cpu"))
    known = ", ".join(runner_classes.names())
    with pytest.raises(runner_classes.UnknownRunner) as info:
        cells(suite, "tpu", "nightly")
    assert str(info.value) == f"--runner 'tpu': not a runner class or architecture (known: {known})"


def _premerge() -> tuple:
    suite = load_suite(suite_path("premerge"))
    speed = suite.server_for("mi355x").speed
    assert speed is not None and suite.load.concurrency == (16, 64)
    [slot] = build_block_plan(("off", "on"), suite.load.concurrency, suite.load.num_prompts,
                              1, 1, suite.seed)
    return suite, speed, slot.points


def test_a_profiled_block_is_one_wave_at_the_highest_concurrency_per_mode() -> None:
    """premerge: c16 (16 prompts, 256 out) and c64 (128 prompts, 16 out): a profiled block is
    the c64 point's block at 64 prompts (one wave), not its two-wave block nor a c16 block."""
    suite, speed, points = _premerge()
    top = next(p for p in points if p.concurrency == 64)
    wave = point_seconds(speed, suite, dataclasses.replace(top, num_prompts=64))[0]
    assert point_seconds(speed, suite, dataclasses.replace(top, num_prompts=64))[1] == 1
    got = profile_seconds(speed, suite, points, ("off", "on"))
    assert got == pytest.approx(2 * PROFILE_OVERHEAD * wave, rel=1e-12)
    assert got != pytest.approx(2 * PROFILE_OVERHEAD * point_seconds(speed, suite, top)[0])


def test_a_start_without_the_top_concurrency_prices_its_first_points_shape() -> None:
    suite, speed, points = _premerge()
    low = [p for p in points if p.concurrency == 16]
    odd = (low[0], dataclasses.replace(low[1], concurrency=32))
    wave = point_seconds(speed, suite, dataclasses.replace(low[0], num_prompts=64))[0]
    assert profile_seconds(speed, suite, odd, ("off",)) == pytest.approx(
        PROFILE_OVERHEAD * wave, rel=1e-12)


def test_a_suite_without_gsm8k_prices_no_gsm8k_pass() -> None:
    suite = dataclasses.replace(load_suite(suite_path("cpu")), gsm8k=None)
    speed = suite.server_for("cpu").speed
    assert speed is not None
    assert gsm8k_seconds(speed, suite) == (0.0, 0)
    got = estimate(suite, Cell("cpu", suite.modes, "run", 1))
    assert got["gsm8k_questions"] == 0 and got["minutes"]["gsm8k"] == 0.0


def test_a_suite_that_profiles_is_priced_with_its_profiles_every_start() -> None:
    """``[profile] enabled`` prices the profiled blocks without being asked; two starts pay
    twice one start's; an unprofiled plan pays none, at any measured scale."""
    suite = load_suite(suite_path("cpu"))
    cell = Cell("cpu", suite.modes, "run", 1)
    on = dataclasses.replace(suite, profile=dataclasses.replace(suite.profile, enabled=True))
    one = estimate(on, cell, with_accuracy=False, measured_scale=100.0)
    assert one["profiled_blocks"] == len(suite.modes) and one["minutes"]["profiles"] > 0
    two = estimate(dataclasses.replace(on, design=dataclasses.replace(on.design, starts=2)),
                   cell, with_accuracy=False, measured_scale=100.0)
    assert two["profiled_blocks"] == 2 * len(suite.modes)
    assert two["minutes"]["profiles"] == pytest.approx(2 * one["minutes"]["profiles"], abs=0.1)
    plain = estimate(suite, cell, with_accuracy=False, with_profile=False, measured_scale=100.0)
    assert plain["profiled_blocks"] == 0 and plain["minutes"]["profiles"] == 0.0
    assert plain["minutes"]["gsm8k"] == 0.0 and plain["gsm8k_questions"] == 0


@pytest.mark.parametrize("starts", [4, 6])
def test_halves_serve_in_rounds_of_two_with_round_zeros_longer_half(starts: int) -> None:
    """``[design] halves`` with three modes: each round of two starts lasts as long as its
    longer start; round 0's halves split GSM8K's three passes two and one, so the plan pays
    two passes on top of the rounds' blocks, and one model load per round."""
    suite = load_suite(suite_path("nightly"))
    suite = dataclasses.replace(suite, design=dataclasses.replace(suite.design, starts=starts,
                                                                  halves=True))
    serial = dataclasses.replace(suite, design=dataclasses.replace(suite.design, halves=False))
    cell = Cell("mi355x", ("off", "on", "forced"), "gate", 1)
    speed = suite.server_for("mi355x").speed
    assert speed is not None
    blocks_only = estimate(suite, cell, with_accuracy=False)
    assert blocks_only["halves"] is True
    assert blocks_only["serving_minutes"] == pytest.approx(
        estimate(serial, cell, with_accuracy=False)["serving_minutes"] / 2, abs=0.1)
    assert blocks_only["minutes"]["model_loads"] == round(starts / 2 * speed.model_load_s / 60, 1)
    one_pass = gsm8k_seconds(speed, suite)[0] / 60
    assert one_pass > 0.5
    assert estimate(suite, cell)["serving_minutes"] == pytest.approx(
        blocks_only["serving_minutes"] + 2 * one_pass, abs=0.1)


def test_a_one_gpu_suite_holds_only_its_servers_gpus() -> None:
    """The smoke job runs on a one-server runner label: it books that server's GPUs, not the
    class's eight, and every GPU it holds is busy while it serves."""
    suite = load_suite(suite_path("smoke"))
    [cell] = cells(suite, "gfx95", "premerge", modes=("off", "on"))
    got = estimate(suite, dataclasses.replace(cell, trees=1))
    per_server = live_pair_layout(suite, "mi355x").per_server
    assert 0 < per_server < runner_classes.get("mi355x").gpus
    assert got["gpus_held"] == per_server and got["idle_share"] == 0.0


def test_gpu_minutes_used_are_each_servers_gpus_times_its_serving_at_the_measured_scale() -> None:
    suite = load_suite(suite_path("nightly"))
    serial = dataclasses.replace(suite, design=dataclasses.replace(suite.design, halves=False))
    cell = Cell("mi355x", ("off", "on"), "gate", 1)
    per_server = live_pair_layout(suite, "mi355x").per_server
    for scale in (None, 2.0):
        got = estimate(serial, cell, measured_scale=scale)
        assert got["gpu_minutes_used"] == pytest.approx(per_server * got["serving_minutes"],
                                                        abs=per_server * 0.05 + 0.05)
    cpu = load_suite(suite_path("cpu"))
    got = estimate(cpu, Cell("cpu", cpu.modes, "run", 1), measured_scale=2.0)
    assert (got["gpus_held"], got["gpu_minutes_used"], got["idle_share"]) == (0, 0.0, None)


def test_plans_figures_are_given_at_their_stated_precision() -> None:
    """plan --json: minutes in tenths, the mean point and the idle share in thousandths (the
    unrounded numbers would print as many digits as a float has)."""
    suite = load_suite(suite_path("nightly"))
    speed = suite.server_for("mi355x").speed
    assert speed is not None
    cell = Cell("mi355x", ("off", "on", "forced"), "gate", 1)
    got = estimate(suite, cell, with_profile=True)
    slots = build_block_plan(cell.modes, suite.load.concurrency, suite.load.num_prompts,
                             suite.effective_design.starts, suite.effective_design.blocks,
                             suite.seed)
    cpu = load_suite(suite_path("cpu"))
    cpu_speed = cpu.server_for("cpu").speed
    assert cpu_speed is not None
    points = [p for slot in build_block_plan(cpu.modes, cpu.load.concurrency,
                                             cpu.load.num_prompts, cpu.effective_design.starts,
                                             cpu.effective_design.blocks, cpu.seed)
              for p in slot.points]
    mean = sum(point_seconds(cpu_speed, cpu, p)[0] for p in points) / len(points)
    cpu_got = estimate(cpu, Cell("cpu", cpu.modes, "run", 1))
    assert cpu_got["mean_point_seconds"] == round(mean, 3) != round(mean, 4)
    passes = len(cpu.modes) * gsm8k_seconds(cpu_speed, cpu)[0]
    assert cpu_got["minutes"]["gsm8k"] == round(passes / 60, 1) != round(passes / 60, 2)
    profiles = sum(profile_seconds(speed, suite, slot.points, cell.modes) for slot in slots)
    assert got["minutes"]["profiles"] == round(profiles / 60, 1)
    assert got["idle_share"] == round(got["idle_share"], 3) and 0 < got["idle_share"] < 0.5


def test_a_block_is_its_warm_up_then_full_waves_and_a_last_partial_wave() -> None:
    """premerge c64 with 100 prompts (16 output tokens): the client's warm-up (one prompt, at
    most 32 output tokens), a wave of 64 and a wave of 36, each its prompt tokens at the prefill
    rate and 15 decode steps at its batch, plus the per-block overhead."""
    suite, speed, points = _premerge()
    top = dataclasses.replace(next(p for p in points if p.concurrency == 64), num_prompts=100)
    load = suite.load
    warm = min(load.warmup_requests, 64)
    assert warm > 0 and load.output_len_at(64) == 16
    expected = (speed.block_overhead_s
                + load.input_len / speed.prefill_tokens_per_s
                + 15 * speed.decode_step_ms(warm) / 1000
                + 64 * load.input_len / speed.prefill_tokens_per_s
                + 15 * speed.decode_step_ms(64) / 1000
                + 36 * load.input_len / speed.prefill_tokens_per_s
                + 15 * speed.decode_step_ms(36) / 1000)
    seconds, waves, steps = point_seconds(speed, suite, top)
    assert seconds == pytest.approx(expected, rel=1e-12)
    assert (waves, steps) == (2, 15 + 2 * 15)
