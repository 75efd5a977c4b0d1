"""ci/lib/sglang-trees.sh against a real git repository: head at the ref under test, base at
its merge base with the base branch (what a pull request is measured against)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from repo_files import REPO_ROOT

SCRIPT = REPO_ROOT / "ci" / "lib" / "sglang-trees.sh"


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


def commit(repo: Path, name: str, text: str) -> str:
    (repo / "python" / "sglang").mkdir(parents=True, exist_ok=True)
    (repo / "python" / "sglang" / name).write_text(text)
    git("add", ".", cwd=repo)
    git("commit", "--quiet", "-m", name, cwd=repo)
    return git("rev-parse", "HEAD", cwd=repo)


def test_head_and_merge_base_trees(tmp_path: Path) -> None:
    repo = tmp_path / "sglang"
    git("init", "--quiet", "-b", "main", str(repo), cwd=tmp_path)
    fork_point = commit(repo, "__init__.py", "v = 1\n")
    git("checkout", "--quiet", "-b", "pr", cwd=repo)
    head = commit(repo, "feature.py", "exact = True\n")
    git("checkout", "--quiet", "main", cwd=repo)
    commit(repo, "later.py", "main moved on\n")           # main advanced after the fork
    dest = tmp_path / "trees"
    proc = subprocess.run(["bash", str(SCRIPT), str(repo), "pr", "", "main", str(dest)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert git("rev-parse", "HEAD", cwd=dest / "head") == head
    assert git("rev-parse", "HEAD", cwd=dest / "base") == fork_point   # the merge base
    assert (dest / "head" / "python" / "sglang" / "feature.py").is_file()
    assert not (dest / "base" / "python" / "sglang" / "feature.py").exists()
    assert not (dest / "base" / "python" / "sglang" / "later.py").exists()
    # an explicit base ref wins over the merge base
    explicit = subprocess.run(["bash", str(SCRIPT), str(repo), head, "main", "main",
                               str(tmp_path / "t2")], capture_output=True, text=True, timeout=60)
    assert explicit.returncode == 0, explicit.stderr
    assert (tmp_path / "t2" / "base" / "python" / "sglang" / "later.py").is_file()


def test_missing_head_is_a_usage_error(tmp_path: Path) -> None:
    proc = subprocess.run(["bash", str(SCRIPT), "o/r", "", "", "main", str(tmp_path / "x")],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "usage:" in proc.stderr
