"""Plan: one server per (repeat, mode), every concurrency on it, modes interleaved by seed."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from servegate.config import load_suite, suite_path
from servegate.plan import design as plan_module
from servegate.plan.design import (
    PairLayout,
    PlannedPoint,
    block_mode_orders,
    build_block_plan,
    build_halves_plan,
    build_live_pair_plan,
    build_plan,
    device_env,
    device_split,
    halves_layout,
    live_pair_layout,
    mode_order,
    pair_block_order,
    total_points,
)

MODES = ("off", "on", "forced")


def test_first_repeat_keeps_suite_order_then_seeded_permutations() -> None:
    orders = mode_order(MODES, 6, seed=7)
    assert orders[0] == list(MODES)
    assert all(sorted(order) == sorted(MODES) for order in orders)
    assert orders == mode_order(MODES, 6, seed=7)                # reproducible
    assert any(order != list(MODES) for order in orders[1:])     # really interleaved
    assert mode_order(MODES, 6, seed=8) != orders or len(MODES) < 2


def test_points_and_servers() -> None:
    slots = build_plan(MODES, (4, 8), (16, 32), repeats=3, seed=1)
    assert len(slots) == 9                                       # a restart per repeat and mode
    assert total_points(slots) == 18
    assert [s.index for s in slots] == list(range(9))
    counts = Counter((p.mode, p.concurrency) for s in slots for p in s.points)
    assert set(counts.values()) == {3}
    orders = [p.order for s in slots for p in s.points]
    assert orders == list(range(18))
    for slot in slots:
        assert {p.mode for p in slot.points} == {slot.mode}
        assert {p.repeat for p in slot.points} == {slot.repeat}
        assert [(p.concurrency, p.num_prompts) for p in slot.points] == [(4, 16), (8, 32)]


def test_same_prompts_for_every_mode_within_a_repeat() -> None:
    slots = build_plan(MODES, (4,), (16,), repeats=2, seed=3)
    seeds = {(p.repeat, p.mode): p.seed for s in slots for p in s.points}
    assert seeds[(0, "off")] == seeds[(0, "on")] == seeds[(0, "forced")]
    assert seeds[(0, "off")] != seeds[(1, "off")]


def test_mismatched_counts_rejected() -> None:
    try:
        build_plan(MODES, (4, 8), (16,), repeats=1, seed=0)
    except ValueError as err:
        assert "one prompt count per concurrency" in str(err)
    else:
        raise AssertionError("expected ValueError")


# Issue 15: arms, the recorded client seeds, the exact message.

def test_client_seeds_are_the_recorded_formula() -> None:
    """run.json records each point's client seed; these values reproduce earlier runs' prompts
    (suite seed 7: repeat 0 at c4 and c8, repeat 1 at c4)."""
    slots = build_plan(("off",), (4, 8), (16, 32), repeats=2, seed=7)
    assert [(p.repeat, p.concurrency, p.seed) for s in slots for p in s.points] == [
        (0, 4, 11), (0, 8, 15), (1, 4, 1011), (1, 8, 1015)]


def test_single_arm_plan_has_no_arm() -> None:
    slots = build_plan(MODES, (4,), (16,), repeats=1, seed=0)
    assert [s.label for s in slots] == ["off", "on", "forced"]
    assert {s.arm for s in slots} == {p.arm for s in slots for p in s.points} == {""}


def test_head_and_base_alternate_within_each_mode() -> None:
    slots = build_plan(("off", "on"), (4,), (16,), repeats=3, seed=5, arms=("base", "head"))
    assert [s.label for s in slots[:4]] == ["base-off", "head-off", "base-on", "head-on"]
    for slot in slots:
        assert {p.arm for p in slot.points} == {slot.arm}
    per_repeat = [[s for s in slots if s.repeat == r] for r in range(3)]
    for same_repeat in per_repeat:
        for first, second in zip(same_repeat[::2], same_repeat[1::2], strict=True):
            assert first.mode == second.mode and {first.arm, second.arm} == {"base", "head"}
            assert [p.seed for p in first.points] == [p.seed for p in second.points]   # paired


def test_from_the_second_repeat_on_either_arm_may_go_first() -> None:
    """Repeat 0 always starts with base; repeat 1 and later flip by a seeded draw, so across
    seeds both orders occur already in repeat 1."""
    from servegate.plan.design import arm_order

    firsts = {r: {arm_order(("base", "head"), ["off"], r, seed)[0][0] for seed in range(40)}
              for r in (0, 1, 2)}
    assert firsts == {0: {"base"}, 1: {"base", "head"}, 2: {"base", "head"}}
    assert arm_order(("base", "head"), ["off"], 1, 3) == arm_order(("base", "head"), ["off"], 1, 3)


def test_mismatched_counts_message() -> None:
    import pytest

    with pytest.raises(ValueError) as info:
        build_plan(MODES, (4, 8), (16,), repeats=1, seed=0)
    assert str(info.value) == "one prompt count per concurrency is required"


# The in-server plan (servegate.plan.build_block_plan): one server per (start, arm) running
# every mode, ``blocks`` rounds per start in a seeded order reversed every other round, every mode
# of a round on the same prompts.


CONCS, PROMPTS = (2, 4), (8, 12)


def test_one_slot_per_start_and_arm() -> None:
    slots = build_block_plan(MODES, CONCS, PROMPTS, starts=3, blocks=4, seed=11,
                             arms=("base", "head"))
    assert len(slots) == 6
    assert [s.index for s in slots] == list(range(6))
    assert Counter((s.repeat, s.arm) for s in slots) == {
        (start, arm): 1 for start in range(3) for arm in ("base", "head")}
    for slot in slots:
        assert slot.in_server
        assert {p.start for p in slot.points} == {slot.repeat}
        assert {p.arm for p in slot.points} == {slot.arm}
        assert slot.label == f"{slot.arm}-s{slot.repeat}"
        assert sorted(slot.modes) == sorted(MODES)
        assert slot.mode == slot.points[0].mode == slot.modes[0]
    assert total_points(slots) == 6 * 4 * len(MODES) * len(CONCS)
    assert [p.order for s in slots for p in s.points] == list(range(total_points(slots)))


def test_blocks_points_per_mode_and_concurrency_in_every_start() -> None:
    starts, blocks = 2, 5
    slots = build_block_plan(MODES, CONCS, PROMPTS, starts=starts, blocks=blocks, seed=3)
    assert [s.label for s in slots] == ["s0", "s1"]
    for slot in slots:
        counts = Counter((p.mode, p.concurrency) for p in slot.points)
        assert counts == {(m, c): blocks for m in MODES for c in CONCS}
        assert {(p.concurrency, p.num_prompts) for p in slot.points} == set(zip(CONCS, PROMPTS,
                                                                                strict=True))
    repeats = Counter((p.mode, p.concurrency, p.arm, p.repeat) for s in slots for p in s.points)
    assert set(repeats.values()) == {1}                          # unique per (mode, conc, arm)
    for p in (p for s in slots for p in s.points):
        assert p.repeat == p.start * blocks + p.block
        assert 0 <= p.block < blocks


def test_every_mode_of_a_block_round_shares_the_client_seed() -> None:
    slots = build_block_plan(MODES, CONCS, PROMPTS, starts=2, blocks=3, seed=7,
                             arms=("base", "head"))
    seeds: dict[tuple[int, int, int], set[int]] = {}
    for p in (p for s in slots for p in s.points):
        seeds.setdefault((p.start, p.block, p.concurrency), set()).add(p.seed)
    assert all(len(v) == 1 for v in seeds.values())              # every mode and tree
    # the recorded formula: suite seed + 1000 * repeat + concurrency
    assert seeds[(1, 2, 4)] == {7 + 1000 * (1 * 3 + 2) + 4}
    assert len({next(iter(v)) for v in seeds.values()}) == len(seeds)   # rounds differ


def _round_orders(slot) -> list[list[str]]:
    """The modes of each block round of a slot, in execution order."""
    rounds: dict[int, list[str]] = {}
    for p in sorted(slot.points, key=lambda p: p.order):
        modes = rounds.setdefault(p.block, [])
        if p.mode not in modes:
            modes.append(p.mode)
    return [rounds[b] for b in sorted(rounds)]


def test_rounds_alternate_forward_and_reversed() -> None:
    slots = build_block_plan(MODES, CONCS, PROMPTS, starts=4, blocks=5, seed=2)
    for slot in slots:
        rounds = _round_orders(slot)
        first = rounds[0]
        assert sorted(first) == sorted(MODES)
        assert rounds == [first if r % 2 == 0 else first[::-1] for r in range(5)]
        assert list(slot.modes) == first
        # inside a round every concurrency of a mode runs before the next mode (no switch)
        by_order = sorted((p for p in slot.points if p.block == 1), key=lambda p: p.order)
        assert [p.mode for p in by_order] == [m for m in rounds[1] for _ in CONCS]
    assert block_mode_orders(MODES, 5, 0, 2) == _round_orders(slots[0])


def test_seeded_and_reproducible() -> None:
    def orders(seed: int) -> list[list[str]]:
        return [_round_orders(s)[0] for s in
                build_block_plan(MODES, CONCS, PROMPTS, starts=8, blocks=2, seed=seed)]

    assert orders(5) == orders(5)
    assert orders(5) != orders(6)                                 # some start differs
    assert len({tuple(o) for o in orders(5)}) > 1                 # not one order for all starts


def test_arms_take_turns_going_first() -> None:
    """Start 0 runs base first; over the starts both trees go first (a seeded draw per start),
    and within a start both trees run the same round orders (paired block by block)."""
    slots = build_block_plan(("off", "on"), (4,), (16,), starts=16, blocks=2, seed=9,
                             arms=("base", "head"))
    firsts = [slots[2 * start].arm for start in range(16)]
    assert firsts[0] == "base"
    assert set(firsts) == {"base", "head"}
    for start in range(16):
        a, b = slots[2 * start], slots[2 * start + 1]
        assert {a.arm, b.arm} == {"base", "head"} and a.repeat == b.repeat == start
        assert _round_orders(a) == _round_orders(b)
    again = build_block_plan(("off", "on"), (4,), (16,), starts=16, blocks=2, seed=9,
                             arms=("base", "head"))
    assert [s.arm for s in again] == [s.arm for s in slots]


def test_mismatched_prompt_counts_rejected() -> None:
    with pytest.raises(ValueError, match=r"^one prompt count per concurrency is required$"):
        build_block_plan(MODES, (2, 4), (8,), starts=1, blocks=1, seed=0)


def test_the_cpu_suites_block_order_is_the_one_its_runs_recorded() -> None:
    """The seeded order is part of a run's record (run.json ``design.order``): the `cpu` suite's
    seed 20261130 gave forced, off, on | on, off, forced in every run of 2026-12-01, so a rerun
    of an old run's seed repeats its order, the first round as drawn and the second reversed."""
    assert block_mode_orders(MODES, 4, 0, 20261130) == [
        ["forced", "off", "on"], ["on", "off", "forced"]] * 2
    [slot] = build_block_plan(MODES, (2,), (2,), starts=1, blocks=2, seed=20261130)
    assert slot.modes == ("forced", "off", "on") and slot.mode == "forced"


