"""Reports: junit.xml, verdict.json, summary.md, GITHUB_STEP_SUMMARY, plots, pytest-benchmark."""

from __future__ import annotations

import json

import pytest
from report_builders import seven_verdicts

from servegate.report import verdict_json


def test_verdict_json_schema(tmp_path):
    judgement = seven_verdicts(tmp_path / "run")
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
