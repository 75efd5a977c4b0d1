"""A suite's design as the calibration sees it: starts x blocks x concurrencies per runner, the
gated family taken from the real judge on a skeleton run (:func:`family`), and one calibration
row's keys (:func:`design_row`), shared by every design's calibration."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servegate.calibration.worlds import Noise
from servegate.config import Suite
from servegate.config.judge import JudgeConfig
from servegate.core.runner_classes import REGISTRY
from servegate.judge import sequential
from servegate.judge.baselines import baseline_from_run
from servegate.judge.block_checks import block_pendings
from servegate.judge.evidence import evidence_from_baseline, evidence_from_run
from servegate.plan.cost import sized_suite
from servegate.plan.design import half_of, halves_layout

CLAIM_SIZES = (0.054, 0.095)           # the PR's mean TTFT improvements (conc 4 .. conc 64)
SLOWDOWNS = (0.02, 0.05, 0.10, 0.15, 0.20, 0.30, 0.50, 1.00)


@dataclass(frozen=True)
class BlockDesign:
    suite: str
    runner: str
    starts: int
    blocks: int
    modes: tuple[str, ...]
    concurrencies: tuple[int, ...]
    questions: int
    config: JudgeConfig
    gated: bool
    looks: tuple[int, ...] = ()     # [design] looks (servegate.judge.sequential)
    halves: bool = False            # [design] halves where this runner holds two servers
    look_levels: tuple[float, ...] = ()     # a time cap's interim looks': the planned ones
    spending_power: float | None = None     # [design] spending_power (sequential.spent)

    def levels(self) -> list[float]:
        """Each look's family level as bench takes it, the final look last."""
        own = sequential.nominal_levels(self.looks, self.blocks, 1 - self.config.confidence,
                                        self.spending_power)
        return [*self.look_levels, *own[len(self.look_levels):]]

    def start_halves(self, starts: int) -> list[int] | None:
        """Each start's half as bench records it (None: not halves, or a rolling baseline)."""
        return [half_of(s) for s in range(starts)] if self.halves and starts == self.starts \
            else None


@dataclass(frozen=True)
class SimCheck:
    """One primary check as the simulation decides it."""

    name: str
    kind: str                 # claim_ttft | claim_accuracy | noop_prefill | noop_tost | versus
    metric: str
    mode: str | None
    concs: tuple[int, ...]
    floor: float
    one_sided: bool


def suite_questions(suite: Suite) -> int:
    """GSM8K questions per mode the suite asks ("all" is the whole test split, 1319)."""
    if suite.gsm8k is None:
        return 0
    q = suite.gsm8k.questions
    return 1319 if not isinstance(q, int) else int(q)


def block_design(suite: Suite, runner: str, slower: float = 1.0) -> BlockDesign:
    """The design as bench runs it on ``runner``; sized in time (``[design] max_minutes``),
    on a machine the model profile's speed model describes, ``slower`` times slower."""
    questions = suite_questions(suite)
    gated = runner in REGISTRY and REGISTRY[runner].gated
    # a gated runner night runs off and on (the nightly matrix's MI355X cell); elsewhere the
    # suite's modes
    modes = tuple(m for m in suite.modes if m != "forced") if gated else tuple(suite.modes)
    design = sized_suite(suite, runner, modes, slower).effective_design
    planned = suite.effective_design
    levels = () if design.blocks == planned.blocks else tuple(sequential.nominal_levels(
        planned.looks, planned.blocks, 1 - suite.judge.confidence,
        planned.spending_power)[:len(design.looks)])
    halves = design.halves and halves_layout(suite, runner)[0].live
    return BlockDesign(suite.name, runner, design.starts, design.blocks, modes,
                       tuple(suite.load.concurrency), questions, suite.judge, gated,
                       design.looks, halves, levels, design.spending_power)


def _skeleton(design: BlockDesign) -> dict[str, Any]:
    """The least run.json that yields the design's checks: which checks exist depends on the
    modes, concurrencies, metrics and runner class it holds, never on the values (the gated
    claims include GSM8K's whether or not the run has answers)."""
    metrics = dict.fromkeys({*design.config.metrics, *design.config.aggregate_metrics}, 1.0)
    return {"runner_class": design.runner,      # one block of one start: the run's defaults
            "points": [{"mode": mode, "concurrency": conc, "metrics": metrics}
                       for mode in design.modes for conc in design.concurrencies]}


def family(design: BlockDesign) -> list[SimCheck]:
    """The design's primary family, from the judge's own pending lists."""
    run = _skeleton(design)
    baseline = evidence_from_baseline(baseline_from_run(run, Path("<calibrate>")))  # type: ignore[arg-type]
    pendings = block_pendings(run, evidence_from_run(run), design.config,  # type: ignore[arg-type]
                              baseline=baseline)
    out = []
    for pending in pendings:
        if not (pending.counts and pending.primary):
            continue
        check = pending.evaluate(0.95)
        kind = {"improvement": "claim_ttft", "accuracy": "claim_accuracy",
                "noop-prefill": "noop_prefill", "noop": "noop_tost"}.get(check.claim or "",
                                                                        "versus")
        concs = (tuple(design.config.aggregate_concs(check.metric, list(design.concurrencies)))
                 if check.concurrency is None else (check.concurrency,))
        out.append(SimCheck(check.name, kind, check.metric, check.mode, tuple(concs),
                            float(check.floor or 0.0), pending.one_sided))
    return out


def design_row(suite: str, runner: str, kind: str, *, starts: int, blocks: int,
               server_starts: int, noise: Noise, nights: int, family_size: int,
               aa: tuple[float, list[float]], power_curve: dict[str, float],
               slowdown_80: float | None, **parts: Any) -> dict[str, Any]:
    """One calibration row: the keys every design's row has (so ``calibrate``'s table and JSON
    read any row alike), then the parts only some designs measure, which override the
    defaults (no no-op or claim checks: ``None``)."""
    row: dict[str, Any] = {
        "suite": suite, "runner": runner, "runner_class": runner, "design": kind,
        "starts": starts, "blocks": blocks, "server_starts": server_starts,
        "run_cv": noise.run_cv, "block_cv": noise.block_cv,
        "interaction_cv": noise.interaction_cv, "nights": nights,
        "checks": family_size, "family_size": family_size,
        "aa_false_alarm": aa[0], "aa_false_alarm_ci": aa[1], "noop_false_failure": None,
        "power": {k: power_curve[k] for k in ("0.05", "0.10")},
        "power_curve": power_curve, "slowdown_80": slowdown_80,
        "claim_power": None, "claim_false_confirmation": None,
    }
    row.update(parts)
    return row