# Head vs base: the interleaved plan, and the judge pairing head with base inside one run.


def test_plan_interleaves_trees_per_mode_with_the_same_prompts() -> None:
    slots = build_plan(["off", "on"], [2, 4], [8, 12], repeats=4, seed=7, arms=("base", "head"))
    assert len(slots) == 4 * 2 * 2
    for repeat in range(4):
        mine = [s for s in slots if s.repeat == repeat]
        for i in range(0, len(mine), 2):       # each mode's two servers run back to back
            assert mine[i].mode == mine[i + 1].mode
            assert {mine[i].arm, mine[i + 1].arm} == {"base", "head"}
            seeds = [[p.seed for p in s.points] for s in (mine[i], mine[i + 1])]
            assert seeds[0] == seeds[1]         # same prompts: paired point by point
    first = [s.arm for s in slots if s.repeat == 0]
    assert first == ["base", "head"] * 2
    later = [(s.mode, s.arm) for s in slots if s.repeat > 0 and slots.index(s) % 2 == 0]
    assert {arm for _, arm in later} == {"base", "head"}    # the first arm varies (seeded)
    again = build_plan(["off", "on"], [2, 4], [8, 12], repeats=4, seed=7, arms=("base", "head"))
    assert [(s.arm, s.mode) for s in again] == [(s.arm, s.mode) for s in slots]
    assert [s.label for s in slots[:2]] == ["base-off", "head-off"]
    assert [p.order for s in slots for p in s.points] == list(range(4 * 2 * 2 * 2))


