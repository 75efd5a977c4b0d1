"""An unreadable run is one integrity error naming why (servegate.judge.evaluate, issue 15)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from judge_runs import make_run

from servegate.config.judge import JudgeConfig, JudgeConfigError
from servegate.judge.evaluate import judge, judge_config_for_run
from servegate.judge.stats import run_seed


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


# ------------------------------------------------------------------- the judged family (issue 15)

def _write(run_dir: Path, **changes: object) -> Path:
    raw = json.loads((run_dir / "run.json").read_text())
    raw.update(changes)
    (run_dir / "run.json").write_text(json.dumps(raw))
    return run_dir


TABLE = {"metrics": ["mean_ttft_ms"], "seed": 7, "confidence": 0.9}


def _judged(tmp_path: Path, **kw: object) -> tuple[Path, object]:
    run_dir = _write(make_run(tmp_path / "run", runner_class="mi300x", concurrencies=(4,),
                              n_requests=100), judge_table=TABLE,
                     suite_source={"path": "suites/x.toml"}, run_id="night-1")
    return run_dir, judge(run_dir, baselines_root=tmp_path / "none", **kw)  # type: ignore[arg-type]


def test_settings_seed_and_family_are_noted(tmp_path: Path) -> None:
    _, judgement = _judged(tmp_path)
    seed = run_seed(7, "night-1")
    assert judgement.config.seed == seed and seed != 7
    assert judgement.notes[0] == "judge settings from suites/x.toml (as recorded in run.json)"
    assert f"judge seed {seed} (suite seed mixed with run night-1)" in judgement.notes
    missing = tmp_path / "none" / "mi300x" / "smollm2-135m" / "synthetic.json"
    assert (f"no baseline at {missing}: only in-run A/B claims judged (store one with "
            "`servegate update-baselines RUN_DIR`)") in judgement.notes
    # no-op claims at c4 (prefill test + 1 TOST; the TOST may report instead of gating, but it
    # is counted): a family of 2 at a family-wise 90 %
    assert judgement.family_size == 2
    assert judgement.per_check_confidence == 1 - 0.1 / 2
    assert judgement.notes[-1] == ("2 checks judged together: each interval at 95.000% "
                                   "(Bonferroni for a family-wise 90%)")
    assert judgement.baseline_file is None and judgement.baseline is None
    assert [c.name for c in judgement.checks] == [
        "no-op: on@c4 prefill batches not aligned beyond off (exact fill inactive)",
        "no-op: on@c4 mean_ttft_ms equivalent to off within ±5.0%"]


def test_the_run_key_falls_back_to_start_time_then_folder(tmp_path: Path) -> None:
    run_dir = _write(make_run(tmp_path / "folder-name"), judge_table=TABLE)
    assert judge(run_dir, baselines_root=tmp_path).config.seed == run_seed(
        7, "2026-11-30T12:00:00+00:00")
    raw = json.loads((run_dir / "run.json").read_text())
    del raw["started_at"]
    (run_dir / "run.json").write_text(json.dumps(raw))
    assert judge(run_dir, baselines_root=tmp_path).config.seed == run_seed(7, "folder-name")


def test_measured_run_spread_replaces_the_assumption(tmp_path: Path) -> None:
    _, judgement = _judged(tmp_path, measured_run_spread=True)
    assert judgement.config.run_to_run_cv_dof == 0.0
    assert ("run-to-run spread measured from the baseline's nights replaces the suite's "
            "assumed run_to_run_cv") in judgement.notes
    _, plain = _judged(tmp_path / "2")
    assert plain.config.run_to_run_cv_dof == 10.0


def test_incomplete_and_empty_runs_lead_with_integrity_errors(tmp_path: Path) -> None:
    run_dir = _write(make_run(tmp_path / "run"), complete=False, error="server died")
    checks = judge(run_dir, baselines_root=tmp_path).checks
    assert (checks[0].name, checks[0].kind, checks[0].metric, checks[0].verdict,
            checks[0].reason) == ("run complete", "integrity", "complete", "error",
                                  "run is incomplete: server died")
    empty = _write(make_run(tmp_path / "empty"), points=[], complete=False)
    del_error = judge(empty, baselines_root=tmp_path).checks
    assert [(c.name, c.reason) for c in del_error[:2]] == [
        ("run has points", "run.json has no points"),
        ("run complete", "run is incomplete: not every planned point finished")]
    done = judge(make_run(tmp_path / "ok"), baselines_root=tmp_path).checks
    assert not [c for c in done if c.kind == "integrity"]


def test_a_run_without_a_recorded_table_uses_its_suite_file(tmp_path: Path) -> None:
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "synthetic.toml").write_text('[judge]\nmetrics = ["mean_ttft_ms"]\nseed = 3\n')
    judgement = judge(make_run(tmp_path / "run"), suites_dir=suites, baselines_root=tmp_path)
    assert judgement.config.metrics == ("mean_ttft_ms",)
    assert judgement.notes[0].startswith("judge settings from ")
    assert str(suites / "synthetic.toml") in judgement.notes[0]


def test_a_recorded_null_table_means_defaults_and_says_so(tmp_path: Path) -> None:
    run_dir = _write(make_run(tmp_path / "run"), judge_table=None,
                     suite_source={"path": "my.toml"})
    judgement = judge(run_dir, baselines_root=tmp_path)
    assert judgement.notes[0] == "judge settings from <defaults: my.toml has no [judge] table>"
    with pytest.raises(JudgeConfigError) as info:   # (run.json validation refuses it first)
        judge_config_for_run({"judge_table": [1], "suite_source": {"path": "my.toml"}})
    assert str(info.value) == "run.json: judge_table must be a table (from my.toml)"
    with pytest.raises(JudgeConfigError, match=r"<unknown suite file>\)$"):
        judge_config_for_run({"judge_table": 1})
    assert judge_config_for_run({}).source == JudgeConfig().source
