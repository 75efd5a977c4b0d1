"""The judge validated on real runs (real sglang on CPU, SmolLM2-135M, suites/cpu-gate.toml).

An A/A pair (two runs of the same config, each with its own server start) must not be called a
regression; a run with a servegate-injected decode delay of one baseline TPOT per step (a 2x
decode slowdown; SERVEGATE_INJECT_DECODE_DELAY_MS, the exact-fill hook's mechanism, active only in
the server process) must be called a regression of about that size, naming the metric. The
measured figures are in the README.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# In the default e2e tier (three server starts of 12 prompts each). The suite's run_to_run_cv (0.07, 10
# dof) was measured on an idle machine; another CPU-heavy process during a run makes that server
# start several times slower (suites/cpu-gate.toml), so run it, like every timing test, alone.
pytestmark = pytest.mark.e2e


def _bench(results: Path) -> Path:
    from servegate.commands import bench

    before = set(results.glob("cpu-gate-*"))
    code = bench.main(["--suite", "cpu-gate", "--runner", "cpu", "--results-dir", str(results),
                       "--no-compare"])
    [run_dir] = set(results.glob("cpu-gate-*")) - before
    assert code == 0, json.loads((run_dir / "run.json").read_text()).get("error")
    return run_dir


def _checks(run_dir: Path) -> dict[str, dict]:
    verdict = json.loads((run_dir / "verdict.json").read_text())
    return {c["metric"]: c for c in verdict["checks"] if c["kind"] == "baseline"}


def test_aa_passes_and_injected_slowdown_is_a_regression(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from servegate.commands import compare as command
    from servegate.judge import update

    results = tmp_path / "results"
    baseline = tmp_path / "baselines" / "cpu" / "smollm2-135m" / "cpu-gate.json"
    first = _bench(results)
    assert update.main([str(first), "--baseline", str(baseline)]) == 0

    second = _bench(results)                                        # A/A
    aa_code = command.main([str(second), "--baseline", str(baseline), "--no-plots"])
    aa = _checks(second)
    assert aa_code in (0, 3), aa
    assert not [m for m, c in aa.items() if c["verdict"] == "regression"], aa

    # A 2x decode slowdown: every decode step sleeps one baseline TPOT more in the scheduler.
    base_tpot = json.loads(first.joinpath("run.json").read_text())["points"][0]["metrics"][
        "mean_tpot_ms"]
    delay_ms = round(base_tpot)
    monkeypatch.setenv("SERVEGATE_INJECT_DECODE_DELAY_MS", str(delay_ms))
    slowed = _bench(results)
    run = json.loads((slowed / "run.json").read_text())
    assert run["injected"] == {"SERVEGATE_INJECT_DECODE_DELAY_MS": str(delay_ms)}
    assert command.main([str(slowed), "--baseline", str(baseline), "--no-plots"]) == 1
    checks = _checks(slowed)
    tpot = checks["mean_tpot_ms"]
    assert tpot["verdict"] == "regression"
    # About the injected size (x2), not just "slower".
    expected = (base_tpot + delay_ms) / base_tpot
    assert 0.75 * expected <= tpot["ratio"] <= 1.25 * expected, (tpot, expected)
    # A fault-injected run can never become a baseline by accident.
    assert update.main([str(slowed), "--baseline", str(baseline)]) == 2
