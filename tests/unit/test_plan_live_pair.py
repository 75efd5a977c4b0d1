"""servegate.plan: head vs base as live pairs (both trees' servers alive for a start)."""

from __future__ import annotations

import itertools
from collections import Counter

from servegate.plan import build_block_plan, build_live_pair_plan, device_split


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
