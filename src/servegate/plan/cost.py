"""What a suite costs on a runner class before it is booked: starts, blocks, waves, tokens and
GSM8K questions counted from the real plan, priced by the model profile's speed model
(``[runners.<key>.speed]``). The wave pricing, the halves and the minutes/GPU keys
(``serving_minutes``, ``wall_minutes``, ``gpu_minutes``, ``idle_share``...): docs/serve.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from servegate.config import Suite
from servegate.config.speed import SpeedModel
from servegate.core import runner_classes
from servegate.plan.design import (
    PlannedPoint,
    build_block_plan,
    half_of,
    halves_layout,
    live_pair_layout,
)

# sglang's benchmark/serving.py: warm-up requests copy the first prompt, output capped at 32.
CLIENT_WARMUP_OUTPUT = 32
# A GSM8K few-shot prompt: ~150 tokens per worked example plus the question (5 shots made
# ~900-token prompts on the CPU profile: docs/serve.md, suites/cpu.toml's [gsm8k] comment).
GSM8K_TOKENS_PER_SHOT = 150
GSM8K_TEST_QUESTIONS = 1319
# Suites a workflow runs head vs base (two trees): ci/workflows/premerge.yml runs
# `servegate ab --suite premerge` (tests/unit/plan/test_cost.py checks the workflow says so).
HEAD_VS_BASE_SUITES = ("premerge",)
# Suites a workflow runs on a one-GPU runner label (ci/workflows/premerge.yml's smoke job): the
# job books the server's GPUs, not the class's usual 8 (tests/unit/plan/test_cost.py checks the
# workflow says so).
ONE_GPU_SUITES = ("smoke",)
# A profiled block (servegate.commands.bench_profile: one wave at the highest concurrency per
# mode, tree and start, under sglang's profiler, then the trace's export and reduction) costs a
# block times this. Measured on the 2-core CPU only; a GPU trace's export grows with its kernel
# count, so GPU nights should replace it with their own timings.profiles.
PROFILE_OVERHEAD = 2.0
PROFILE_OVERHEAD_SOURCE = ("measured 2026-12-03 on the 2-core CPU (suites/cpu.toml, --profile, "
                           "export and reduction included): quiet, profiled blocks 8.7 s (off) "
                           "and 12.6 s (forced) against the same modes' measured blocks "
                           "3.7-5.0 s and 7.0-7.1 s; busy, 58 s and 107 s against 42-61 s and "
                           "90-118 s")


class CostError(ValueError):
    """A cell that cannot be priced (no speed model for its runner section)."""


@dataclass(frozen=True)
class Cell:
    """One CI job: a suite on one runner class in some modes, one tree or head vs base."""

    runner_class: str
    modes: tuple[str, ...]
    role: str                       # "gate", "experiment" or "run" (an explicit --modes)
    trees: int                      # 1: bench; 2: head vs base (servegate ab)


def cells(suite: Suite, runner: str, workflow: str, modes: tuple[str, ...] | None = None,
          gate_open: bool | None = None) -> list[Cell]:
    """The CI cells a workflow runs for ``runner`` (an architecture picks its CI class): the
    gate cell, plus nightly's ``forced`` experiment where the gate is off (``gate_open``: the
    tree's gate on the class, servegate.serve.gate; None: released sglang's); CPU classes and
    an explicit ``modes`` give one cell."""
    cls = _runner_class(runner)
    trees = 2 if workflow == "premerge" else 1
    if modes is not None:
        return [Cell(cls.name, modes, "run", trees)]
    if cls.arch == "cpu" or cls.emulated:
        return [Cell(cls.name, suite.modes, "run", trees)]
    out = [Cell(cls.name, cls.gate_modes, "gate", trees)]
    experiment = cls.experiment_modes if gate_open is None else (
        None if gate_open else ("off", "forced"))
    if workflow == "nightly" and experiment:
        out.append(Cell(cls.name, experiment, "experiment", trees))
    return out


def _runner_class(runner: str) -> runner_classes.RunnerClass:
    """A class by name, or an architecture's first class with a CI runner label (else its
    first class)."""
    if runner in runner_classes.REGISTRY:
        return runner_classes.REGISTRY[runner]
    real = runner_classes.of_arch(runner)
    if real:
        return next((cls for cls in real if cls.ci_labels), real[0])
    raise runner_classes.UnknownRunner(
        f"--runner {runner!r}: not a runner class or architecture (known: "
        f"{', '.join(runner_classes.names())})")


@dataclass
class Tally:
    """Counts and seconds accumulated over a cell's plan."""

    points: int = 0
    waves: int = 0
    requests: int = 0
    prefill_tokens: int = 0
    decode_steps: int = 0
    warmup_points: int = 0
    gsm8k_questions: int = 0
    block_s: float = 0.0
    warmup_s: float = 0.0
    gsm8k_s: float = 0.0


