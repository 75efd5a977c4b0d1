"""What every part of ``servegate bench`` shares while a run goes (:class:`Context`: the suite,
the runner, the run folder, the sglang trees) and the error a stage it calls raises."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from servegate.commands.session import RunSession
from servegate.config import Suite
from servegate.config.profiling import ProfileSettings
from servegate.core.errors import ServegateError
from servegate.core.results import Run
from servegate.serve.detect import Detected
from servegate.serve.trees import SglangTree


class BenchError(ServegateError, RuntimeError):
    """A failure in a stage bench calls (e.g. GSM8K), reported as an infrastructure error."""


@dataclass
class Context:
    suite: Suite
    detected: Detected
    session: RunSession
    python: str
    model_dir: str
    console: Console
    trees: dict[str, SglangTree | None] = dataclasses.field(default_factory=lambda: {"": None})
    start_seconds: list[float] = dataclasses.field(default_factory=list)
    # arm -> the arm's tree's gate on this runner class (servegate.serve.gate); an arm not
    # here is read back against released sglang's (the registry's ``gated``)
    gate_open: dict[str, bool] = dataclasses.field(default_factory=dict)
    # the profiled blocks (suite [profile], or bench --profile / --keep-traces)
    profile: ProfileSettings = dataclasses.field(default_factory=ProfileSettings)

    def client_env(self, arm: str) -> dict[str, str] | None:
        """The client imports sglang too: the arm's tree goes first on its import path."""
        tree = self.trees.get(arm)
        return None if tree is None else {**os.environ, "PYTHONPATH": tree.pythonpath()}

    @property
    def run_dir(self) -> Path:
        return self.session.run_dir

    @property
    def run(self) -> Run:
        return self.session.run
