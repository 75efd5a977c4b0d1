"""`history report` (JSON contract, plots, bad input) and the rolling `history:N` baseline.

The store is built the way nightly builds it: synthetic run folders (tests/judge_runs.py) with
run-to-run noise, added with `history add`; the step is an effect on one mode only.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from judge_runs import make_run
from synthetic_nights import NIGHTS, STEP, STEP_AT, nightly_store
from unit.judge.block_runs import write_block_run

from servegate.history.cli import main
from servegate.history.store import add_run, read_store

SERIES_KEYS = {"runner", "model", "suite", "mode", "concurrency", "metric", "n", "change_points"}


CP_KEYS = {"index", "run_id", "before", "after", "ratio", "sglang_commits"}


def _report_json(store: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    code = main(["report", "--store", str(store), "--json", *extra], out=out)
    return code, json.loads(out.getvalue()) if out.getvalue() else {}


def _series(doc: dict[str, Any], mode: str, conc: int, metric: str) -> dict[str, Any]:
    [found] = [s for s in doc["series"] if (s["mode"], s["concurrency"], s["metric"])
               == (mode, conc, metric)]
    return found


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_acceptance_one_change_near_20_on_the_stepped_series_none_on_the_flat(
        tmp_path: Path, seed: int) -> None:
    store = nightly_store(tmp_path, seed)
    code, doc = _report_json(store)
    assert code == 0
    stepped = _series(doc, "off", 2, "mean_ttft_ms")
    flat = _series(doc, "on", 2, "mean_ttft_ms")
    assert stepped["n"] == flat["n"] == NIGHTS
    assert len(stepped["change_points"]) == 1
    cp = stepped["change_points"][0]
    assert abs(cp["index"] - STEP_AT) <= 2
    assert cp["status"] == "confirmed" and cp["effect"] == "regression"
    assert cp["ratio"] == pytest.approx(STEP, abs=0.03)
    assert cp["run_id"] == f"nightly-cpu-{seed}-{cp['index']:03d}"
    assert cp["sglang_commits"] == [f"sg{cp['index'] - 1:04d}", f"sg{cp['index']:04d}"]
    assert flat["change_points"] == []


def test_json_contract_keys_and_types(tmp_path: Path) -> None:
    code, doc = _report_json(nightly_store(tmp_path, seed=4, nights=24))
    assert code == 0 and doc["problems"] == []
    assert doc["series"]
    for series in doc["series"]:
        assert set(series) >= SERIES_KEYS
        assert isinstance(series["n"], int) and isinstance(series["change_points"], list)
        for cp in series["change_points"]:
            assert set(cp) >= CP_KEYS
            assert cp["status"] in ("suspected", "confirmed")
            assert len(cp["sglang_commits"]) == 2
    accuracy = [s for s in doc["series"] if s["metric"] == "gsm8k_accuracy"]
    assert [s["mode"] for s in accuracy] == ["off"]


def test_noise_budget_uses_the_measured_spread_of_the_current_level(tmp_path: Path) -> None:
    store = nightly_store(tmp_path, seed=5, nights=30, repeats=2)
    code, doc = _report_json(store)
    assert code == 0
    series = _series(doc, "on", 4, "mean_ttft_ms")       # gated by the default [judge] metrics
    budget = series["noise"]
    records = [r for r in read_store(store).records
               if (r.mode, r.concurrency, r.metric) == ("on", 4, "mean_ttft_ms")]
    logs = np.log([v for r in records for v in r.values])
    assert budget["sigma"] == pytest.approx(float(np.std(logs, ddof=1)), rel=1e-4)
    assert budget["dof"] == len(logs) - 1
    assert budget["repeats_today"] == 2
    assert budget["floor"] == pytest.approx(0.05)
    assert budget["reachable_floor"] > 0 and budget["repeats_needed"] >= 1
    # the stepped series: spread measured after the step only, so it is not inflated by it
    stepped = _series(doc, "off", 4, "mean_ttft_ms")
    assert stepped["noise"]["dof"] < budget["dof"]
    assert stepped["noise"]["sigma"] < 0.04


def test_noise_budget_of_in_server_nights_reads_the_start_and_block_levels_apart(
        tmp_path: Path) -> None:
    """Six nights of 2 server starts x 6 blocks, start log-sd 5 %, block log-sd 0.5 %: the
    budget sees 12 starts (11 degrees of freedom), not 72 independent repeats."""
    store = tmp_path / "store"
    for night in range(6):
        add_run(write_block_run(tmp_path / f"blocks-{night}", starts=2, blocks=6, seed=10 + night,
                                start_sd=0.05, block_sd=0.005,
                                started_at=f"2026-12-0{night + 1}T12:00:00+00:00"), store)
    code, doc = _report_json(store)
    assert code == 0
    series = _series(doc, "on", 2, "mean_ttft_ms")
    assert series["change_points"] == series["transients"] == []     # one level: every night
    budget = series["noise"]
    start, block = budget["levels"]["start"], budget["levels"]["block"]
    assert (start["starts"], start["dof"], block["blocks_per_start"]) == (12, 11, 6)
    assert start["sigma"] > 0.025 and block["sigma"] < 0.01 and block["dof"] > 20
    assert (budget["repeats_today"], budget["blocks_today"]) == (2, 6)
    assert budget["sigma"] == pytest.approx(
        math.sqrt(start["sigma"] ** 2 + block["sigma"] ** 2 / (0.6 * 6)), rel=1e-3)
    assert budget["blocks_needed"] is None             # the start level decides
    assert budget["dof"] < 20


def test_plots_one_png_per_metric_and_runner(tmp_path: Path) -> None:
    store = nightly_store(tmp_path, seed=6, nights=12, step_at=6, factor=1.3)
    plots = tmp_path / "plots"
    out = io.StringIO()
    assert main(["report", "--store", str(store), "--plots", str(plots)], out=out) == 0
    metrics = {r.metric for r in read_store(store).records}
    files = sorted(plots.iterdir())
    assert len(files) == len(metrics)
    assert all(f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for f in files)
    assert (plots / "cpu__smollm2-135m__nightly-synthetic__mean_ttft_ms.png").stat().st_size > 5000
    assert "night 6" in out.getvalue() or "night 5" in out.getvalue() \
        or "night 7" in out.getvalue()


def test_malformed_line_exits_2_naming_file_and_line_nothing_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = nightly_store(tmp_path, seed=7, nights=6)
    victim = sorted(store.iterdir())[2]
    lines = victim.read_text().splitlines()
    lines[4] = '{"schema_version": 1, "values": ['
    victim.write_text("\n".join(lines) + "\n")
    plots = tmp_path / "plots"
    out = io.StringIO()
    assert main(["report", "--store", str(store), "--plots", str(plots)], out=out) == 2
    assert f"{victim}:5: not valid JSON" in capsys.readouterr().err
    assert not plots.exists() and out.getvalue() == ""
    code, doc = _report_json(store, "--skip-malformed")
    assert code == 0
    assert [p.split(": ")[0] for p in doc["problems"]] == [f"{victim}:5"]


# History store (issue 12): `history add` writes one JSON-lines file per accepted run.
#
# Runs are synthetic run.json files (tests/judge_runs.py, the schema bench writes) and one run
# rebuilt from the committed CPU baseline, so the store lines are checked against real numbers.


@pytest.mark.parametrize(("kwargs", "reason"), [
    ({"complete": False}, "incomplete"),
    ({"complete": False, "error": "server died"}, "run failed: server died"),
])
def test_add_refuses_incomplete_and_failed_runs(tmp_path: Path, kwargs: dict[str, Any],
                                                reason: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = make_run(tmp_path / "run", **kwargs)
    store = tmp_path / "store"
    assert main(["add", str(run_dir), "--store", str(store)]) == 2
    assert reason in capsys.readouterr().err
    assert not store.exists() or not any(store.iterdir())


def test_store_path_that_is_a_file_exits_2_naming_it(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    store.write_text("not a directory\n")
    run_dir = make_run(tmp_path / "run")
    assert main(["add", str(run_dir), "--store", str(store)]) == 2
    assert main(["report", "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert err.count(f"{store}: history store is a file") == 2
    assert store.read_text() == "not a directory\n"


def test_run_of_another_schema_version_exits_2_nothing_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = make_run(tmp_path / "run")
    run = json.loads((run_dir / "run.json").read_text())
    run["schema_version"] = 99
    (run_dir / "run.json").write_text(json.dumps(run))
    store = tmp_path / "store"
    assert main(["add", str(run_dir), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    assert "run.json" in err and "schema_version 99" in err
    assert not store.exists() or not any(store.iterdir())