def point_seconds(speed: SpeedModel, suite: Suite, point: PlannedPoint) -> tuple[float, int, int]:
    """One block's client run: (seconds, waves, decode steps), client warm-up included."""
    load = suite.load
    c, n = point.concurrency, point.num_prompts
    output_len = load.output_len_at(c)
    waves = math.ceil(n / c)
    seconds, steps = speed.block_overhead_s, 0
    warm = min(load.warmup_requests, c)
    if warm:
        warm_steps = min(output_len, CLIENT_WARMUP_OUTPUT) - 1
        seconds += load.input_len / speed.prefill_tokens_per_s
        seconds += warm_steps * speed.decode_step_ms(warm) / 1000
        steps += warm_steps
    for wave in range(waves):
        size = min(c, n - wave * c)
        seconds += size * load.input_len / speed.prefill_tokens_per_s
        seconds += (output_len - 1) * speed.decode_step_ms(size) / 1000
        steps += output_len - 1
    return seconds, waves, steps


def gsm8k_seconds(speed: SpeedModel, suite: Suite) -> tuple[float, int]:
    """One GSM8K pass (one mode of one tree): (seconds, questions)."""
    g = suite.gsm8k
    if g is None:
        return 0.0, 0
    questions = g.questions or GSM8K_TEST_QUESTIONS
    prompt = GSM8K_TOKENS_PER_SHOT * (g.shots + 1)
    output = min(speed.gsm8k_output_tokens, g.max_tokens)
    seconds = 0.0
    for wave in range(math.ceil(questions / g.concurrency)):
        size = min(g.concurrency, questions - wave * g.concurrency)
        seconds += size * prompt / speed.prefill_tokens_per_s
        seconds += output * speed.decode_step_ms(size) / 1000
    return seconds, questions


def profile_seconds(speed: SpeedModel, suite: Suite, slot_points: tuple[PlannedPoint, ...],
                    modes: tuple[str, ...]) -> float:
    """One server start's profiled blocks: a wave at the highest concurrency per mode, each a
    block's price times PROFILE_OVERHEAD (the profiler and the trace export)."""
    top = max(suite.load.concurrency)
    shape = next((p for p in slot_points if p.concurrency == top), slot_points[0])
    one, _, _ = point_seconds(speed, suite, replace(shape, num_prompts=top))
    return len(modes) * PROFILE_OVERHEAD * one