# ------------------------------------------------------------- head vs base as live pairs

def test_each_start_has_one_server_per_arm_and_every_block_of_both() -> None:
    pairs = build_live_pair_plan(["off", "on"], [2, 4], [2, 4], starts=2, blocks=3, seed=11)
    assert [p.start for p in pairs] == [0, 1]
    for pair in pairs:
        assert [s.arm for s in pair.slots] == ["base", "head"]
        assert [s.label for s in pair.slots] == [f"base-s{pair.start}", f"head-s{pair.start}"]
        counts = Counter((p.arm, p.mode, p.concurrency) for p in pair.points)
        assert set(counts.values()) == {3} and len(counts) == 2 * 2 * 2


def test_arms_run_back_to_back_on_the_same_prompts_first_arm_alternating() -> None:
    [pair] = build_live_pair_plan(["off", "on", "forced"], [2], [2], 1, 4, seed=3)
    points = list(pair.points)
    firsts = []
    for a, b in zip(points[0::2], points[1::2], strict=True):
        assert {a.arm, b.arm} == {"base", "head"}
        assert (a.mode, a.block, a.seed, a.concurrency) == (b.mode, b.block, b.seed,
                                                             b.concurrency)
        firsts.append(a.arm)
    assert all(x != y for x, y in itertools.pairwise(firsts))       # A B | B A | A B ...
    # each server runs its blocks in the in-server design's balanced order (A B C | C B A ...)
    [alone] = [s for s in build_block_plan(["off", "on", "forced"], [2], [2], 1, 4, seed=3,
                                           arms=("base", "head")) if s.arm == "base"]
    for arm in ("base", "head"):
        assert [(p.block, p.mode) for p in points if p.arm == arm] == [
            (p.block, p.mode) for p in alone.points]


