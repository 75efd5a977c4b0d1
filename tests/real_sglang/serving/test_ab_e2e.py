"""Head vs base end to end as a live pair: real sglang trees (the released wheel the environment
runs, unpacked) served together on this CPU, blocks alternating between the two servers, judged
head against base per block pair (tests/data/suites/ab-cpu.toml: one start, 4 blocks per tree).

Asserted in both tests: one start per tree, both servers alive together (their logs overlap in
time), the blocks alternating between them, and the idle server verified idle during every block
of the other. The suite has sequential looks after 2 and 3 of its 4 block pairs. The A/A (the
same tree twice) exits 0 with no regression and never stops early on one; the slowdown test
injects a prefill delay into the head server only (``SERVEGATE_INJECT_ARMS=head``) of the size
the calibration says this design catches and stops early on with >= 99.5 % probability at this
VM's measured noise (:func:`calibration_pairs.live_pair_calibration` with the suite's looks), and it
must be reported as a regression at a look before the fourth block pair, the verdict saying so.
The
delay that makes that size comes from the A/A's own base blocks (their mean TTFT, same load,
same machine, same hour): the A/A runs once per module and the slowdown test reads it. The two
verdicts (A/A no regression, slowdown caught) are speed: asserted after the live-pair facts, and
skipped naming the measured share when the run's own interference record has more than a quarter
of its blocks busy (``tests/contention.py``).
"""

from __future__ import annotations

import contextlib
import io
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

import pytest
from contention import excused_if_contended
from injected_delays import prefill_delay_ms
from repo_files import REPO_ROOT
from sglang_trees import release_tree

from servegate.commands import dispatch

pytestmark = [pytest.mark.e2e, pytest.mark.timing]
REPO = REPO_ROOT
SUITE = REPO / "tests" / "data" / "suites" / "ab-cpu.toml"
MEASURED_RUN_CV, MEASURED_BLOCK_CV = 0.07, 0.065    # suites/cpu-gate.toml; calibrate.CPU_BLOCK_CV


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

    def base_mean_ttft_ms(self) -> float:
        """The base server's mean TTFT over its blocks (the load's own reference)."""
        return statistics.fmean(p["metrics"]["mean_ttft_ms"] for p in self.run["points"]
                                if p["arm"] == "base")


def _ab(results: Path, base: Path, head: Path, *extra: str) -> LivePairRun:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = dispatch.main(["ab", "--base", str(base), "--head", str(head), "--suite",
                              str(SUITE), "--runner", "cpu", "--results-dir", str(results),
                              *extra])
    [run_dir] = results.iterdir()
    assert run_dir.name.startswith("ab-cpu-cpu-ab-")
    run = json.loads((run_dir / "run.json").read_text())
    _assert_live_pair(run, run_dir)
    return LivePairRun(code, run, json.loads((run_dir / "verdict.json").read_text()),
                       out.getvalue(), run_dir)


@pytest.fixture(scope="module")
def a_a(tmp_path_factory: pytest.TempPathFactory) -> LivePairRun:
    """The A/A live pair (the same tree as base and head), run once for the module."""
    tree = _environment_tree()
    return _ab(tmp_path_factory.mktemp("a_a") / "results", tree, tree)


