"""plan stage: which servers to start and which load points to run on each, in what order.

In-server (``[design]``: every mode in each start, seeded A B | B A block rounds so linear drift
cancels and modes pair block by block), start per mode (``[suite].repeats``, the older design)
and halves (two starts at once on a runner that holds two servers). Why each order:
docs/judge.md (How a check is decided) and docs/serve.md (Two starts at once).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from dataclasses import dataclass

from servegate.config import Suite
from servegate.core import runner_classes


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

    @property
    def label(self) -> str:
        """``off`` / ``head-off`` (``s0`` / ``head-s0`` for an in-server start): names its
        server log, client files and GSM8K records."""
        name = f"s{self.repeat}" if self.in_server else self.mode
        return f"{self.arm}-{name}" if self.arm else name

    @property
    def modes(self) -> tuple[str, ...]:
        """The modes this server runs, in first-use order (in-server: the first round's)."""
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


# arm_order's mode list for an in-server start: one server per arm, whatever its modes
ONE_SERVER = ["*"]  # pragma: no mutate (a placeholder: only the arms' order is used)


def build_block_plan(modes: tuple[str, ...] | list[str],
                     concurrency: tuple[int, ...] | list[int],
                     num_prompts: tuple[int, ...] | list[int], starts: int, blocks: int,
                     seed: int, arms: tuple[str, ...] = ("",),
                     forced_blocks: int | None = None) -> list[ServerSlot]:
    """The in-server design: per (start, arm) one server running every mode. A point's ``repeat``
    is ``start * blocks + block``; its client seed depends on that and the concurrency only, so
    every mode (and tree) of a block round gets the same prompts. ``forced_blocks``: ``forced``
    (an experiment) only in a start's first rounds, so the gated modes' rounds come faster."""
    if len(concurrency) != len(num_prompts):
        raise ValueError("one prompt count per concurrency is required")
    slots: list[ServerSlot] = []
    order = 0
    for start in range(starts):
        rounds = block_mode_orders(modes, blocks, start, seed)
        for arm, _ in arm_order(arms, ONE_SERVER, start, seed):
            points = []
            for block, round_modes in enumerate(rounds):
                repeat = start * blocks + block
                for mode in (m for m in round_modes if m != "forced"
                             or forced_blocks is None or block < forced_blocks):
                    # lengths checked above: strict never fires (so not mutated)
                    for conc, prompts in zip(concurrency, num_prompts, strict=True):  # pragma: no mutate
                        points.append(PlannedPoint(
                            mode=mode, concurrency=conc, num_prompts=prompts, repeat=repeat,
                            order=order, seed=seed + 1000 * repeat + conc, arm=arm,
                            start=start, block=block))
                        order += 1
            slots.append(ServerSlot(mode=points[0].mode, repeat=start, index=len(slots),
                                    points=tuple(points), arm=arm, in_server=True))
    return slots


def total_points(slots: Sequence[ServerSlot | LivePair | HalvesRound]) -> int:
    return sum(len(slot.points) for slot in slots)


@dataclass(frozen=True)
class LivePair:
    """Head vs base with both servers alive for one start: each arm's in-server slot, and the
    blocks of both in the order they run (one server busy at a time, the other idle)."""

    start: int
    slots: tuple[ServerSlot, ...]           # one per arm, in the arms' order
    points: tuple[PlannedPoint, ...]        # both arms' blocks, interleaved
    devices: tuple[tuple[int, ...], ...] = ()   # per slot: its device set (empty: no GPUs)


def pair_block_order(per_arm: dict[str, list[PlannedPoint]], start: int,
                     seed: int) -> list[PlannedPoint]:
    """Both arms' blocks of one start, interleaved: within every (block round, mode) the two
    arms run back to back on the same prompts, the arm going first alternating (A B | B A, from a
    seeded first arm per start), so drift and bursts spread over both trees and each server
    switches mode once per round."""
    arms = list(per_arm)
    rng = random.Random(seed * 15_485_863 + start)  # pragma: no mutate (any fixed seed)
    if rng.random() < 0.5:  # pragma: no mutate (< or <= 0.5: the same fair draw)
        arms.reverse()
    keyed: dict[tuple[int, str, int], dict[str, PlannedPoint]] = {}
    for arm, points in per_arm.items():
        for p in points:
            keyed.setdefault((p.block, p.mode, p.concurrency), {})[arm] = p
    out: list[PlannedPoint] = []
    for index, p in enumerate(per_arm[arms[0]]):
        group = keyed[(p.block, p.mode, p.concurrency)]
        order = arms if index % 2 == 0 else arms[::-1]
        out += [group[arm] for arm in order]
    return [dataclasses.replace(p, order=i) for i, p in enumerate(out)]


def device_split(gpus: int, per_server: int, start: int
                 ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """Disjoint device sets for the two servers of a live pair, swapped every other start
    (crossover: a difference between the GPU halves cancels instead of looking like the
    change); None when the runner has too few devices for two servers."""
    if per_server < 1 or gpus < 2 * per_server:
        return None
    low, high = tuple(range(per_server)), tuple(range(per_server, 2 * per_server))
    return (low, high) if start % 2 == 0 else (high, low)


def build_live_pair_plan(modes: tuple[str, ...] | list[str],
                         concurrency: tuple[int, ...] | list[int],
                         num_prompts: tuple[int, ...] | list[int], starts: int, blocks: int,
                         seed: int, arms: tuple[str, str] = ("base", "head"), *,
                         gpus: int = 0, per_server: int = 0) -> list[LivePair]:
    """The in-server design for head vs base with both trees' servers alive together: per
    start one server per arm (as :func:`build_block_plan`), their blocks interleaved; on GPU
    runners (``gpus`` > 0) each server gets ``per_server`` devices, halves crossed over."""
    slots = build_block_plan(modes, concurrency, num_prompts, starts, blocks, seed, arms=arms)
    pairs: list[LivePair] = []
    order = 0
    for start in range(starts):
        mine = sorted((s for s in slots if s.repeat == start), key=lambda s: arms.index(s.arm))
        points = pair_block_order({s.arm: list(s.points) for s in mine}, start, seed)
        points = [dataclasses.replace(p, order=order + i) for i, p in enumerate(points)]
        order += len(points)
        split = device_split(gpus, per_server, start)
        pairs.append(LivePair(start, tuple(mine), tuple(points), split or ()))
    return pairs


@dataclass(frozen=True)
class HalvesRound:
    """``[design] halves``: two in-server starts at once, one on each half of the runner."""

    slots: tuple[ServerSlot, ...]               # slot i serves on half i
    devices: tuple[tuple[int, ...], ...] = ()   # per half: its devices (a CPU: its cores)

    @property
    def points(self) -> tuple[PlannedPoint, ...]:
        return tuple(p for slot in self.slots for p in slot.points)


def half_of(start: int) -> int:
    """The half a start of a halves design serves on: every round one start on each."""
    return start % 2


def build_halves_plan(modes: tuple[str, ...] | list[str],
                      concurrency: tuple[int, ...] | list[int],
                      num_prompts: tuple[int, ...] | list[int], starts: int, blocks: int,
                      seed: int, devices: tuple[tuple[int, ...], ...] = ()
                      ) -> list[HalvesRound]:
    """The in-server starts (:func:`build_block_plan`) as rounds of two: round ``r`` serves starts
    ``2r`` and ``2r + 1`` at once on halves 0 and 1, which keep their devices every round, so
    each half is one level the judge blocks on (a start's level is centred on its half's)."""
    slots = build_block_plan(modes, concurrency, num_prompts, starts, blocks, seed)
    return [HalvesRound(tuple(slots[r:r + 2]), devices) for r in range(0, starts, 2)]


def flag_value(args: tuple[str, ...] | list[str], flags: tuple[str, ...]) -> str | None:
    """The value of the last of ``flags`` in ``args`` (``--flag V`` or ``--flag=V``): the one
    argparse, and so sglang's server, keeps when a flag is repeated."""
    value = None
    for i, arg in enumerate(args):
        for flag in flags:
            if arg == flag and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(flag + "="):
                value = arg.split("=", 1)[1]
    return value


def expected_schedulers(args: tuple[str, ...] | list[str]) -> int | None:
    """Scheduler processes sglang starts for these launch arguments (tp x pp, times dp for
    plain DP replicas); None when the arguments say something this does not model."""
    try:
        tp, pp, dp = (int(flag_value(args, flags) or 1) for flags in (
            ("--tp-size", "--tp", "--tensor-parallel-size"),
            ("--pp-size", "--pipeline-parallel-size"),
            ("--dp-size", "--dp", "--data-parallel-size")))
    except ValueError:
        return None
    attention_dp = "--enable-dp-attention" in args or any(
        a.startswith("--attn-dp-size") or a.startswith("--attention-data-parallel-size")
        for a in args)
    return tp * pp * (1 if attention_dp else dp)


def device_env(arch: str, devices: tuple[int, ...]) -> dict[str, str]:
    """The device-visibility variable a server of this architecture reads (ROCm: HIP, NVIDIA:
    CUDA; a CPU half: its cores as torch's thread count); nothing without devices."""
    if not devices:
        return {}
    if arch == "cpu":
        return {"OMP_NUM_THREADS": str(len(devices))}
    name = "CUDA_VISIBLE_DEVICES" if arch == "nvidia" else "HIP_VISIBLE_DEVICES"
    return {name: ",".join(str(d) for d in devices)}


@dataclass(frozen=True)
class PairLayout:
    """Whether head and base can be served at once here, and why (said in run and verdict)."""

    live: bool
    gpus: int                   # devices on this runner class (0: a CPU)
    per_server: int             # devices one server of the suite uses
    note: str

    def crossover(self, starts: int, looks: tuple[int, ...] = ()) -> bool:
        """A one-start live pair on GPU halves (no block looks) plans a second start with the
        halves swapped (a faster half cancels), run only when the first leaves a gated check
        undecided (bench_live_pair, sequential.look_at)."""
        return self.live and self.gpus > 0 and starts == 1 and not looks


def live_pair_layout(suite: Suite, runner_class: str, gpus: int = 0) -> PairLayout:
    """A CPU holds two idle sglang servers (``--sleep-on-idle``); a GPU runner needs two
    disjoint device sets of the suite's size (TP x PP x DP ranks). ``gpus``: the devices this
    runner sees (bench's detection); 0 takes the registry's count for the class."""
    cls = runner_classes.get(runner_class)
    if cls.arch == "cpu" or cls.emulated:
        return PairLayout(True, 0, 0, "live pair: both servers on this CPU, one busy at a time")
    gpus = gpus or cls.gpus
    args = list(suite.server_for(runner_class).args)
    per_server = expected_schedulers(args) or 1
    if gpus >= 2 * per_server:
        return PairLayout(True, gpus, per_server,
                          f"live pair: {per_server} of {gpus} GPUs per server, halves "
                          f"crossed over between starts")
    return PairLayout(False, gpus, per_server,
                      f"no live pair: {runner_class} has {gpus} GPUs, two servers need "
                      f"{2 * per_server}; base and head get a start each, one after the other")


def halves_layout(suite: Suite, runner_class: str, gpus: int = 0, cpus: int = 0
                  ) -> tuple[PairLayout, tuple[tuple[int, ...], ...]]:
    """``[design] halves`` here: the layout (live: two servers fit, as a live pair's) and the
    two halves' devices; a CPU's halves are its ``cpus`` cores split in two (each server's
    torch threads), so the two busy servers do not fight over every core."""
    layout = live_pair_layout(suite, runner_class, gpus)
    if layout.live and not layout.gpus:
        per = max(cpus // 2, 1)
        note = f"halves: two servers at once on this CPU, {per} thread(s) each"
        return PairLayout(True, 0, per, note), device_split(2 * per, per, 0) or ()
    if layout.live:
        note = f"halves: two starts at once, {layout.per_server} of {layout.gpus} GPUs each"
        return (dataclasses.replace(layout, note=note),
                device_split(layout.gpus, layout.per_server, 0) or ())
    note = (f"no halves: {runner_class} has {layout.gpus} GPUs, two servers need "
            f"{2 * layout.per_server}; the starts run one after another")
    return dataclasses.replace(layout, note=note), ()