def test_orders_are_global_and_unique() -> None:
    pairs = build_live_pair_plan(["off"], [2], [2], 3, 2, seed=5)
    orders = [p.order for pair in pairs for p in pair.points]
    assert orders == list(range(len(orders)))


def _points(arm: str, keys: list[tuple[int, str]]) -> list[PlannedPoint]:
    return [PlannedPoint(mode=mode, concurrency=2, num_prompts=2, repeat=block, order=99,
                         seed=block, arm=arm, start=0, block=block) for block, mode in keys]


def test_pair_order_follows_the_first_arms_blocks_and_numbers_them() -> None:
    """The arm drawn to go first sets the sequence of (block, mode) groups, the other arm's
    copy of each group right beside it, the arms swapping every group; orders are 0..n-1."""
    keys = [(0, "off"), (0, "on"), (1, "on"), (1, "off")]
    for seed in range(6):
        per_arm = {"base": _points("base", keys), "head": _points("head", keys[::-1])}
        out = pair_block_order(per_arm, 0, seed)
        first = out[0].arm
        other = "head" if first == "base" else "base"
        assert [(p.block, p.mode) for p in out[0::2]] == [
            (p.block, p.mode) for p in per_arm[first]]
        assert [p.arm for p in out] == [first, other, other, first] * 2
        assert [(p.block, p.mode) for p in out[1::2]] == [(p.block, p.mode) for p in out[0::2]]
        assert [p.order for p in out] == list(range(8))
    firsts = {pair_block_order({"base": _points("base", keys), "head": _points("head", keys)},
                               start, 7)[0].arm for start in range(12)}
    assert firsts == {"base", "head"}                    # the first arm is a draw per start


