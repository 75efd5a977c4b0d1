"""An unreadable run is one integrity error naming why (servegate.judge.evaluate, issue 15)."""

from __future__ import annotations

import json
from pathlib import Path

from judge_runs import make_run

from servegate.judge.evaluate import judge


def test_unreadable_run_is_one_integrity_error(tmp_path: Path) -> None:
    judgement = judge(tmp_path / "missing", baselines_root=tmp_path / "none", strict=True)
    (check,) = judgement.checks
    assert (check.kind, check.name, check.metric, check.verdict) == (
        "integrity", "inputs readable", "inputs", "error")
    assert "run.json: not found" in check.reason
    assert judgement.run is None and judgement.strict is True
    assert judgement.overall == "error" and judgement.exit_code == 2


def test_bad_judge_table_keeps_the_run_and_strictness(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    raw = json.loads((run_dir / "run.json").read_text())
    raw["judge_table"] = {"default_floor": "five percent"}
    (run_dir / "run.json").write_text(json.dumps(raw))
    judgement = judge(run_dir, baselines_root=tmp_path / "none", strict=False)
    (check,) = judgement.checks
    assert check.kind == "integrity" and check.verdict == "error"
    assert "default_floor" in check.reason
    assert judgement.run is not None and judgement.run["suite"] == "synthetic"
    assert judgement.strict is False
