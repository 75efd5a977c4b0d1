"""plan stage: which servers to start and which load points to run on each, in what order.

Two designs. **In-server** (a suite's ``[design]``): each server start runs every mode, switched
in place between blocks (servegate's mode-switch protocol), ``blocks`` client runs per mode and
concurrency; the modes are interleaved in a seeded, balanced order per start: the start's mode
order is a seeded permutation and every other block round runs it reversed (A B | B A | A B
...), so linear drift within a start cancels between modes, and consecutive blocks of one mode
need no switch. Blocks of the same start and round share their prompts (the client seed), so
modes are paired block by block. **Start per mode** (``[suite].repeats``, the older design): a
mode is a server setting, so every (repeat, mode) is one server start and all its
concurrencies run on it; repeat 0 runs the modes in the suite's order, later repeats in seeded
permutations, so slow drift spreads over all modes instead of masquerading as an effect of one.
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
    start: int | None = None        # in-server design: the server start (None: one per slot)
    block: int = 0                  # in-server design: block round within the start


@dataclass(frozen=True)
class ServerSlot:
    mode: str
    repeat: int
    index: int                      # server start number (0-based)
    points: tuple[PlannedPoint, ...]
    arm: str = ""                   # head-vs-base runs: which sglang tree this server runs
    in_server: bool = False         # every mode inside this server (``mode`` is the first)
    all_modes: tuple[str, ...] = ()  # in-server: the modes, in the start's first-round order

    @property
    def label(self) -> str:
        """``off`` / ``head-off`` (``s0`` / ``head-s0`` for an in-server start): names its
        server log, client files and GSM8K records."""
        name = f"s{self.repeat}" if self.in_server else self.mode
        return f"{self.arm}-{name}" if self.arm else name

    @property
    def modes(self) -> tuple[str, ...]:
        """The modes this server runs, in first-use order."""
        if self.all_modes:
            return self.all_modes
        return tuple(dict.fromkeys(p.mode for p in self.points)) or (self.mode,)


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


def block_mode_orders(modes: tuple[str, ...] | list[str], blocks: int, start: int,
                      seed: int) -> list[list[str]]:
    """Per block round of one start, the order its modes run in: a seeded permutation for the
    start, reversed every other round (balanced: linear drift cancels over round pairs)."""
    rng = random.Random(seed * 104_729 + start)  # pragma: no mutate (any fixed seed per start)
    base = list(modes)
    rng.shuffle(base)
    return [base if r % 2 == 0 else base[::-1] for r in range(blocks)]


def build_block_plan(modes: tuple[str, ...] | list[str],
                     concurrency: tuple[int, ...] | list[int],
                     num_prompts: tuple[int, ...] | list[int], starts: int, blocks: int,
                     seed: int, arms: tuple[str, ...] = ("",)) -> list[ServerSlot]:
    """The in-server design: per (start, arm) one server running every mode. A point's
    ``repeat`` is ``start * blocks + block`` (unique per mode and concurrency); its client seed
    depends on that and the concurrency only, so every mode (and tree) of a block round gets
    the same prompts."""
    if len(concurrency) != len(num_prompts):
        raise ValueError("one prompt count per concurrency is required")
    slots: list[ServerSlot] = []
    order = 0
    for start in range(starts):
        rounds = block_mode_orders(modes, blocks, start, seed)
        for arm, _ in arm_order(arms, ["*"], start, seed):
            points = []
            for block, round_modes in enumerate(rounds):
                repeat = start * blocks + block
                for mode in round_modes:
                    for conc, prompts in zip(concurrency, num_prompts, strict=True):
                        points.append(PlannedPoint(
                            mode=mode, concurrency=conc, num_prompts=prompts, repeat=repeat,
                            order=order, seed=seed + 1000 * repeat + conc, arm=arm,
                            start=start, block=block))
                        order += 1
            slots.append(ServerSlot(mode=points[0].mode, repeat=start, index=len(slots),
                                    points=tuple(points), arm=arm, in_server=True,
                                    all_modes=tuple(rounds[0])))
    return slots


def total_points(slots: list[ServerSlot]) -> int:
    return sum(len(slot.points) for slot in slots)