def estimate(suite: Suite, cell: Cell, with_accuracy: bool = True,
             measured_scale: float | None = None, measured_load_s: float | None = None,
             with_profile: bool | None = None) -> dict[str, Any]:
    """The cell's counts and minutes (``plan --json``'s per-cell record). ``measured_scale``
    multiplies the speed model's serving seconds and ``measured_load_s`` replaces its model
    load, both from the runner's measured nights (servegate.commands.plan)."""
    profile = suite.server_for(cell.runner_class)
    speed = profile.speed
    if speed is None:
        raise CostError(f"{suite.model.source}: no [runners.<section>.speed] table for "
                        f"{cell.runner_class} (the section servegate serves it with): "
                        f"servegate plan prices a suite with it")
    suite = (sized_suite(suite, cell.runner_class, cell.modes, measured_scale or 1.0)
             if cell.trees == 1 else replace(suite, design=suite.design.counted()))
    design = suite.effective_design
    arms = ("base", "head") if cell.trees == 2 else ("",)
    slots = build_block_plan(cell.modes, suite.load.concurrency, suite.load.num_prompts,
                             design.starts, design.blocks, suite.seed, arms=arms,
                             forced_blocks=design.forced_blocks)
    tally = Tally()
    profiled = suite.profile.enabled if with_profile is None else with_profile
    profiled_blocks, profile_s = 0, 0.0
    busy: list[float] = []              # per server start: its serving seconds
    for slot in slots:
        own = 0.0
        if profiled and slot.points:
            profiled_blocks += len(cell.modes)
            own = profile_seconds(speed, suite, slot.points, cell.modes)
            profile_s += own
        first_of_mode: dict[str, PlannedPoint] = {}
        for point in slot.points:
            seconds, waves, steps = point_seconds(speed, suite, point)
            tally.points += 1
            tally.block_s += seconds
            own += seconds
            tally.waves += waves
            tally.requests += point.num_prompts
            tally.prefill_tokens += point.num_prompts * suite.load.input_len
            tally.decode_steps += steps
            first_of_mode.setdefault(point.mode, point)
        for point in first_of_mode.values():        # [design] warmup_blocks per mode
            seconds, _, _ = point_seconds(speed, suite, point)
            tally.warmup_points += design.warmup_blocks
            tally.warmup_s += design.warmup_blocks * seconds
            own += design.warmup_blocks * seconds
        busy.append(own)
    layout = live_pair_layout(suite, cell.runner_class)
    live = cell.trees == 2 and layout.live
    halves = design.halves and cell.trees == 1 and halves_layout(suite, cell.runner_class)[0].live
    one_pass_s, questions = gsm8k_seconds(speed, suite) if with_accuracy else (0.0, 0)
    for index, slot in enumerate(slots):            # GSM8K: in the first start (per tree),
        if slot.repeat == 0 or (halves and slot.repeat == 1):    # a halves' modes split
            passes = len(cell.modes[half_of(slot.repeat)::2]) if halves else len(cell.modes)
            busy[index] += passes * one_pass_s
            tally.gsm8k_s += passes * one_pass_s
            tally.gsm8k_questions += passes * questions
    server_starts = len(slots)
    load_s = measured_load_s if measured_load_s is not None else speed.model_load_s
    scale = measured_scale or 1.0
    if halves:                                      # rounds of two, both busy at once
        rounds = [busy[i:i + 2] for i in range(0, len(busy), 2)]
        serving_s, loads = scale * sum(max(r) for r in rounds), len(rounds)
    else:
        serving_s, loads = scale * sum(busy), design.starts if live else server_starts
    wall_s = serving_s + loads * load_s
    cls = runner_classes.get(cell.runner_class)
    per_server = layout.per_server or 1
    notes = []
    if profiled_blocks:
        notes.append(f"{profiled_blocks} profiled block(s) (kernel attribution, never points): "
                     f"a wave at c{max(suite.load.concurrency)} each, priced at "
                     f"{PROFILE_OVERHEAD:g}x a block ({PROFILE_OVERHEAD_SOURCE})")
    if "dtype" in suite.server_overrides:
        notes.append(f"the suite serves dtype {suite.server_overrides['dtype']}; the speed "
                     f"figures are the profile's (its own dtype): read the minutes as a rough "
                     f"guide until this suite's runs are in the history store")
    whole_runner = per_server if suite.name in ONE_GPU_SUITES else max(cls.gpus, per_server)
    gpus_held = 0 if cls.arch == "cpu" or cls.emulated else whole_runner
    used_s = per_server * scale * sum(busy) if gpus_held else 0.0
    return {
        "runner_class": cell.runner_class, "modes": list(cell.modes), "role": cell.role,
        "trees": cell.trees, "live_pair": live, "halves": halves,
        "server_starts": server_starts, "blocks": tally.points // len(suite.load.concurrency),
        "points": tally.points,
        "warmup_points": tally.warmup_points, "waves": tally.waves,
        "requests": tally.requests, "prefill_tokens": tally.prefill_tokens,
        "decode_steps": tally.decode_steps, "gsm8k_questions": tally.gsm8k_questions,
        "mean_point_seconds": round(tally.block_s / tally.points, 3) if tally.points else 0.0,
        "minutes": {"model_loads": round(loads * load_s / 60, 1),
                    "blocks": round(scale * tally.block_s / 60, 1),
                    "warmups": round(scale * tally.warmup_s / 60, 1),
                    "gsm8k": round(scale * tally.gsm8k_s / 60, 1),
                    "profiles": round(scale * profile_s / 60, 1)},
        "profiled_blocks": profiled_blocks,
        "serving_minutes": round(serving_s / 60, 1),
        "wall_minutes": round(wall_s / 60, 1),
        "gpus_held": gpus_held,
        "gpu_minutes": round(gpus_held * wall_s / 60, 1),
        "gpu_minutes_used": round(used_s / 60, 1),
        "idle_share": round(1.0 - used_s / (gpus_held * serving_s), 3)
        if gpus_held and serving_s else None,
        "speed": speed.figures(),
        "notes": notes,
    }


def sized_suite(suite: Suite, runner_class: str, modes: tuple[str, ...],
                scale: float = 1.0) -> Suite:
    """The suite as bench sizes it in time (waves per block, the blocks of the last look within
    the cap) on a machine the speed model describes, ``scale`` times slower."""
    design, load = suite.effective_design, suite.load
    speed = suite.server_for(runner_class).speed
    if speed is None or (design.min_block_seconds is None and design.max_minutes is None):
        return suite
    overhead = scale * speed.block_overhead_s
    prompts = []
    for c, n in zip(load.concurrency, load.num_prompts, strict=True):
        point = PlannedPoint("off", c, n, 0, 0, 0)
        wave = scale * point_seconds(speed, suite, point)[0] - overhead
        waves = 1 if design.min_block_seconds is None else max(1, math.ceil(
            (design.min_block_seconds - overhead) / wave))
        prompts.append(n * waves)
    sized = replace(suite, load=replace(load, num_prompts=tuple(prompts)))
    if design.max_minutes is not None:
        block_s = sum(scale * point_seconds(speed, sized, PlannedPoint("off", c, n, 0, 0, 0))[0]
                      for c, n in zip(load.concurrency, prompts, strict=True))
        forced = "forced" in modes and design.forced_blocks is not None

        def start_s(k: int) -> float:        # k rounds of a start: forced in its first ones
            return block_s * (k * (len(modes) - forced) + forced * min(
                k, design.forced_blocks or 0))
        schedule = (*design.looks, design.blocks)
        fits = [k for k in schedule if (design.starts - 1) * start_s(design.blocks)
                + start_s(k) <= 60.0 * design.max_minutes]
        blocks = max(fits or schedule[:1])
        design = replace(design, blocks=blocks, looks=tuple(k for k in design.looks
                                                            if k < blocks))
    return replace(sized, design=design)