def test_one_device_per_server_is_a_split_too() -> None:
    assert device_split(2, 1, 0) == ((0,), (1,))
    assert device_split(2, 1, 1) == ((1,), (0,))
    assert device_split(1, 1, 0) is None


def test_a_live_pair_plan_without_a_server_size_gets_no_devices() -> None:
    pairs = build_live_pair_plan(["off"], [2], [2], 1, 1, seed=1, gpus=8)
    assert pairs[0].devices == ()


def test_device_sets_are_disjoint_and_cross_over_between_starts() -> None:
    assert device_split(8, 4, 0) == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert device_split(8, 4, 1) == ((4, 5, 6, 7), (0, 1, 2, 3))
    assert device_split(8, 2, 2) == ((0, 1), (2, 3))
    assert device_split(4, 4, 0) is None and device_split(7, 4, 0) is None
    assert device_split(8, 0, 0) is None
    pairs = build_live_pair_plan(["off"], [2], [2], 2, 1, seed=1, gpus=8, per_server=4)
    assert [p.devices for p in pairs] == [((0, 1, 2, 3), (4, 5, 6, 7)),
                                          ((4, 5, 6, 7), (0, 1, 2, 3))]
    assert build_live_pair_plan(["off"], [2], [2], 1, 1, seed=1)[0].devices == ()


@pytest.mark.parametrize(("args", "expected"), [
    ((), 1),                                                     # one scheduler by default
    (("--device", "cpu"), 1),
    (("--tp", "4"), 4),
    (("--tp-size", "2"), 2),
    (("--tensor-parallel-size=8",), 8),
    (("--tp=4", "--pp-size", "2"), 8),
    (("--pipeline-parallel-size=3", "--tp", "2"), 6),
    (("--dp", "2", "--tp", "4"), 8),                             # plain DP: replicas
    (("--dp-size=3",), 3),
    (("--data-parallel-size", "2"), 2),
    (("--tp", "4", "--dp", "2", "--enable-dp-attention"), 4),    # attention DP: inside TP
    (("--tp", "4", "--dp", "2", "--attn-dp-size", "2"), 4),
    (("--tp", "4", "--dp", "2", "--attention-data-parallel-size=2"), 4),
    (("--tp",), 1),                                              # a flag with no value after it
    (("--model", "m", "--tp"), 1),
    (("--tp", "four"), None),                                    # not modelled: say so
    (("--pp-size=x",), None),
    (("--tp=4=2",), None),                                       # one value after the first =
    (("--tp", "4", "--tp-size", "2"), 2),                        # repeated: the last, as argparse
    (("--dp-size=2", "--dp", "3", "--tp", "2"), 6),
])
def test_expected_schedulers_counts_tp_pp_and_plain_dp(args: tuple[str, ...],
                                                       expected: int | None) -> None:
    from servegate.plan.design import expected_schedulers

    assert expected_schedulers(args) == expected
    assert expected_schedulers(list(args)) == expected


# ------------------------------------------------------------- can this runner hold a pair?

