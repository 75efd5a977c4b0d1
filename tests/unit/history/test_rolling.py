"""The rolling `history:N` baseline (servegate.history.rolling): the last nights after a confirmed
change pooled into a baseline, judged like a stored one; stores from synthetic_nights.py."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from synthetic_nights import night_run, nightly_store
from unit.judge.block_runs import write_block_run

from servegate.history.cli import main
from servegate.history.rolling import as_baseline, rolling_baseline, rolling_from_store
from servegate.history.store import add_run, read_store
from servegate.judge.baselines import validate_baseline
from servegate.judge.evidence import as_matrix, evidence_from_baseline


def test_rolling_pools_the_last_nights_after_the_confirmed_change(tmp_path: Path) -> None:
    store = nightly_store(tmp_path, seed=8, nights=30, step_at=22, repeats=2, factor=1.25)
    rolling = rolling_from_store(store, "cpu", "smollm2-135m", "nightly-synthetic", nights=12)
    by_key = {(s.mode, s.concurrency, s.metric): s for s in rolling.series}
    stepped, flat = by_key[("off", 2, "mean_ttft_ms")], by_key[("on", 2, "mean_ttft_ms")]
    assert flat.run_ids == tuple(f"nightly-cpu-8-{n:03d}" for n in range(18, 30))
    assert stepped.stopped_at is not None
    start = int(stepped.stopped_at.rsplit("-", 1)[1])
    assert abs(start - 22) <= 2
    assert stepped.run_ids == tuple(f"nightly-cpu-8-{n:03d}" for n in range(start, 30))
    records = {r.run_id: r for r in read_store(store).records
               if (r.mode, r.concurrency, r.metric) == ("on", 2, "mean_ttft_ms")}
    pooled = [v for run_id in flat.run_ids for v in records[run_id].values]
    assert list(flat.values) == pooled and len(pooled) == 24
    means = [float(np.mean(records[run_id].values)) for run_id in flat.run_ids]
    assert flat.cv == pytest.approx(float(np.std(np.log(means), ddof=1)))
    assert flat.cv_dof == 11
    excluded = rolling_baseline(read_store(store).records, "cpu", "smollm2-135m",
                                "nightly-synthetic", nights=12,
                                exclude_run_ids=["nightly-cpu-8-029"])
    assert "nightly-cpu-8-029" not in excluded.run_ids


def test_rolling_baseline_is_a_valid_baseline_and_the_judge_uses_it(tmp_path: Path) -> None:
    from servegate.judge.evaluate import judge

    store = nightly_store(tmp_path, seed=9, nights=8, step_at=99, repeats=3)
    rolling = rolling_from_store(store, "cpu", "smollm2-135m", "nightly-synthetic", nights=5)
    document = as_baseline(rolling)
    validate_baseline(document, tmp_path / "history.json")
    prov = document["provenance"]
    assert prov["source_run"] == "history:5"
    assert prov["run_ids"] == [f"nightly-cpu-9-{n:03d}" for n in range(3, 8)]
    point = next(p for p in document["points"] if (p["mode"], p["concurrency"]) == ("on", 4))
    entry = point["metrics"]["mean_ttft_ms"]
    assert entry["n_blocks"] == 15 and entry["cv_dof"] == 4
    assert entry["value"] == pytest.approx(float(np.mean(entry["blocks"])), rel=1e-5)
    accuracy = document["accuracy"]["off"]
    assert accuracy["n"] == 250
    assert accuracy["correct"] == sum(40 + n % 3 for n in range(3, 8))

    # `compare --baseline FILE` with it: tonight `off` 30 % slower is a regression, `on` is not
    target = tmp_path / "history5.json"
    assert main(["baseline", str(night_run(tmp_path / "tonight", 8, 9, step_at=8, factor=1.3,
                                        repeats=3)),
                 "--store", str(store), "--nights", "5", "--out", str(target)],
                out=io.StringIO()) == 0
    tonight = tmp_path / "tonight" / "nightly-cpu-9-008"
    judgement = judge(tonight, baseline_file=target)
    verdicts = {(c.mode, c.concurrency, c.metric): c.verdict for c in judgement.checks
                if c.kind == "baseline"}
    assert verdicts[("off", 4, "mean_ttft_ms")] == "regression"
    assert verdicts[("on", 4, "mean_ttft_ms")] != "regression"


def test_rolling_baseline_keeps_each_nights_server_starts_apart(tmp_path: Path) -> None:
    """Three in-server nights of 2 starts x 3 blocks: the judge reads the window as 6 server
    starts of 3 blocks each, not as 18 independent values."""
    store = tmp_path / "store"
    for night in range(3):
        add_run(write_block_run(tmp_path / f"blocks-{night}", starts=2, blocks=3, seed=night,
                                started_at=f"2026-12-0{night + 1}T12:00:00+00:00"), store)
    rolling = rolling_from_store(store, "mi300x", "smollm2-135m", "blocks-synthetic", nights=3)
    series = next(s for s in rolling.series
                  if (s.mode, s.concurrency, s.metric) == ("on", 2, "mean_ttft_ms"))
    assert series.starts == (0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5)
    document = as_baseline(rolling)
    validate_baseline(document, tmp_path / "history.json")
    evidence = evidence_from_baseline(document)
    matrix = as_matrix(evidence.slots("", "on", 2, "mean_ttft_ms"))
    assert matrix.shape == (1, 6, 3)
    records = sorted((r for r in read_store(store).records
                      if (r.mode, r.concurrency, r.metric) == ("on", 2, "mean_ttft_ms")),
                     key=lambda r: r.time)
    rows = [values for r in records for values in r.by_start().values()]
    assert np.allclose(matrix[0], np.round(rows, 6))
