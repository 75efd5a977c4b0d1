"""Faults of the judge stage: ``servegate compare`` with a missing, malformed or foreign
baseline or an unwritable run folder, and ``servegate update-baselines`` with a malformed or
foreign target, a full disk or a missing run. The old baseline is never touched.

No server needed: runs are synthetic (:func:`judge_runs.make_run`).
"""

from __future__ import annotations

import errno
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from fault_helpers import _assert_no_half_json, _cause, _failing_disk
from judge_runs import make_run

from servegate import compare as command
from servegate.judge import update
from servegate.judge.baselines import baseline_from_run, write_baseline
from servegate.results import load_run

# --------------------------------------------------------------------------- baselines

@pytest.fixture
def judged_run(tmp_path: Path) -> Path:
    return make_run(tmp_path / "run", n_requests=20)


def _baseline_for(tmp_path: Path, **run_kwargs: Any) -> Path:
    source = make_run(tmp_path / f"src-{uuid.uuid4().hex[:6]}", n_requests=20, **run_kwargs)
    path = tmp_path / "baselines" / "cpu" / "smollm2-135m" / "synthetic.json"
    write_baseline(path, baseline_from_run(load_run(source), source))
    return path


def _compare(run_dir: Path, baseline: Path, capsys: pytest.CaptureFixture[str]
             ) -> tuple[int, str]:
    code = command.main([str(run_dir), "--baseline", str(baseline), "--no-plots"])
    out = capsys.readouterr().out
    _assert_no_half_json(run_dir)
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["overall"] == "error"
    return code, out


def _error_line(out: str) -> str:
    """The headline of an error verdict (the first line): it ends with the error's reason, and
    the one gated check repeats it."""
    lines = out.splitlines()
    assert lines[0].startswith("ERROR (exit 2): inputs readable: ")
    (check,) = [ln.strip() for ln in lines[1:] if ln.strip().startswith("ERROR ")]
    assert lines[0].endswith(check.removeprefix("ERROR").strip().removeprefix("inputs readable"))
    return lines[0]


def test_compare_baseline_missing(judged_run: Path, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere" / "synthetic.json"
    code, out = _compare(judged_run, missing, capsys)
    assert code == 2
    assert _error_line(out).endswith(f"{missing}: baseline file not found")


@pytest.mark.parametrize(("content", "expected"), [
    ('{"schema_version": 1, "runner_class": "cpu",', "not valid JSON"),
    ("", "not valid JSON"),
    ('{"schema_version": 1, "runner_class": "cpu", "model_profile": "smollm2-135m", '
     '"suite": "synthetic", "provenance": {"created_at": "x", "source_run": "y"}, '
     '"points": {}}', "points must be a list, got {}"),
])
def test_compare_baseline_malformed(judged_run: Path, tmp_path: Path, content: str,
                                    expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, out = _compare(judged_run, bad, capsys)
    assert code == 2
    assert f"{bad}: {expected}" in _error_line(out)


def test_compare_baseline_for_another_runner(judged_run: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    other = _baseline_for(tmp_path, runner_class="mi300x")
    code, out = _compare(judged_run, other, capsys)
    assert code == 2
    assert "baseline does not belong to this run: runner_class 'mi300x'" in _error_line(out)


def test_compare_reports_unwritable(judged_run: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    _failing_disk(monkeypatch, judged_run, errno.ENOSPC, after=0)
    code = command.main([str(judged_run), "--no-plots"])
    err = capsys.readouterr().err
    assert code == 2
    assert re.fullmatch(r"cannot write reports into .*: \[Errno 28\] No space left on device: "
                        r"'.*verdict\.json'", _cause(err, "servegate compare: "))
    assert not (judged_run / "verdict.json").exists()
    _assert_no_half_json(judged_run)


def _update(run_dir: Path, target: Path, capsys: pytest.CaptureFixture[str]
            ) -> tuple[int, str]:
    code = update.main([str(run_dir), "--baseline", str(target)])
    return code, capsys.readouterr().err


def test_update_baselines_malformed_target_untouched(judged_run: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "baselines" / "cpu" / "smollm2-135m" / "synthetic.json"
    target.parent.mkdir(parents=True)
    target.write_text("{ half a file")
    code, err = _update(judged_run, target, capsys)
    assert code == 2
    assert _cause(err, "update-baselines: ").startswith(f"{target}: not valid JSON")
    assert target.read_text() == "{ half a file"


def test_update_baselines_other_runner_refused(judged_run: Path, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    target = _baseline_for(tmp_path, runner_class="mi300x")
    before = target.read_bytes()
    code, err = _update(judged_run, target, capsys)
    assert code == 2
    assert "runner_class: run has 'cpu' but baseline" in err and "'mi300x'" in err
    assert target.read_bytes() == before


def test_update_baselines_disk_full_keeps_old(judged_run: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    target = _baseline_for(tmp_path)
    before = target.read_bytes()
    _failing_disk(monkeypatch, target.parent, errno.ENOSPC, after=0)
    code, err = _update(judged_run, target, capsys)
    assert code == 2
    assert _cause(err, "update-baselines: ") == (
        f"cannot write {target}: [Errno 28] No space left on device: '{target}'")
    assert target.read_bytes() == before
    assert [p.name for p in target.parent.iterdir()] == [target.name]


def test_update_baselines_run_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _update(tmp_path / "no-such-run", tmp_path / "b.json", capsys)
    assert code == 2 and "no-such-run" in _cause(err, "update-baselines: ")
    assert not (tmp_path / "b.json").exists()
