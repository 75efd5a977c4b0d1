"""``--sglang-src``: resolving a tree (checkout or unpacked package; version, git commit, dirty)
and the admission commands that take one."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from repo_files import REPO_ROOT
from servegate_cli import run_servegate
from sglang_trees import ASR_FIX, edited_copy, release_tree

REPO = REPO_ROOT


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return run_servegate("admission", *args)


REPLAY = ["replay", "--page-size", "64", "--chunk-size", "16384", "--prompt-lens",
          "3000,5000,7000,9000", "--json"]


@pytest.mark.sglang
def test_forced_on_a_tree_without_the_gate_exits_2_before_importing(tmp_path: Path) -> None:
    old = edited_copy(release_tree("0.5.19"), tmp_path / "sglang-0.5.19-asrfix", ASR_FIX)
    proc = _cli(*REPLAY, "--exact-fill", "forced", "--sglang-src", old)
    assert proc.returncode == 2
    assert "sglang 0.5.19" in proc.stderr and str(old) in proc.stderr and ">= 0.5.20" in proc.stderr
    suite = _cli("suite", "--json", "--sglang-src", old)   # the suite's modes include on, forced
    assert suite.returncode == 2 and "modes on, forced" in suite.stderr


@pytest.mark.sglang
def test_replay_records_the_tree_it_replayed() -> None:
    tree = release_tree("0.5.20")
    proc = _cli(*REPLAY, "--exact-fill", "forced", "--sglang-src", tree)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["sglang_version"] == "0.5.20"
    assert out["sglang_src"] == {"path": str(tree), "version": "0.5.20", "commit": None,
                                 "dirty": None, "import_root": str(tree), "has_gate": True}
    # The same admission as 0.5.23 gives for docs/admission.md's example (16384 tokens, forced).
    assert out["rounds"][0]["extend_lens"] == [3000, 5000, 7000, 1384]
