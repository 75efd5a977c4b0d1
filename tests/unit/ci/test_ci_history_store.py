"""ci/lib/history-store.sh against a real git remote: the store survives nights, and two nights
saving at the same time both keep their runs (one file per run: a rebase never conflicts)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from repo_files import REPO_ROOT

SCRIPT = REPO_ROOT / "ci" / "lib" / "history-store.sh"


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout


def store_cmd(command: str, store: Path, checkout: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
    return subprocess.run(["bash", str(SCRIPT), command, str(store)], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    bare = tmp_path / "origin.git"
    git("init", "--quiet", "--bare", str(bare), cwd=tmp_path)
    seed = tmp_path / "seed"
    git("init", "--quiet", str(seed), cwd=tmp_path)
    (seed / "README.md").write_text("servegate\n")
    git("add", "README.md", cwd=seed)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "init", cwd=seed)
    git("push", "--quiet", str(bare), "HEAD:refs/heads/main", cwd=seed)
    return bare


def clone(origin: Path, where: Path) -> Path:
    git("clone", "--quiet", "--branch", "main", str(origin), str(where), cwd=origin.parent)
    return where


def files(store: Path) -> set[str]:
    return {p.name for p in store.glob("*.jsonl")}


def test_first_night_creates_the_branch_and_the_next_restores_it(origin: Path,
                                                                 tmp_path: Path) -> None:
    night1 = clone(origin, tmp_path / "night1")
    proc = store_cmd("restore", night1 / "store", night1)
    assert proc.returncode == 0, proc.stderr
    assert "starting an empty store" in proc.stderr and files(night1 / "store") == set()
    (night1 / "store" / "run-a.jsonl").write_text('{"run_id": "run-a"}\n')
    proc = store_cmd("save", night1 / "store", night1)
    assert proc.returncode == 0, proc.stderr
    assert "README.md" not in git("ls-tree", "--name-only", "servegate-history", cwd=origin)

    night2 = clone(origin, tmp_path / "night2")
    assert store_cmd("restore", night2 / "store", night2).returncode == 0
    assert files(night2 / "store") == {"run-a.jsonl"}
    again = store_cmd("save", night2 / "store", night2)          # nothing new: a no-op
    assert again.returncode == 0 and "nothing new" in again.stderr


def test_two_nights_saving_at_once_both_keep_their_runs(origin: Path, tmp_path: Path) -> None:
    first = clone(origin, tmp_path / "first")
    store_cmd("restore", first / "store", first)
    (first / "store" / "run-a.jsonl").write_text("a\n")
    assert store_cmd("save", first / "store", first).returncode == 0
    left, right = clone(origin, tmp_path / "left"), clone(origin, tmp_path / "right")
    for checkout, name in ((left, "run-b.jsonl"), (right, "run-c.jsonl")):
        assert store_cmd("restore", checkout / "store", checkout).returncode == 0
        (checkout / "store" / name).write_text(name + "\n")
    assert store_cmd("save", left / "store", left).returncode == 0
    late = store_cmd("save", right / "store", right)              # rejected once, then rebased
    assert late.returncode == 0, late.stderr
    assert "rebasing" in late.stderr
    check = clone(origin, tmp_path / "check")
    store_cmd("restore", check / "store", check)
    assert files(check / "store") == {"run-a.jsonl", "run-b.jsonl", "run-c.jsonl"}


def test_bad_use_exits_2(tmp_path: Path, origin: Path) -> None:
    checkout = clone(origin, tmp_path / "c")
    assert store_cmd("save", checkout / "missing", checkout).returncode == 2
    proc = subprocess.run(["bash", str(SCRIPT), "restore"], cwd=checkout, capture_output=True,
                          text=True)
    assert proc.returncode == 2 and "usage:" in proc.stderr
