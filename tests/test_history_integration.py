"""History wired into the pipeline: `compare --baseline history:N`, bench's auto-add."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from judge_runs import make_run

from servegate import compare
from servegate.history import store as history_store


def _nights(store: Path, tmp_path: Path, count: int) -> None:
    for night in range(count):
        run_dir = make_run(tmp_path / f"night-{night:02d}", modes=("off", "on"), repeats=1,
                           seed=100 + night, run_cv=0.02)
        history_store.add_run(run_dir, store)


def test_compare_against_five_stored_nights(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    _nights(store, tmp_path, 8)
    current = make_run(tmp_path / "tonight", modes=("off", "on"), repeats=3, seed=7,
                       effect=lambda mode, conc: 1.5 if mode == "off" else 1.0)
    code = compare.main([str(current), "--baseline", "history:5", "--history-store", str(store),
                         "--no-plots"])
    out = capsys.readouterr().out
    verdict = json.loads((current / "verdict.json").read_text())
    assert "history:5" in verdict["baseline"]["source_run"]
    assert "replaces the suite's assumed run_to_run_cv" in out
    baseline_checks = [c for c in verdict["checks"] if c["kind"] == "baseline"]
    assert baseline_checks, out
    off_ttft = [c for c in baseline_checks if c["mode"] == "off" and c["metric"] == "mean_ttft_ms"]
    assert off_ttft and all(c["verdict"] == "regression" for c in off_ttft)   # 50 % slower
    on_ttft = [c for c in baseline_checks if c["mode"] == "on" and c["metric"] == "mean_ttft_ms"]
    assert on_ttft and all(c["verdict"] != "regression" for c in on_ttft)
    assert code == 1


def test_history_spec_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = make_run(tmp_path / "run")
    assert compare.main([str(run_dir), "--baseline", "history:1", "--history-store",
                         str(tmp_path / "store")]) == 2
    assert "N >= 2" in capsys.readouterr().err
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    assert compare.main([str(run_dir), "--baseline", "history:5", "--history-store",
                         str(not_a_dir)]) == 2
    assert str(not_a_dir) in capsys.readouterr().err
