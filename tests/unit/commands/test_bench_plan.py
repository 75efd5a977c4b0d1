"""bench's plan selection: head vs base runs as live pairs where the runner holds two servers
(devices split between them), else one start per tree; one-tree runs never pair, but a halves
suite's run two starts at once there."""

from __future__ import annotations

from types import SimpleNamespace

from repo_files import REPO_ROOT

from servegate.commands.bench_plan import record_design, select_plan
from servegate.config import load_suite, suite_path
from servegate.plan.design import (
    HalvesRound,
    LivePair,
    ServerSlot,
    device_env,
    live_pair_layout,
)

AB_CPU = REPO_ROOT / "tests" / "data" / "suites" / "ab-cpu.toml"


TREES = {"base": None, "head": None}


def test_a_cpu_runs_head_vs_base_as_one_live_pair_per_start() -> None:
    suite = load_suite(AB_CPU)
    layout = live_pair_layout(suite, "cpu")
    assert layout.live and (layout.gpus, layout.per_server) == (0, 0)
    [pair] = select_plan(suite, ["off"], dict(TREES), False, "cpu")
    assert isinstance(pair, LivePair) and pair.devices == ()
    assert len(pair.points) == 2 * 4


def test_eight_gpus_hold_two_tp4_servers_with_halves_crossed_over() -> None:
    suite = load_suite(suite_path("nightly"))
    layout = live_pair_layout(suite, "mi355x")
    assert layout.live and (layout.gpus, layout.per_server) == (8, 4), layout
    pairs = select_plan(suite, ["off", "on"], dict(TREES), False, "mi355x")
    assert [p.devices for p in pairs] == [((0, 1, 2, 3), (4, 5, 6, 7)),
                                          ((4, 5, 6, 7), (0, 1, 2, 3))] * 2
    assert device_env("gfx95", (4, 5, 6, 7)) == {"HIP_VISIBLE_DEVICES": "4,5,6,7"}
    assert device_env("nvidia", (0, 1)) == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert device_env("cpu", ()) == {}


def test_too_few_devices_fall_back_to_a_start_per_tree_and_say_so() -> None:
    suite = load_suite(suite_path("premerge"))
    layout = live_pair_layout(suite, "mi325x")           # its smallest CI label has 4 GPUs
    assert not layout.live and "no live pair" in layout.note and "4 GPUs" in layout.note
    slots = select_plan(suite, ["off", "on"], dict(TREES), False, "mi325x")
    assert all(isinstance(s, ServerSlot) and s.in_server for s in slots)
    assert sorted(s.arm for s in slots) == ["base", "head"]


def test_one_tree_runs_are_never_live_pairs() -> None:
    slots = select_plan(load_suite(suite_path("cpu")), ["off", "on"], {"": None}, False, "cpu")
    assert all(isinstance(s, ServerSlot) for s in slots)


def test_the_devices_a_runner_sees_override_the_registry_count() -> None:
    suite = load_suite(suite_path("premerge"))
    assert live_pair_layout(suite, "mi325x", gpus=8).live        # on its 8-GPU label
    assert not live_pair_layout(suite, "mi355x", gpus=6).live    # only 6 visible: fall back


def test_a_one_start_pair_on_gpu_halves_plans_its_crossover_start() -> None:
    """premerge (one start) on 8 GPUs: a second start with the halves swapped is planned (run
    only when the first leaves a gated check undecided); on a CPU, or with starts to spare,
    none."""
    premerge = load_suite(suite_path("premerge"))
    layout = live_pair_layout(premerge, "mi355x")
    assert layout.crossover(1) and not layout.crossover(3) and not layout.crossover(1, (2,))
    first, second = select_plan(premerge, ["off", "on"], dict(TREES), False, "mi355x")
    assert isinstance(second, LivePair) and (first.start, second.start) == (0, 1)
    assert second.devices == first.devices[::-1]                   # the halves swapped
    assert {p.start for p in second.points} == {1} and len(second.points) == len(first.points)
    assert not live_pair_layout(load_suite(AB_CPU), "cpu").crossover(1)
    assert len(select_plan(load_suite(AB_CPU), ["off"], dict(TREES), False, "cpu")) == 1
def test_one_tree_of_a_halves_suite_runs_two_starts_at_once_where_two_servers_fit() -> None:
    """The nightly on an MI355X: rounds of two starts on fixed halves; on a 4-GPU MI325X and
    for a GSM8K-only run (one start): the starts one after another."""
    suite = load_suite(suite_path("nightly"))
    rounds = select_plan(suite, ["off", "on"], {"": None}, False, "mi355x", gpus=8)
    assert all(isinstance(r, HalvesRound) for r in rounds) and len(rounds) == 2
    assert [r.devices for r in rounds] == [((0, 1, 2, 3), (4, 5, 6, 7))] * 2
    for serial in (select_plan(suite, ["off", "on"], {"": None}, False, "mi325x"),
                   select_plan(suite, ["off", "on"], {"": None}, True, "mi355x", gpus=8)):
        assert all(isinstance(s, ServerSlot) for s in serial)


def test_run_json_records_each_starts_half_and_the_halves_devices() -> None:
    suite = load_suite(suite_path("nightly"))
    rounds = select_plan(suite, ["off", "on"], {"": None}, False, "mi355x", gpus=8)
    ctx = SimpleNamespace(suite=suite, run={}, trees={"": None}, console=SimpleNamespace(
        log=lambda *_: None), detected=SimpleNamespace(runner_class="mi355x", gpu_count=8))
    record_design(ctx, ["off", "on"], rounds)  # type: ignore[arg-type]
    design = ctx.run["design"]
    assert design["halves"] is True and design["start_halves"] == [0, 1, 0, 1]
    assert design["devices"] == [{"s0": [0, 1, 2, 3], "s1": [4, 5, 6, 7]},
                                 {"s2": [0, 1, 2, 3], "s3": [4, 5, 6, 7]}]
    assert len(design["order"]) == 4 and design["halves_note"].startswith("halves: two starts")
    ctx.run, ctx.detected = {}, SimpleNamespace(runner_class="mi325x", gpu_count=4)
    record_design(ctx, ["off", "on"], select_plan(suite, ["off", "on"], {"": None}, False,
                                                   "mi325x"))  # type: ignore[arg-type]
    assert "start_halves" not in ctx.run["design"]
    assert ctx.run["design"]["halves_note"].startswith("no halves: mi325x has 4 GPUs")
