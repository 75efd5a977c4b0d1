"""``--sglang-src`` (and ``--base`` / ``--head``): resolving a tree (checkout or unpacked package;
version, git commit, dirty) and the admission commands that take one."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from servegate.serve.trees import TreeError, resolve_tree


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


@pytest.mark.parametrize("flag", ["--base", "--head"])
def test_a_bad_tree_is_named_by_the_flag_it_came_from(tmp_path: Path, flag: str) -> None:
    with pytest.raises(TreeError, match=f"^{flag} {tmp_path}: not an sglang tree") as err:
        resolve_tree(tmp_path, flag)
    assert "--sglang-src" not in str(err.value)
    assert resolve_tree(_package(tmp_path / "pkg"), flag).flag == flag
