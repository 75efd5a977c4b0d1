"""Bench's gate read-back without an sglang: the unit environment has no sglang (and no torch) to
evaluate a tree's gate in, so bench's ``read_tree`` answers what released sglang's gate does
(the registry's ``gated``). The real evaluation is tested on real trees in
``tests/real_sglang/preflight/test_preflight_gate.py`` and ``tests/real_sglang/scheduler``."""

from __future__ import annotations

import pytest

from servegate.commands import bench
from servegate.core import runner_classes
from servegate.serve.gate import GateReading


def released_gates(python: str, tree: object, runners: list[str]) -> dict[str, GateReading]:
    return {r: GateReading(r, runner_classes.device_arch(r), runner_classes.get(r).gated, True)
            for r in runners}


@pytest.fixture(autouse=True)
def _released_sglang_gates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "read_tree", released_gates)
