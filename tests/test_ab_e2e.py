"""Head vs base end to end: real sglang trees (the released wheel the environment runs, unpacked)
served on this CPU, interleaved in one run, judged head against base."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sglang_trees import release_tree

from servegate.commands import dispatch

pytestmark = pytest.mark.e2e
SUITE = Path(__file__).resolve().parent / "data" / "suites" / "ab-cpu.toml"
SCHEDULER = Path("sglang") / "srt" / "managers" / "scheduler.py"
RUN_BATCH_DOC = '        """Run a batch."""\n'


def _environment_tree() -> Path:
    from importlib.metadata import version

    return release_tree(version("sglang"))


def _slowed_copy(tree: Path, where: Path) -> Path:
    """The tree with a deliberate 100 ms sleep in every decode batch of the scheduler."""
    copy = where / "head-slow"
    shutil.copytree(tree, copy, symlinks=True)
    scheduler = copy / SCHEDULER
    text = scheduler.read_text()
    assert text.count(RUN_BATCH_DOC) == 1, "Scheduler.run_batch moved: update this test"
    scheduler.write_text(text.replace(RUN_BATCH_DOC, RUN_BATCH_DOC + (
        "        if batch.forward_mode.is_decode():\n"
        "            time.sleep(0.1)  # servegate test: a deliberate decode slowdown\n")))
    return copy


def _ab(tmp_path: Path, base: Path, head: Path, capsys: pytest.CaptureFixture[str]
        ) -> tuple[int, dict, str]:
    code = dispatch.main(["ab", "--base", str(base), "--head", str(head), "--suite", str(SUITE),
                     "--runner", "cpu", "--results-dir", str(tmp_path / "results")])
    out = capsys.readouterr().out
    [run_dir] = (tmp_path / "results").iterdir()
    assert run_dir.name.startswith("ab-cpu-cpu-ab-")
    return code, json.loads((run_dir / "verdict.json").read_text()), out


def test_a_a_same_tree_is_no_regression(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    tree = _environment_tree()
    code, verdict, out = _ab(tmp_path, tree, tree, capsys)
    assert code == 0, out
    checks = verdict["checks"]
    ab = [c for c in checks if c["kind"] == "ab"]
    assert len(ab) == 3 and not [c for c in checks if c["verdict"] in ("regression", "error")]
    gsm8k = [c for c in checks if c["kind"] == "accuracy"]
    assert len(gsm8k) == 1 and "paired" in gsm8k[0]["name"]


@pytest.mark.slow   # the injected-slowdown detection itself runs by default in test_gate_validation
def test_slowed_decode_in_head_is_a_regression(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    tree = _environment_tree()
    code, verdict, out = _ab(tmp_path, tree, _slowed_copy(tree, tmp_path), capsys)
    assert code == 1, out
    slowed = {c["metric"] for c in verdict["checks"] if c["verdict"] == "regression"}
    assert "median_tpot_ms" in slowed, out
    assert "median_tpot_ms head vs base" in out
