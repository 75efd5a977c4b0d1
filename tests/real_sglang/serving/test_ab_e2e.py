"""Head vs base end to end as a live pair: real sglang trees (the released wheel the environment
runs, unpacked) served together on this CPU, blocks alternating between the two servers, judged
head against base per block pair (tests/data/suites/ab-cpu.toml: one start, 4 blocks per tree,
looks after 2 and 3 block pairs).

The A/A (the same tree twice) shows the live pair's facts (``live_pair.assert_live_pair``: one
start per tree, both servers alive together, blocks alternating, the idle server verified idle)
and exits 0 with no regression, never stopping early on one. Its verdict is speed: asserted after
the live-pair facts, and skipped naming the measured share when the run's own interference record
has more than a quarter of its blocks busy (``tests/contention.py``). A head-only slowdown caught
at a look, the verdict saying so, is asserted on the live pair of a bisect's served step
(``test_bisect_e2e.py``: a commit that sleeps before every prefill batch, served against its
parent): one live pair fewer in CI (issue 42 item 6).
"""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from contention import excused_if_contended
from live_pair import assert_live_pair
from repo_files import REPO_ROOT
from sglang_trees import release_tree

from servegate.commands import dispatch

pytestmark = [pytest.mark.e2e, pytest.mark.timing]
REPO = REPO_ROOT
SUITE = REPO / "tests" / "data" / "suites" / "ab-cpu.toml"


def _environment_tree() -> Path:
    from importlib.metadata import version

    return release_tree(version("sglang"))


@dataclass(frozen=True)
class LivePairRun:
    """One ``servegate ab`` run: its exit code, run.json, verdict.json, printed verdict and
    folder."""

    code: int
    run: dict
    verdict: dict
    out: str
    run_dir: Path


def _ab(results: Path, base: Path, head: Path, *extra: str) -> LivePairRun:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = dispatch.main(["ab", "--base", str(base), "--head", str(head), "--suite",
                              str(SUITE), "--runner", "cpu", "--results-dir", str(results),
                              *extra])
    [run_dir] = results.iterdir()
    assert run_dir.name.startswith("ab-cpu-cpu-ab-")
    run = json.loads((run_dir / "run.json").read_text())
    assert_live_pair(run, run_dir)
    return LivePairRun(code, run, json.loads((run_dir / "verdict.json").read_text()),
                       out.getvalue(), run_dir)


@pytest.fixture(scope="module")
def a_a(tmp_path_factory: pytest.TempPathFactory) -> LivePairRun:
    """The A/A live pair (the same tree as base and head), run once for the module."""
    tree = _environment_tree()
    return _ab(tmp_path_factory.mktemp("a_a") / "results", tree, tree)


def test_a_a_same_tree_is_no_regression(a_a: LivePairRun) -> None:
    checks = a_a.verdict["checks"]
    ab = [c for c in checks if c["kind"] == "ab" and c["primary"]]
    assert len(ab) == 2 and a_a.verdict["family"]["size"] == 2, [c["name"] for c in checks]
    assert not [c for c in checks if c["verdict"] == "error"], checks
    assert a_a.code in (0, 1), a_a.out                  # judged: 2 would be an error
    assert all("start level" in c["reason"] for c in ab), ab
    gsm8k = [c for c in checks if c["kind"] == "accuracy"]
    assert len(gsm8k) == 1 and "paired" in gsm8k[0]["name"]
    assert any("blocks paired between the two live servers" in n for n in a_a.verdict["notes"])
    regressions = [c["name"] for c in checks if c["verdict"] == "regression"]
    with excused_if_contended(a_a.run_dir, what=f"the A/A is no regression (exit {a_a.code}, "
                              f"regressions {regressions})"):
        assert a_a.code == 0, a_a.out
        assert not regressions, checks
        stopped = a_a.run["sequential"]["stopped_at_blocks"]
        assert stopped is None or not regressions, a_a.run["sequential"]   # never on a regression
