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
