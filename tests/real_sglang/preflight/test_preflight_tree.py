"""`servegate preflight --sglang-src TREE`: the GPU suites checked against a given sglang tree."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from repo_files import SRC
from sglang_trees import release_tree

SRC = SRC


@pytest.mark.sglang
def test_preflight_runs_on_the_given_tree(tmp_path: Path) -> None:
    tree = release_tree(version("sglang"))
    proc = subprocess.run(
        [sys.executable, "-m", "servegate", "preflight", "--suite", "premerge", "--runner",
         "gfx95", "--sglang-src", str(tree), "--json"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(SRC)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    document = json.loads(proc.stdout)
    assert document["sglang_src"]["path"] == str(tree)
    assert document["sglang_version"] == version("sglang")
    assert [c["status"] for c in document["cells"]] == ["ok"]


