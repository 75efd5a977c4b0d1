"""plan stage: which servers to start and which load points to run on each, in what order.

A mode is a server setting (env at launch), so every (repeat, mode) is one server start and all
its concurrencies run on it. Repeat 0 runs the modes in the suite's order; every later repeat
runs them in a permutation drawn from the suite's seed, so slow drift of the machine (thermal,
neighbours, caches) spreads over all modes instead of masquerading as an effect of one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class PlannedPoint:
    mode: str
    concurrency: int
    num_prompts: int
    repeat: int
    order: int                      # global execution index (0-based)
    seed: int                       # client seed: same prompts for every mode of a repeat
    arm: str = ""                   # head-vs-base runs: "base" | "head" (the sglang tree)


@dataclass(frozen=True)
class ServerSlot:
    mode: str
    repeat: int
    index: int                      # server start number (0-based)
    points: tuple[PlannedPoint, ...]
    arm: str = ""                   # head-vs-base runs: which sglang tree this server runs

    @property
    def label(self) -> str:
        """``off`` / ``head-off``: names its server log, client files and GSM8K records."""
        return f"{self.arm}-{self.mode}" if self.arm else self.mode


def mode_order(modes: tuple[str, ...] | list[str], repeats: int, seed: int) -> list[list[str]]:
    """Per repeat, the order the modes run in: as given first, then seeded permutations."""
    rng = random.Random(seed)
    orders = [list(modes)]
    for _ in range(1, repeats):
        order = list(modes)
        rng.shuffle(order)
        orders.append(order)
    return orders


def arm_order(arms: tuple[str, ...], modes_this_repeat: list[str], repeat: int,
              seed: int) -> list[tuple[str, str]]:
    """(arm, mode) server order within a repeat: base and head alternate inside each mode
    (repeat 0: base first), the arm that goes first flipping by a seeded draw per mode, so
    neither tree systematically runs on the warmer (or the more loaded) machine."""
    if arms == ("",):  # pragma: no mutate (the general branch gives the same list for one arm)
        return [("", mode) for mode in modes_this_repeat]
    rng = random.Random(seed * 7919 + repeat)  # pragma: no mutate (any fixed seed per repeat)
    out = []
    for mode in modes_this_repeat:
        pair = list(arms)
        flip = rng.random() < 0.5  # pragma: no mutate (< or <= 0.5: the same fair draw)
        if repeat > 0 and flip:
            pair.reverse()
        out += [(arm, mode) for arm in pair]
    return out


def build_plan(modes: tuple[str, ...] | list[str], concurrency: tuple[int, ...] | list[int],
               num_prompts: tuple[int, ...] | list[int], repeats: int,
               seed: int, arms: tuple[str, ...] = ("",)) -> list[ServerSlot]:
    """Every server start and its points; ``arms`` ("base", "head") runs each server once per
    sglang tree, interleaved (same prompts: the client seed depends on repeat and concurrency
    only, so base and head are paired point by point)."""
    if len(concurrency) != len(num_prompts):
        raise ValueError("one prompt count per concurrency is required")
    slots: list[ServerSlot] = []
    order = 0
    for repeat, modes_this_repeat in enumerate(mode_order(modes, repeats, seed)):
        for arm, mode in arm_order(arms, modes_this_repeat, repeat, seed):
            points = []
            # equivalent: strict or not, the lengths were checked equal above
            for conc, prompts in zip(concurrency, num_prompts, strict=True):  # pragma: no mutate
                points.append(PlannedPoint(mode=mode, concurrency=conc, num_prompts=prompts,
                                           repeat=repeat, order=order,
                                           seed=seed + 1000 * repeat + conc, arm=arm))
                order += 1
            slots.append(ServerSlot(mode=mode, repeat=repeat, index=len(slots),
                                    points=tuple(points), arm=arm))
    return slots


def total_points(slots: list[ServerSlot]) -> int:
    return sum(len(slot.points) for slot in slots)
