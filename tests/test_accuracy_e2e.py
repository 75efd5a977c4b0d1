"""End to end: `servegate bench --accuracy-only` on the real sglang CPU server, off and forced.

Real components throughout (sglang server on CPU, SmolLM2-135M, the real GSM8K test file); the
suite's ``[gsm8k]`` table decides the subset. Needs ``servegate.bench`` to accept
``--accuracy-only`` (skip performance points, run GSM8K per mode, store ``paired_accuracy`` and
the summary section) - until that is wired this test fails on the unknown flag.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import packaged_gsm8k

pytestmark = pytest.mark.e2e




def test_cpu_accuracy_off_and_forced_paired(tmp_path: Path) -> None:
    pytest.importorskip("sglang", reason="needs the real sglang (shared CPU environment)")
    packaged_gsm8k()
    from servegate import bench
    from servegate.accuracy.report import paired_analysis

    code = bench.main(["--suite", "cpu", "--accuracy-only", "--modes", "off,forced",
                       "--runner", "cpu", "--results-dir", str(tmp_path)])
    # The cpu suite has a stored performance baseline; an accuracy-only run (no load points)
    # must not be judged against it (that would be an "error: missing points" verdict).
    [run_dir] = [p for p in tmp_path.iterdir() if p.is_dir()]
    run = json.loads((run_dir / "run.json").read_text())
    assert code == 0, run.get("error")
    assert run["complete"] is True
    assert not (run_dir / "verdict.json").exists()

    expected_n = None
    for mode in ("off", "forced"):
        result = run["accuracy"][mode]
        records = [json.loads(line) for line in
                   (run_dir / result["records"]).read_text().splitlines()]
        expected_n = expected_n or result["n"]
        assert len(records) == result["n"] == expected_n > 0
        assert [r["id"] for r in records] == list(range(expected_n))
        for r in records:
            assert {"id", "gold", "predicted", "correct", "output", "strict",
                    "flexible"} <= set(r)
            assert isinstance(r["output"], str)
        # The model really answered: an empty output (it began with the stop word
        # "Question") is a legitimate wrong answer, but not for most questions.
        assert sum(bool(r["output"]) for r in records) > len(records) // 2
        assert result["correct"] == sum(r["correct"] for r in records)
        assert result["wilson_low"] <= result["accuracy"] <= result["wilson_high"]
        assert result["invalid"] == sum(r["predicted"] is None for r in records)
        assert len(result["dataset_sha256"]) == 64
        assert result["output_tokens"] > 0 and result["output_throughput_tok_s"] > 0

    paired = paired_analysis(run_dir, "forced", "off")
    assert paired["n"] == expected_n
    assert paired["a_only"] + paired["b_only"] + paired["both_correct"] + paired["both_wrong"] \
        == expected_n
    assert 0.0 <= paired["mcnemar_p"] <= 1.0 and 0 < paired["mde"] <= 1.0
    assert run["paired_accuracy"]["forced_vs_off"] == pytest.approx(paired)
    assert "## Accuracy (GSM8K)" in (run_dir / "summary.md").read_text()
