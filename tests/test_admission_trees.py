"""``--sglang-src``: resolving a tree (checkout or unpacked package; version, git commit, dirty)
and the admission commands that take one."""

from __future__ import annotations

from repo_files import REPO_ROOT

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sglang_trees import ASR_FIX, edited_copy, release_tree

from servegate.serve.trees import TreeError, resolve_tree

REPO = REPO_ROOT


def _package(root: Path, version: str = "9.9.9", gate: bool = True) -> Path:
    pkg = root / "sglang"
    (pkg / "srt" / "managers").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_version.py").write_text(f'__version__ = "{version}"\n')
    body = "def _use_exact_chunk_fill() -> bool:\n    return False\n" if gate else "X = 1\n"
    (pkg / "srt" / "managers" / "schedule_policy.py").write_text(body)
    return root


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), "-c", "user.email=t@t", "-c", "user.name=t",
                           *args], capture_output=True, text=True, check=True).stdout.strip()


def test_unpacked_package_resolves_without_git(tmp_path: Path) -> None:
    tree = resolve_tree(_package(tmp_path / "pkg"))
    assert tree.import_root == tmp_path / "pkg" and tree.version == "9.9.9" and tree.has_gate
    assert (tree.commit, tree.dirty) == (None, None)
    assert tree.record()["path"] == str(tmp_path / "pkg")
    assert tree.pythonpath("src", env={"PYTHONPATH": "x"}) == os.pathsep.join(
        [str(tmp_path / "pkg"), "src", "x"])


def test_checkout_uses_python_folder_with_commit_and_dirty_flag(tmp_path: Path) -> None:
    checkout = tmp_path / "sglang"
    _package(checkout / "python", gate=False)
    _git(checkout, "init", "-q")
    _git(checkout, "add", "-A")
    _git(checkout, "commit", "-qm", "base")
    head = _git(checkout, "rev-parse", "HEAD")
    tree = resolve_tree(checkout)
    assert tree.import_root == checkout / "python" and not tree.has_gate
    assert (tree.commit, tree.dirty) == (head, False)
    (checkout / "python" / "sglang" / "__init__.py").write_text("# edited\n")
    assert resolve_tree(checkout).dirty is True
    assert resolve_tree(checkout / "python").commit == head   # the python/ folder itself


def test_tree_inside_another_repository_has_no_commit(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    tree = resolve_tree(_package(tmp_path / "vendored" / "pkg"))
    assert (tree.commit, tree.dirty) == (None, None)


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_not_a_tree_is_named(tmp_path: Path, make: str) -> None:
    path = tmp_path / "nothing"
    if make == "empty":
        path.mkdir()
    with pytest.raises(TreeError, match=f"--sglang-src {path}"):
        resolve_tree(path)


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, "-m", "servegate", "admission", *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=300, check=False)


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
    # The same admission as 0.5.23 gives for the README's example (16384 tokens, forced).
    assert out["rounds"][0]["extend_lens"] == [3000, 5000, 7000, 1384]
