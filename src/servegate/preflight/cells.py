"""One preflight cell (suite x runner): argv, budget, lengths, replays, and its status (the statuses,
``gate_open`` and which cells gate: docs/serve.md, Preflight)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from servegate.admission.replay import Sglang
from servegate.config.suites import Suite
from servegate.core import runner_classes
from servegate.plan.design import PlannedPoint, build_plan, device_split, live_pair_layout
from servegate.preflight.argv import LaunchRejected, launch_for, parse_server_args
from servegate.preflight.arrivals import PREFLIGHT_MODES, PointReplay, replay_point
from servegate.preflight.budget import Budget, BudgetInvalid, resolve_budget
from servegate.preflight.lengths import draw_lengths
from servegate.preflight.reshape import ReshapeProof, prove
from servegate.serve.gate import GateReading, on_cell, read_loaded

# (budget, input lengths, output lengths, concurrency, mode) -> replay: identical budgets (e.g.
# gfx942 and nvidia), repeats with the same lengths and suites sharing a load replay once
ReplayCache = dict[tuple[Budget, tuple[int, ...], tuple[int, ...], int, str], PointReplay]

FAILING: frozenset[str] = frozenset({"blind", "capped", "misshaped", "invalid"})
ALWAYS_GATING: frozenset[str] = frozenset({"invalid", "misshaped"})


@dataclass(frozen=True)
class ModeSummary:
    saturated_batches: int
    aligned_fraction: float | None     # None without saturated batches
    min_saturated_tokens: int | None
    effective: bool
    points: tuple[PointReplay, ...]
    chunk_size: int

    def contract(self) -> dict[str, Any]:
        return {
            "saturated_batches": self.saturated_batches,
            "aligned_fraction": self.aligned_fraction,
            "min_saturated_tokens": self.min_saturated_tokens,
            "effective": self.effective,
            "points": [
                {"repeat": p.repeat, "concurrency": p.concurrency, "seed": p.seed,
                 "requests": p.requests, "rounds": len(p.batches),
                 **_saturation(p.batches, p.saturated, self.chunk_size)}
                for p in self.points],
        }


@dataclass
class Cell:
    suite: str
    runner: str
    gating: bool
    gate: GateReading               # the tree's gate on this runner's device
    status: str = "ok"
    reasons: list[str] = field(default_factory=list)
    budget: Budget | None = None
    modes: dict[str, ModeSummary] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)
    live_pair: dict[str, Any] | None = None     # head vs base: both servers at once here?
    reshaped: list[ReshapeProof] = field(default_factory=list)

    @property
    def fails(self) -> bool:
        return self.status in ALWAYS_GATING or (self.gating and self.status in FAILING)

    def contract(self) -> dict[str, Any]:
        return {
            "suite": self.suite, "runner": self.runner, "status": self.status,
            "gating": self.gating, "fails": self.fails, "reasons": self.reasons,
            "gate_open": self.gate.gate_open, "on_cell": on_cell(self.gate.gate_open),
            "gate": self.gate.record(),
            "budget": self.budget.contract() if self.budget else None,
            "modes": {name: mode.contract() for name, mode in self.modes.items()},
            "argv": self.argv, "live_pair": self.live_pair,
            "reshaped": [proof.contract() for proof in self.reshaped],
        }


def _saturation(batches: tuple[int, ...], saturated: tuple[bool, ...],
                chunk: int) -> dict[str, Any]:
    sizes = [b for b, s in zip(batches, saturated, strict=True) if s]
    return {"saturated_batches": len(sizes),
            "aligned_fraction": (sum(b == chunk for b in sizes) / len(sizes)) if sizes else None,
            "min_saturated_tokens": min(sizes, default=None)}


def summarise(points: list[PointReplay], chunk: int) -> ModeSummary:
    batches = tuple(b for p in points for b in p.batches)
    saturated = tuple(s for p in points for s in p.saturated)
    stats = _saturation(batches, saturated, chunk)
    return ModeSummary(saturated_batches=stats["saturated_batches"],
                       aligned_fraction=stats["aligned_fraction"],
                       min_saturated_tokens=stats["min_saturated_tokens"],
                       effective=all(p.effective for p in points), points=tuple(points),
                       chunk_size=chunk)


def gates(suite: Suite, gate_open: bool) -> bool:
    """Does the suite expect exact fill to be effective on a runner whose gate is ``gate_open``?"""
    return "forced" in suite.modes or ("on" in suite.modes and gate_open)


def live_pair_report(suite: Suite, runner: str) -> dict[str, Any]:
    """Can ``servegate ab`` hold head and base servers at once on this runner class: its GPU
    count (servegate.core.runner_classes) against two servers of the suite's TP x PP x DP size, and the
    device split of the first start (the halves swap every other start). For an architecture,
    its class with the fewest GPUs (a job for it may land on any)."""
    classes = ([runner_classes.get(runner)] if runner in runner_classes.REGISTRY
               else list(runner_classes.of_arch(runner)))
    if not classes:
        return {"live": False, "gpus": 0, "per_server": None, "devices": None,
                "note": f"architecture {runner} has no registered runner class"}
    fewest = min(classes, key=lambda c: c.gpus).name
    layout = live_pair_layout(suite, fewest)
    split = device_split(layout.gpus, layout.per_server, 0) if layout.live else None
    return {"live": layout.live, "gpus": layout.gpus, "per_server": layout.per_server,
            "devices": {"base": list(split[0]), "head": list(split[1])} if split else None,
            "note": layout.note}


def run_cell(sg: Sglang, suite: Suite, runner: str, cache: ReplayCache | None = None) -> Cell:
    gate = read_loaded(sg.policy, runner)
    cell = Cell(suite=suite.name, runner=runner, gating=gates(suite, gate.gate_open), gate=gate)
    cell.live_pair = live_pair_report(suite, runner)
    launch = launch_for(suite, runner)
    cell.argv = launch.argv
    try:
        server_args = parse_server_args(suite, launch)
        cell.budget = resolve_budget(server_args)
    except LaunchRejected as err:
        return _invalid(cell, str(err))
    except BudgetInvalid as err:
        return _invalid(cell, f"{suite.model.source}: runners.{launch.section}: {err}")
    cache = {} if cache is None else cache
    every = planned_points(suite)
    for mode in PREFLIGHT_MODES:
        points = [_point(sg, suite, cell.budget, planned, mode, cache) for planned in every]
        cell.modes[mode] = summarise(points, cell.budget.chunk_size)
    cell.status, cell.reasons = judge(cell.budget, cell.modes["off"], cell.modes["exact"])
    first = {p.concurrency: p for p in reversed(every)}    # the first repeat's

    def replay(conc: int, output_len: int, mode: str) -> PointReplay:
        assert cell.budget is not None
        return _point(sg, suite, cell.budget, first[conc], mode, cache, output_len)

    cell.reshaped = prove(suite.load.concurrency, suite.load.output_len_at,
                          suite.load.output_len, replay)
    if broken := [proof.reason() for proof in cell.reshaped if not proof.holds]:
        cell.status, cell.reasons = "misshaped", broken + cell.reasons
    return cell


def planned_points(suite: Suite) -> list[PlannedPoint]:
    """Every distinct client load bench runs: one per (repeat, concurrency), with the plan's
    client seed (the prompts are the same for every mode of a repeat)."""
    load = suite.load
    slots = build_plan(suite.modes[:1], load.concurrency, load.num_prompts, suite.repeats,
                       suite.seed)
    return [point for slot in slots for point in slot.points]


def _point(sg: Sglang, suite: Suite, budget: Budget, planned: PlannedPoint, mode: str,
           cache: ReplayCache, output_len: int | None = None) -> PointReplay:
    """One point's replay (cached); ``output_len`` overrides the point's own (the full load's
    outputs, for the reshape proof)."""
    load = suite.load
    if output_len is None:
        output_len = load.output_len_at(planned.concurrency)
    lengths = draw_lengths(planned.seed, load.input_len, output_len, load.range_ratio,
                           planned.num_prompts)
    key = (budget, lengths.inputs, lengths.outputs, planned.concurrency, mode)
    if key not in cache:
        cache[key] = replay_point(sg, budget, lengths.inputs, lengths.outputs,
                                  planned.concurrency, mode)
    replayed = cache[key]
    return replace(replayed, repeat=planned.repeat, seed=planned.seed)


def _invalid(cell: Cell, reason: str) -> Cell:
    cell.status, cell.reasons = "invalid", [reason]
    return cell


def judge(budget: Budget, off: ModeSummary, exact: ModeSummary) -> tuple[str, list[str]]:
    """The cell's status and why, from the budget and the two modes' replays."""
    chunk = budget.chunk_size
    if not exact.effective:
        return "blind", ["sglang's PrefillAdder did not enable exact fill even with the gate open "
                         "(its constructor's own conditions, e.g. dLLM or mamba, turn it off)"]
    capped = []
    if budget.max_prefill_tokens < chunk:
        capped.append(f"max_prefill_tokens {budget.max_prefill_tokens} < chunk size {chunk}: "
                      f"the adder stops every round at {budget.max_prefill_tokens} tokens "
                      f"(set --max-prefill-tokens >= the chunk)")
    if exact.aligned_fraction is not None and exact.aligned_fraction < 1.0:
        capped.append(f"exact fill reaches the chunk in only {exact.aligned_fraction:.0%} of "
                      f"{exact.saturated_batches} saturated rounds (smallest "
                      f"{exact.min_saturated_tokens} of {chunk})")
    if capped:
        return "capped", capped
    same = all(a.batches == b.batches for a, b in zip(off.points, exact.points, strict=True))
    if same or not exact.saturated_batches:
        why = ("off and exact fill admit identical batches at every concurrency"
               if same else "no prefill round is saturated, so exact fill has nothing to fill")
        if same and budget.page_size > 1:
            why += (f" (are all prompt lengths multiples of the page size {budget.page_size}? "
                    f"set [load].range_ratio < 1 or a non-multiple input_len)")
        return "blind", [why]
    return "ok", []
