"""The gate's architectures come from the code under test (issue 31 item 3): preflight reads
each runner's ``gate_open`` from the tree's own ``_use_exact_chunk_fill`` on the runner's
emulated device, so a tree that opens the gate on gfx942 makes the gfx942 cell a claim cell
without any registry edit; released 0.5.23 keeps it a no-op cell; gfx1250 is an architecture
whose device the double emulates."""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from servegate_cli import run_servegate
from sglang_trees import GATE_GFX942, edited_copy, release_tree

pytestmark = pytest.mark.sglang


def _cells(tree: Path, *runners: str) -> dict[str, dict]:
    args = [a for r in runners for a in ("--runner", r)]
    proc = run_servegate("preflight", "--suite", "premerge", *args, "--sglang-src", tree,
                         "--json", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    document = json.loads(proc.stdout)
    assert document["sglang_src"]["path"] == str(tree)
    return {cell["runner"]: cell for cell in document["cells"]}


def test_a_tree_that_opens_the_gate_on_gfx942_makes_its_cells_claim_cells(tmp_path: Path) -> None:
    released = release_tree(version("sglang"))
    opened = edited_copy(released, tmp_path / "sglang-gfx942-gate", GATE_GFX942)

    cells = _cells(opened, "gfx942", "mi325x", "nvidia")
    for runner in ("gfx942", "mi325x"):            # the architecture and a class of it
        cell = cells[runner]
        assert (cell["gate_open"], cell["on_cell"], cell["gating"]) == (True, "claim", True)
        assert cell["gate"] == {"runner": runner, "device_arch": "gfx942:sramecc+:xnack-",
                                "gate_open": True, "has_gate": True}
        assert cell["status"] == "ok"
    assert (cells["nvidia"]["gate_open"], cells["nvidia"]["on_cell"]) == (False, "no-op")

    # servegate plan reads the same gate: gfx942 open there, so no nightly forced experiment
    proc = run_servegate("plan", "--suite", "nightly", "--runner", "gfx942", "--workflow",
                         "nightly", "--sglang-src", opened, "--json", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [(c["role"], c["gate_open"]) for c in json.loads(proc.stdout)["cells"]] == [
        ("gate", True)]

    before = _cells(released, "gfx95", "gfx942")   # the unmodified tree: gfx95 only
    assert (before["gfx942"]["gate_open"], before["gfx942"]["on_cell"]) == (False, "no-op")
    assert (before["gfx95"]["gate_open"], before["gfx95"]["on_cell"]) == (True, "claim")
    # every other key of a cell is today's contract, unchanged by the gate
    assert set(cells["gfx942"]) == set(before["gfx942"])
    assert {"suite", "runner", "status", "gating", "fails", "reasons", "budget", "modes",
            "argv", "live_pair"} <= set(cells["gfx942"])


def test_gfx1250_is_an_architecture_the_gate_is_read_on(tmp_path: Path) -> None:
    """As bench reads it (the double's probe in a child of the servers' Python, the tree first on
    its path): the released gate stays closed on gfx1250; a tree whose gate also accepts
    gfx1250 (sglang's own is_gfx1250_supported) opens it there, and only there."""
    from servegate.serve.gate import read_tree
    from servegate.serve.trees import resolve_tree

    released = release_tree(version("sglang"))
    gate_file, (old, _) = next(iter(GATE_GFX942.items()))
    opened = edited_copy(released, tmp_path / "sglang-gfx1250-gate", {
        gate_file: (old, "    from sglang.srt.utils import is_gfx1250_supported\n\n"
                         "    return envs.SGLANG_EXACT_CHUNK_FILL.get() and (\n"
                         "        is_gfx95_supported() or is_gfx1250_supported())\n")})
    runners = ["gfx1250", "gfx942", "mi355x", "cpu", "h100"]
    after = read_tree(sys.executable, resolve_tree(opened), runners)
    assert {r: g.gate_open for r, g in after.items()} == {
        "gfx1250": True, "gfx942": False, "mi355x": True, "cpu": False, "h100": False}
    assert after["gfx1250"].device_arch == "gfx1250" and after["gfx1250"].has_gate
    before = read_tree(sys.executable, resolve_tree(released), ["gfx1250", "mi355x"])
    assert {r: g.gate_open for r, g in before.items()} == {"gfx1250": False, "mi355x": True}