def test_a_cpu_holds_a_live_pair_and_says_how() -> None:
    suite = load_suite(suite_path("premerge"))
    for runner in ("cpu", "cpu-gfx95"):
        assert live_pair_layout(suite, runner) == PairLayout(
            True, 0, 0, "live pair: both servers on this CPU, one busy at a time")


def test_eight_gpus_hold_two_tp4_servers_and_the_note_says_so() -> None:
    suite = load_suite(suite_path("premerge"))
    assert live_pair_layout(suite, "mi355x") == PairLayout(
        True, 8, 4, "live pair: 4 of 8 GPUs per server, halves crossed over between starts")
    assert live_pair_layout(suite, "mi355x", gpus=16).gpus == 16     # the detected count wins


def test_too_few_gpus_name_the_class_and_what_two_servers_need() -> None:
    suite = load_suite(suite_path("premerge"))
    assert live_pair_layout(suite, "mi325x") == PairLayout(
        False, 4, 4, "no live pair: mi325x has 4 GPUs, two servers need 8; base and head get "
                     "a start each, one after the other")


def test_unmodelled_server_arguments_count_as_one_device_per_server(
        monkeypatch: pytest.MonkeyPatch) -> None:
    suite = load_suite(suite_path("premerge"))
    monkeypatch.setattr(plan_module, "expected_schedulers", lambda args: None)
    assert live_pair_layout(suite, "mi325x", gpus=2) == PairLayout(
        True, 2, 1, "live pair: 1 of 2 GPUs per server, halves crossed over between starts")


def test_flag_value_is_the_last_occurrence_and_none_when_absent() -> None:
    from servegate.plan.design import flag_value

    args = ["--tp", "2", "--dp-size=4", "--tp=8", "--dp-size", "2"]
    assert flag_value(args, ("--tp", "--tensor-parallel-size")) == "8"
    assert flag_value(args, ("--dp-size", "--dp")) == "2"
    assert flag_value(args, ("--ep-size",)) is None
    assert flag_value(["--tp"], ("--tp",)) is None            # a flag without its value


# ------------------------------------------------------------- two starts at once (halves)

def test_halves_run_the_in_server_starts_two_at_a_time_on_fixed_halves() -> None:
    """Rounds of two starts (s0 + s1, s2 + s3), start s on half s % 2, each start exactly
    the in-server plan's slot; the halves keep their devices every round."""
    devices = ((0, 1, 2, 3), (4, 5, 6, 7))
    rounds = build_halves_plan(MODES, [2, 4], [2, 4], 4, 3, 7, devices)
    slots = build_block_plan(MODES, [2, 4], [2, 4], 4, 3, 7)
    assert [[s.repeat for s in r.slots] for r in rounds] == [[0, 1], [2, 3]]
    assert [s for r in rounds for s in r.slots] == slots
    assert all(r.devices == devices for r in rounds)
    assert rounds[1].points == slots[2].points + slots[3].points
    assert total_points(rounds) == total_points(slots)


def test_the_halves_layout_splits_gpus_or_a_cpus_cores_and_says_where_it_cannot() -> None:
    suite = load_suite(suite_path("nightly"))
    layout, devices = halves_layout(suite, "mi355x")
    assert layout.live and devices == ((0, 1, 2, 3), (4, 5, 6, 7))
    assert layout.note == "halves: two starts at once, 4 of 8 GPUs each"
    layout, devices = halves_layout(suite, "mi325x")
    assert not layout.live and devices == ()
    assert "no halves: mi325x has 4 GPUs, two servers need 8" in layout.note
    layout, devices = halves_layout(load_suite(suite_path("cpu")), "cpu", cpus=2)
    assert layout.live and devices == ((0,), (1,)) and "1 thread(s) each" in layout.note
    assert device_env("cpu", (2, 3)) == {"OMP_NUM_THREADS": "2"}
