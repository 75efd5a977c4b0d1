"""Reports: junit.xml, verdict.json, summary.md, GITHUB_STEP_SUMMARY, plots, pytest-benchmark."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from judge_runs import make_run

from servegate import compare as command
from servegate.config.judge import JudgeConfig
from servegate.judge import update
from servegate.judge.checks import Check
from servegate.judge.evaluate import judge
from servegate.judge.judgement import Judgement
from servegate.judge.stats import Interval
from servegate.report import junit, pytest_benchmark, summary, verdict_json, write_reports

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


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


def test_junit_counts_and_parses(tmp_path):
    [path] = junit.write(_handmade(tmp_path / "run"))
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == 6                                    # the gated checks
    assert "an experiment" not in {case.get("name") for case in cases}
    assert len(suite.findall("testcase/failure")) == 2        # the experiment does not fail
    assert len(suite.findall("testcase/error")) == 1
    assert len(suite.findall("testcase/skipped")) == 1
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"),
            suite.get("skipped")) == ("6", "2", "1", "1")
    skipped = suite.find("testcase/skipped")
    assert "MDE" in skipped.get("message") and "inconclusive" in skipped.get("message")
    # the experiment is reported as a property of the suite: verdict, ratio, interval
    [prop] = suite.findall("properties/property")
    assert (prop.get("name"), prop.get("value")) == ("an experiment",
                                                     "regression 1.100 [1.060, 1.140]")
    assert suite.find("system-out").text.startswith("REGRESSION (exit 1): a regression x1.200")


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


def test_summary_section_replaced_not_duplicated(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    judgement = _handmade(tmp_path / "run")
    path = tmp_path / "run" / "summary.md"
    path.write_text("# Run\n\n## Measure\n\ntable\n\n## Verdict\n\nstale\n\n## Accuracy\n\nacc\n")
    summary.write(judgement)
    summary.write(judgement)
    text = path.read_text()
    assert text.count("## Verdict") == 1
    assert "stale" not in text
    assert text.index("## Measure") < text.index("## Verdict") < text.index("## Accuracy")
    assert "acc" in text
    # the headline first, the gated table, then every check inside <details>
    assert text[text.index("## Verdict"):].splitlines()[2] == (
        "**REGRESSION (exit 1)**: a regression x1.200 [1.150, 1.250], floor 5 % "
        "(+1 more regression)")
    gated, full = text.split("<details><summary>All 7 checks</summary>")
    assert gated.count("| **REGRESSION** |") == 2           # the experiment does not gate
    assert full.count("| **REGRESSION** |") == 2 and full.count("| **REGRESSION** (info) |") == 1
    assert "| **ERROR** | an infra error | - | - | - | - | point missing |" in gated
    assert full.index("</details>") < full.index("## Accuracy")
    fresh = tmp_path / "fresh"
    summary.write(_handmade(fresh))
    assert (fresh / "summary.md").read_text().startswith("## Verdict")


def test_github_step_summary_written_when_set(tmp_path, monkeypatch):
    target = tmp_path / "step_summary.md"
    target.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    summary.write(_handmade(tmp_path / "run"))
    text = target.read_text()
    assert text.startswith("earlier step\n") and "## Verdict" in text


def test_full_pipeline_writes_every_report(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    base = make_run(tmp_path / "base", modes=("off", "on", "forced"), concurrencies=(2, 4, 8),
                    seed=1)
    assert update.update(base, root=tmp_path / "baselines") == 0
    cur = make_run(tmp_path / "cur", modes=("off", "on", "forced"), concurrencies=(2, 4, 8),
                   seed=2)
    judgement = judge(cur, baselines_root=tmp_path / "baselines")
    paths = write_reports(judgement)
    names = {p.relative_to(cur).as_posix() for p in paths}
    # the default gated metrics, each plotted against concurrency, plus the TTFT CDFs
    assert names == {"verdict.json", "summary.md", "junit.xml", "pytest_benchmark.json",
                     "plots/mean_ttft_ms_vs_concurrency.png",
                     "plots/median_tpot_ms_vs_concurrency.png",
                     "plots/mean_e2e_latency_ms_vs_concurrency.png",
                     "plots/output_throughput_vs_concurrency.png", "plots/ttft_cdf.png"}
    for png in (cur / "plots").glob("*.png"):
        assert png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 5000
    verdict_json.validate(json.loads((cur / "verdict.json").read_text()))
    ET.parse(cur / "junit.xml")


def test_main_exit_codes(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    base = make_run(tmp_path / "base", seed=1, n_requests=120, request_cv=0.03)
    assert update.update(base, root=tmp_path / "b") == 0
    file = tmp_path / "b" / "cpu" / "smollm2-135m" / "synthetic.json"
    # one repeat per side: the assumed 5 % run-to-run CV (10 df) bounds what can be shown
    slow = make_run(tmp_path / "slow", seed=2, n_requests=120, request_cv=0.03,
                    effect=lambda _m, _c: 1.6)
    capsys.readouterr()
    assert command.main([str(slow), "--baseline", str(file), "--no-plots"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("REGRESSION (exit 1): off@c2 mean_ttft_ms vs baseline x1.")
    wrote = " ".join(line.strip() for line in out[-2:]).split("wrote into ")[-1]
    assert wrote == f"{slow}: verdict.json, summary.md, junit.xml, pytest_benchmark.json"
    same = make_run(tmp_path / "same", seed=3, n_requests=120, request_cv=0.03)
    # throughput has one repeat per arm -> inconclusive: 0 normally, 3 with --strict
    assert command.main([str(same), "--baseline", str(file), "--no-plots"]) == 0
    capsys.readouterr()
    assert command.main([str(same), "--baseline", str(file), "--no-plots", "--strict"]) == 3
    assert capsys.readouterr().out.startswith("INCONCLUSIVE (exit 3, --strict): ")
    assert command.main([str(tmp_path / "nowhere"), "--no-plots"]) == 2
    other = make_run(tmp_path / "gpu", runner_class="mi300x", seed=4)
    assert command.main([str(other), "--baseline", str(file), "--no-plots"]) == 2
    doc = json.loads((other / "verdict.json").read_text())
    assert doc["overall"] == "error" and "'mi300x'" in doc["checks"][0]["reason"]


def test_pytest_benchmark_format_matches_the_plugin(tmp_path):
    stats_mod = pytest.importorskip("pytest_benchmark.stats")
    run_dir = make_run(tmp_path / "run", repeats=2, n_requests=31)
    from servegate.results import load_run

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

    from servegate.results import load_run

    run_dir = make_run(tmp_path / "run")
    [path] = pytest_benchmark.write(Judgement(run_dir, load_run(run_dir), JudgeConfig(), []))
    out = subprocess.run([sys.executable, "-m", "pytest_benchmark", "compare", str(path),
                          "--columns=mean,rounds"], capture_output=True, text=True,
                         cwd=tmp_path, check=True, timeout=120)
    assert "serve[off-c2]" in out.stdout and "serve[on-c4]" in out.stdout