def _assert_live_pair(run: dict, run_dir: Path) -> None:
    design = run["design"]
    assert design["in_server"] is True and design["live_pair"] is True, design
    assert design["devices"] == []                          # a CPU: no device sets
    logs = sorted(p.name for p in (run_dir / "server").glob("*.log")
                  if ".attempt" not in p.name)       # a port retry keeps its failed attempt
    assert logs == ["base-s0.log", "head-s0.log"], logs
    points = run["points"]
    arms = [p["arm"] for p in sorted(points, key=lambda p: p["order"])]
    assert all(a != b for a, b in zip(arms[0::2], arms[1::2], strict=True)), arms  # pairs
    blocks = run.get("sequential", {}).get("stopped_at_blocks") or 4
    assert sorted(p["block"] for p in points) == sorted(2 * list(range(blocks)))
    for point in points:                        # the other server idle during every block
        other = "head-s0" if point["arm"] == "base" else "base-s0"
        assert point["idle_check"] == {other: 0}, point
    for arm in ("base", "head"):                # both alive together: blocks of each arm
        mine = [p["order"] for p in points if p["arm"] == arm]      # run between the other's
        theirs = [p["order"] for p in points if p["arm"] != arm]
        assert min(theirs) < max(mine) and min(mine) < max(theirs)
    assert sum(1 for _ in design["start_seconds"]) == 2
    assert sorted(arms) == ["base"] * blocks + ["head"] * blocks
    # the looks taken: every look up to where the pair stopped (or all, run to the maximum)
    assert [t["blocks"] for t in run["sequential"]["taken"]] == [k for k in (2, 3) if k <= blocks]


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


def _head_delay_ms(reference_ttft_ms: float) -> tuple[float, float]:
    """(the smallest TTFT slowdown this sequential design catches and stops early on with
    >= 99.5 % probability at the measured noise, its delay per prefill batch in ms)."""
    from servegate.calibration import Noise
    from servegate.calibration.pairs import live_pair_calibration
    from servegate.config import load_suite

    suite = load_suite(SUITE)
    design = suite.effective_design
    pair = live_pair_calibration(suite.judge, design.starts, design.blocks, len(suite.modes),
                                 Noise(MEASURED_RUN_CV, MEASURED_BLOCK_CV, 0.0), nights=2000,
                                 seed=20261201, looks=design.looks,
                                 slowdowns=(1.0, 1.5, 2.0, 3.0))
    effect = next((s for s in (1.0, 1.5, 2.0, 3.0) if pair["power_curve"][f"{s:.2f}"] >= 0.995
                   and pair["stopped_early"][f"{s:.2f}"] >= 0.995), None)
    assert effect is not None, pair
    return effect, prefill_delay_ms(effect, reference_ttft_ms)


def test_prefill_slowdown_in_head_only_is_a_regression(
        a_a: LivePairRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    effect, delay_ms = _head_delay_ms(a_a.base_mean_ttft_ms())
    monkeypatch.setenv("SERVEGATE_INJECT_DELAY_MS", f"{delay_ms:.0f}")
    monkeypatch.setenv("SERVEGATE_INJECT_ARMS", "head")
    tree = _environment_tree()
    slowed = _ab(tmp_path / "results", tree, tree, "--skip-accuracy")
    assert slowed.run["injected"]["SERVEGATE_INJECT_ARMS"] == "head"
    ttft = next(c for c in slowed.verdict["checks"] if c["kind"] == "ab" and c["primary"]
                and c["metric"] == "mean_ttft_ms")
    assert ttft["verdict"] != "error" and slowed.code in (0, 1), (ttft, slowed.out)
    with excused_if_contended(slowed.run_dir, what=f"the head-only +{100 * effect:.0f}% TTFT slowdown "
                              f"is a regression (exit {slowed.code}, {ttft['verdict']} "
                              f"x{ttft['ratio']:.3f} {ttft['interval']})"):
        assert slowed.code == 1, slowed.out
        assert ttft["verdict"] == "regression" and ttft["ratio"] > 1.0, ttft
        # stopped at a look before its fourth block pair, and the verdict says so (issue 29)
        stopped = slowed.run["sequential"]["stopped_at_blocks"]
        assert stopped in (2, 3), slowed.run["sequential"]
        assert slowed.verdict["sequential"]["stopped_at_blocks"] == stopped
        assert f"stopped at look {(2, 3).index(stopped) + 1} of 3 ({stopped} of 4 blocks)" \
            in slowed.out, slowed.out
    print(f"\nlive pair: injected +{100 * effect:.0f}% mean TTFT in head ({delay_ms:.0f} ms per "
          f"prefill batch, from the A/A's base mean TTFT {a_a.base_mean_ttft_ms():.0f} ms): "
          f"head/base {ttft['ratio']:.3f} {ttft['interval']}")
