"""The judge's result: one run's checks and the context the report writers need (data only)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servegate.config.judge import JudgeConfig
from servegate.core.results import Run
from servegate.judge.checks import Check, CheckVerdict, exit_code, overall_verdict


@dataclass
class Judgement:
    """Everything the report writers need about one judged run."""

    run_dir: Path
    run: Run | None
    config: JudgeConfig
    checks: list[Check]
    baseline_file: Path | None = None
    baseline: dict[str, Any] | None = None
    family_size: int = 0
    per_check_confidence: float = 0.95
    notes: list[str] = field(default_factory=list)
    strict: bool = False
    # the gated family: {"method": "holm" | "bonferroni", "size": m, "checks": [names]}
    family: dict[str, Any] = field(default_factory=dict)
    # what would decide the undecided gated checks (servegate.judge.budget), and its one line
    budget: list[dict[str, Any]] = field(default_factory=list)
    budget_text: str | None = None
    # the one line naming a baseline that was not judged against (other hardware); also a note
    reference: str | None = None

    @property
    def overall(self) -> CheckVerdict:
        return overall_verdict(self.checks)

    @property
    def exit_code(self) -> int:
        return exit_code(self.overall, self.strict)
