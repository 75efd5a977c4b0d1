"""Reports: junit.xml, verdict.json, summary.md, GITHUB_STEP_SUMMARY, plots, pytest-benchmark."""

from __future__ import annotations

import json

import pytest
from judge_runs import make_run

from servegate.config.judge import JudgeConfig
from servegate.judge.judgement import Judgement
from servegate.report import pytest_benchmark


def test_pytest_benchmark_format_matches_the_plugin(tmp_path):
    stats_mod = pytest.importorskip("pytest_benchmark.stats")
    run_dir = make_run(tmp_path / "run", repeats=2, n_requests=31)
    from servegate.core.results import load_run

    [path] = pytest_benchmark.write(Judgement(run_dir, load_run(run_dir), JudgeConfig(), []))
    doc = json.loads(path.read_text())
    assert set(doc) == {"machine_info", "commit_info", "benchmarks", "datetime", "version"}
    assert len(doc["benchmarks"]) == 4
    bench = doc["benchmarks"][0]
    assert bench["extra_info"]["metrics"]["mean_ttft_ms"] > 0
    assert bench["stats"]["rounds"] == 62
    reference = stats_mod.Stats()
    for value in bench["stats"]["data"]:
        reference.update(value)
    for field in stats_mod.Stats.fields:
        assert bench["stats"][field] == pytest.approx(getattr(reference, field)), field
    # the plugin's own loader accepts the file (normalize_stats is what `compare` applies)
    normalized = stats_mod.normalize_stats(dict(bench["stats"]))
    assert normalized["ops"] == pytest.approx(reference.ops)


def test_pytest_benchmark_cli_reads_the_file(tmp_path):
    pytest.importorskip("pytest_benchmark")
    import subprocess
    import sys

    from servegate.core.results import load_run

    run_dir = make_run(tmp_path / "run")
    [path] = pytest_benchmark.write(Judgement(run_dir, load_run(run_dir), JudgeConfig(), []))
    out = subprocess.run([sys.executable, "-m", "pytest_benchmark", "compare", str(path),
                          "--columns=mean,rounds"], capture_output=True, text=True,
                         cwd=tmp_path, check=True, timeout=120)
    assert "serve[off-c2]" in out.stdout and "serve[on-c4]" in out.stdout
