"""Reports: junit.xml, verdict.json, summary.md, GITHUB_STEP_SUMMARY, plots, pytest-benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servegate.config.judge import JudgeConfig
from servegate.judge.checks import Check
from servegate.judge.judgement import Judgement
from servegate.judge.stats import Interval
from servegate.report import verdict_json


def _iv(est: float, low: float, high: float) -> Interval:
    return Interval(est, low, high, 0.99, "repeats", 3, 3)


def _handmade(run_dir: Path) -> Judgement:
    run_dir.mkdir(parents=True, exist_ok=True)
    checks = [
        Check("baseline", "a pass", "mean_ttft_ms", "pass", mode="off", concurrency=4,
              interval=_iv(1.0, 0.98, 1.02), floor=0.05),
        Check("baseline", "a regression", "mean_ttft_ms", "regression", mode="on",
              concurrency=4, interval=_iv(1.2, 1.15, 1.25), floor=0.05),
        Check("baseline", "another regression", "output_throughput", "regression", mode="on",
              concurrency=8, interval=_iv(0.8, 0.75, 0.85), floor=0.05),
        Check("baseline", "an inconclusive", "median_tpot_ms", "inconclusive", mode="off",
              concurrency=8, interval=_iv(1.03, 0.9, 1.2), floor=0.05),
        Check("integrity", "an infra error", "points", "error", mode="on", concurrency=16,
              reason="point missing"),
        Check("experiment", "an experiment", "mean_ttft_ms", "regression", gate=False,
              mode="forced", concurrency=4, reference="off", interval=_iv(1.1, 1.06, 1.14),
              floor=0.05),
        Check("baseline", "an improvement", "mean_ttft_ms", "improvement", mode="off",
              concurrency=16, interval=_iv(0.8, 0.78, 0.82), floor=0.05),
    ]
    return Judgement(run_dir, None, JudgeConfig(), checks, family_size=6,
                     per_check_confidence=0.99)


def test_verdict_json_schema(tmp_path):
    judgement = _handmade(tmp_path / "run")
    [written] = verdict_json.write(judgement)
    doc = json.loads(written.read_text())
    verdict_json.validate(doc)
    assert doc["overall"] == "regression" and doc["exit_code"] == 1
    assert doc["counts"] == {"error": 1, "improvement": 1, "inconclusive": 1, "pass": 1,
                             "regression": 2}
    entry = next(c for c in doc["checks"] if c["name"] == "a regression")
    assert entry["metric"] == "mean_ttft_ms" and entry["point"] == "on@c4"
    assert entry["ratio"] == pytest.approx(1.2) and entry["interval"] == [1.15, 1.25]
    assert entry["floor"] == 0.05 and entry["verdict"] == "regression"
    with pytest.raises(ValueError, match="checks\\[0\\]"):
        verdict_json.validate({**doc, "checks": [{"verdict": "pass"}]})
    with pytest.raises(ValueError, match="overall"):
        verdict_json.validate({**doc, "overall": "maybe"})
