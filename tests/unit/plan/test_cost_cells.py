"""Which cells plan prices for a runner (an explicit --modes, a CPU or emulated class: one
``run`` cell with the suite's or the given modes) and the price of a profiled block (a wave at
the suite's highest concurrency, priced like that point's block at that many prompts)."""

from __future__ import annotations

import dataclasses

import pytest

from servegate.config import load_suite, suite_path
from servegate.core import runner_classes
from servegate.plan.cost import PROFILE_OVERHEAD, Cell, cells, point_seconds, profile_seconds
from servegate.plan.design import build_block_plan


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
