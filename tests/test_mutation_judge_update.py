"""update-baselines and the baseline identity: the holes mutation testing showed (issue 15).

Each test states one refusal on its own (a run that is wrong in exactly one way), so a refusal
that silently stops applying cannot hide behind another one that still fires.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from judge_runs import make_run

from servegate.judge import update
from servegate.judge.baselines import BaselineMismatchError, baseline_from_run, ensure_matches


def _target(root: Path, runner: str = "cpu", model: str = "smollm2-135m",
             suite: str = "synthetic") -> Path:
    return root / runner / model / f"{suite}.json"


def _edit_run(run_dir: Path, **changes: object) -> Path:
    path = run_dir / "run.json"
    run = json.loads(path.read_text())
    for key, value in changes.items():
        if value is None:
            run.pop(key, None)
        else:
            run[key] = value
    path.write_text(json.dumps(run))
    return run_dir


def test_a_clean_run_is_stored_with_its_completeness(tmp_path: Path) -> None:
    """The control for the refusals below: the same run, unedited, is accepted."""
    run = make_run(tmp_path / "run")
    assert update.update(run, root=tmp_path / "b") == 0
    prov = json.loads(_target(tmp_path / "b").read_text())["provenance"]
    assert prov["run_complete"] is True
    assert prov["forced"] is False and prov["forced_reasons"] == []


def test_run_without_a_complete_key_is_refused(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    run = _edit_run(make_run(tmp_path / "run"), complete=None)
    assert update.update(run, root=tmp_path / "b") == 2
    assert not _target(tmp_path / "b").exists()
    assert "incomplete" in capsys.readouterr().err


def test_run_without_a_complete_key_is_named_incomplete() -> None:
    reasons = update.refusal_reasons(
        {"suite": "synthetic", "model_profile": "smollm2-135m", "runner_class": "cpu",
         "points": [{"mode": "off"}]},  # type: ignore[typeddict-item]
        _target(Path("baselines")), None)
    assert reasons == ["run is incomplete (run.json complete is not true)"]


def test_fault_injected_run_is_refused(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    run = _edit_run(make_run(tmp_path / "run"),
                    injected={"SERVEGATE_INJECT_DELAY_MS": "40"})
    assert update.update(run, root=tmp_path / "b") == 2
    err = capsys.readouterr().err
    assert "fault injection" in err and "SERVEGATE_INJECT_DELAY_MS" in err
    assert not _target(tmp_path / "b").exists()


def test_run_without_points_is_refused(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    run = _edit_run(make_run(tmp_path / "run"), points=[])
    assert update.update(run, root=tmp_path / "b") == 2
    assert "run has no points" in capsys.readouterr().err


def test_gpu_run_is_never_written_into_a_new_cpu_file(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """An mi355x (gfx95) run given a baselines/cpu/... target that does not exist yet: no
    existing baseline to disagree with, but the path itself names another runner class."""
    gpu = make_run(tmp_path / "gpu", runner_class="mi355x")
    target = _target(tmp_path / "b")
    assert update.main([str(gpu), "--baseline", str(target)]) == 2
    assert "is not baselines/mi355x/smollm2-135m/synthetic.json" in capsys.readouterr().err
    assert not target.exists()
    # ... while its own place is fine.
    assert update.main([str(gpu), "--baseline", str(_target(tmp_path / "b", "mi355x"))]) == 0


@pytest.mark.parametrize(("part", "target_args"), [
    ("model", {"model": "other-model"}),
    ("suite", {"suite": "other-suite"}),
])
def test_new_target_for_another_model_or_suite_is_refused(tmp_path: Path, part: str,
                                                          target_args: dict[str, str]) -> None:
    run = make_run(tmp_path / "run")
    target = _target(tmp_path / "b", **target_args)
    assert update.main([str(run), "--baseline", str(target)]) == 2, part
    assert not target.exists()


def test_existing_baseline_of_another_suite_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "b"
    assert update.update(make_run(tmp_path / "r1"), root=root) == 0
    other_suite = make_run(tmp_path / "r2", suite="nightly")
    reasons = update.refusal_reasons(json.loads((other_suite / "run.json").read_text()),
                                     _target(root), json.loads(_target(root).read_text()))
    assert "suite: run has 'nightly' but baseline " in "\n".join(reasons)


def _baseline_doc(tmp_path: Path, **identity: str) -> dict[str, object]:
    run = json.loads((make_run(tmp_path / "bl", **identity) / "run.json").read_text())
    return baseline_from_run(run, tmp_path / "bl")


@pytest.mark.parametrize(("field", "run_identity", "words"), [
    ("suite", {"suite": "nightly"}, "suite 'synthetic'"),
    ("model_profile", {"model_profile": "glm-5.2-mxfp4"}, "model_profile 'smollm2-135m'"),
    ("runner_class", {"runner_class": "mi355x"}, "runner_class 'cpu'"),
])
def test_ensure_matches_refuses_a_baseline_differing_in_one_field(
        tmp_path: Path, field: str, run_identity: dict[str, str], words: str) -> None:
    baseline = _baseline_doc(tmp_path)
    run = json.loads((make_run(tmp_path / "run", **run_identity) / "run.json").read_text())
    with pytest.raises(BaselineMismatchError, match=words):
        ensure_matches(baseline, Path("baselines/x.json"), run, "results/r")
    same = json.loads((make_run(tmp_path / "same") / "run.json").read_text())
    ensure_matches(baseline, Path("baselines/x.json"), same, "results/r")   # no error


def test_provenance_records_whether_the_run_was_complete(tmp_path: Path) -> None:
    complete = json.loads((make_run(tmp_path / "c") / "run.json").read_text())
    assert baseline_from_run(complete, tmp_path / "c")["provenance"]["run_complete"] is True
    partial = json.loads((make_run(tmp_path / "p", complete=False) / "run.json").read_text())
    prov = baseline_from_run(partial, tmp_path / "p", forced_reasons=["run is incomplete"])[
        "provenance"]
    assert prov["run_complete"] is False
    assert prov["forced"] is True and prov["forced_reasons"] == ["run is incomplete"]


def test_forced_incomplete_run_keeps_run_complete_false_on_disk(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", complete=False)
    target = _target(tmp_path / "b")
    assert update.main([str(run), "--force", "--baseline", str(target)]) == 0
    prov = json.loads(target.read_text())["provenance"]
    assert prov["run_complete"] is False
    assert prov["run_started_at"] == "2026-11-30T12:00:00+00:00"
    assert prov["run_finished_at"] == "2026-11-30T12:30:00+00:00"


# Baselines with per-question outcomes, the command line, and the old -> new printout.

def _baseline_with_outcomes(tmp_path: Path, outcomes: object, n: int = 4,
                            correct: int = 2) -> Path:
    run = json.loads((make_run(tmp_path / "run") / "run.json").read_text())
    doc = baseline_from_run(run, tmp_path / "run")
    doc["accuracy"] = {"on": {"n": n, "correct": correct, "accuracy": correct / n,
                              "outcomes": outcomes}}
    path = tmp_path / "bl.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(("outcomes", "words"), [
    ([1, 0], "accuracy.on.outcomes must be an object with ids and correct"),
    ({"ids": [1, 2, 3], "correct": "1100"}, "accuracy.on.outcomes.ids must be 4 unique integer "
                                            "question ids, got '3 ids'"),
    ({"ids": "1234", "correct": "1100"}, "accuracy.on.outcomes.ids must be 4 unique integer "
                                         "question ids, got '1234'"),
    ({"ids": [1, 2, 3, 3], "correct": "1100"}, "outcomes.ids must be 4 unique"),
    ({"ids": [1, 2, 3, True], "correct": "1100"}, "outcomes.ids must be 4 unique"),
    ({"ids": [1, 2, 3, "4"], "correct": "1100"}, "outcomes.ids must be 4 unique"),
    ({"ids": [1, 2, 3, 4], "correct": "110"}, "accuracy.on.outcomes.correct must be a string "
                                              "of 4 '0'/'1' characters, got '110'"),
    ({"ids": [1, 2, 3, 4], "correct": "11x0"}, "outcomes.correct must be a string of 4"),
    ({"ids": [1, 2, 3, 4], "correct": 1100}, "outcomes.correct must be a string of 4"),
    ({"ids": [1, 2, 3, 4], "correct": "1110"}, "accuracy.on.outcomes.correct must be 2 ones "
                                               "(accuracy correct), got 3"),
])
def test_stored_outcomes_are_validated_naming_the_field(tmp_path: Path, outcomes: object,
                                                        words: str) -> None:
    from servegate.judge.baselines import BaselineError, load_baseline

    path = _baseline_with_outcomes(tmp_path, outcomes)
    with pytest.raises(BaselineError) as info:
        load_baseline(path)
    assert str(info.value).startswith(f"{path}: ") and words in str(info.value)


def test_valid_outcomes_load_and_decode(tmp_path: Path) -> None:
    from servegate.judge.baselines import decode_outcomes, load_baseline

    path = _baseline_with_outcomes(tmp_path, {"ids": [7, 3, 11, 5], "correct": "1010"})
    entry = load_baseline(path)["accuracy"]["on"]
    assert decode_outcomes(entry["outcomes"]) == {7: True, 3: False, 11: True, 5: False}
    with pytest.raises(ValueError):
        decode_outcomes({"ids": [1, 2], "correct": "1"})


def test_main_parses_force_and_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                        ) -> None:
    run = make_run(tmp_path / "run", complete=False)
    target = tmp_path / "b" / "cpu" / "smollm2-135m" / "synthetic.json"
    assert update.main([str(run), "--baseline", str(target)]) == 2
    assert not target.exists()
    assert update.main([str(run), "--baseline", str(target), "--force"]) == 0
    assert json.loads(target.read_text())["provenance"]["forced"] is True
    assert f"wrote {target}" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        update.main([])


def test_diff_lines_by_hand() -> None:
    old = {"points": [{"mode": "off", "concurrency": 2, "metrics": {
        "mean_ttft_ms": {"value": 100.0}, "gone_ms": {"value": 5.0},
        "zero_ms": {"value": 0.0}}}],
        "accuracy": {"off": {"accuracy": 0.8, "n": 100}, "on": {"accuracy": 0.5, "n": 10}}}
    new = {"points": [{"mode": "off", "concurrency": 2, "metrics": {
        "mean_ttft_ms": {"value": 110.0}, "new_ms": {"value": 1.23456},
        "zero_ms": {"value": 3.0}}},
        {"mode": "on", "concurrency": 4, "metrics": {"mean_ttft_ms": {"value": 90.0}}}],
        "accuracy": {"off": {"accuracy": 0.85, "n": 120}, "forced": {"accuracy": 0.9, "n": 50}}}
    def row(label: str, metric: str, a: str, b: str, tail: str) -> str:
        return f"  {label.ljust(12)} {metric.ljust(24)} {a.rjust(10)} -> {b.ljust(10)} {tail}"

    assert update.diff_lines(old, new) == [
        row("off@c2", "gone_ms", "5", "-", "(removed)"),
        row("off@c2", "mean_ttft_ms", "100", "110", "(x1.100)"),
        row("off@c2", "new_ms", "-", "1.235", "(new)"),
        row("off@c2", "zero_ms", "0", "3", "(old value 0)"),
        row("on@c4", "mean_ttft_ms", "-", "90", "(new)"),
        row("forced", "accuracy", "-", "0.9", "(new) n=50"),
        row("off", "accuracy", "0.8", "0.85", "(+0.0500) n=120"),
        row("on", "accuracy", "0.5", "-", "(removed) n=None"),
    ]
    assert update.diff_lines(None, {"points": []}) == []
