"""`servegate preflight --sglang-src TREE`: the GPU suites checked against a given sglang tree."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import pytest
from servegate_cli import run_servegate
from sglang_trees import release_tree


@pytest.mark.sglang
def test_preflight_runs_on_the_given_tree(tmp_path: Path) -> None:
    tree = release_tree(version("sglang"))
    proc = run_servegate("preflight", "--suite", "premerge", "--runner", "gfx95",
                         "--sglang-src", tree, "--json", timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    document = json.loads(proc.stdout)
    assert document["sglang_src"]["path"] == str(tree)
    assert document["sglang_version"] == version("sglang")
    assert [c["status"] for c in document["cells"]] == ["ok"]


