"""Plan: one server per (repeat, mode), every concurrency on it, modes interleaved by seed."""

from __future__ import annotations

from collections import Counter

from servegate.plan import build_plan, mode_order, total_points

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


# Added for issue 15 (mutation testing): arms, the recorded client seeds, the exact message.

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
    from servegate.plan import arm_order

    firsts = {r: {arm_order(("base", "head"), ["off"], r, seed)[0][0] for seed in range(40)}
              for r in (0, 1, 2)}
    assert firsts == {0: {"base"}, 1: {"base", "head"}, 2: {"base", "head"}}
    assert arm_order(("base", "head"), ["off"], 1, 3) == arm_order(("base", "head"), ["off"], 1, 3)


def test_mismatched_counts_message() -> None:
    import pytest

    with pytest.raises(ValueError) as info:
        build_plan(MODES, (4, 8), (16,), repeats=1, seed=0)
    assert str(info.value) == "one prompt count per concurrency is required"
