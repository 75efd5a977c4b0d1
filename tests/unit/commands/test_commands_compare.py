"""Faults of the judge stage: ``servegate compare`` with a missing, malformed or foreign
baseline or an unwritable run folder, and ``servegate update-baselines`` with a malformed or
foreign target, a full disk or a missing run. The old baseline is never touched.

No server needed: runs are synthetic (:func:`judge_runs.make_run`).
"""

from __future__ import annotations

import errno
import json
import re
from pathlib import Path

import pytest
from fault_helpers import _assert_no_half_json, _cause, _failing_disk
from judge_runs import make_run, stored_baseline

from servegate.commands import compare
from servegate.commands import compare as command
from servegate.commands import update_baselines as update
from servegate.history import store as history_store

# --------------------------------------------------------------------------- baselines

@pytest.fixture
def judged_run(tmp_path: Path) -> Path:
    return make_run(tmp_path / "run", n_requests=20)


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
    other = stored_baseline(tmp_path, runner_class="mi300x")
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


# History wired into the pipeline: `compare --baseline history:N`, bench's auto-add.


def _nights(store: Path, tmp_path: Path, count: int) -> None:
    for night in range(count):
        run_dir = make_run(tmp_path / f"night-{night:02d}", modes=("off", "on"), repeats=1,
                           seed=100 + night, run_cv=0.02)
        history_store.add_run(run_dir, store)


def test_compare_against_five_stored_nights(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    _nights(store, tmp_path, 8)
    current = make_run(tmp_path / "tonight", modes=("off", "on"), repeats=3, seed=7,
                       effect=lambda mode, conc: 1.5 if mode == "off" else 1.0)
    code = compare.main([str(current), "--baseline", "history:5", "--history-store", str(store),
                         "--no-plots"])
    out = capsys.readouterr().out
    verdict = json.loads((current / "verdict.json").read_text())
    assert "history:5" in verdict["baseline"]["source_run"]
    assert "replaces the suite's assumed run_to_run_cv" in out
    baseline_checks = [c for c in verdict["checks"] if c["kind"] == "baseline"]
    assert baseline_checks, out
    off_ttft = [c for c in baseline_checks if c["mode"] == "off" and c["metric"] == "mean_ttft_ms"]
    assert off_ttft and all(c["verdict"] == "regression" for c in off_ttft)   # 50 % slower
    on_ttft = [c for c in baseline_checks if c["mode"] == "on" and c["metric"] == "mean_ttft_ms"]
    assert on_ttft and all(c["verdict"] != "regression" for c in on_ttft)
    assert code == 1


def test_compare_reads_the_runs_run_json_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 42: ``servegate compare RUN --baseline history:N`` has four readers of the run
    (the rolling baseline, the learned noise profile, the judge, its error path); the command
    parses RUN/run.json once and hands the typed run down."""
    import builtins
    import pathlib

    from servegate.commands import dispatch

    store = tmp_path / "store"
    _nights(store, tmp_path, 3)
    current = make_run(tmp_path / "tonight", modes=("off", "on"), repeats=3, seed=7)
    target = (current / "run.json").resolve()
    opened: list[str] = []
    path_open, builtin_open = pathlib.Path.open, builtins.open

    def counting_path_open(self: pathlib.Path, *args: object, **kwargs: object) -> object:
        if self.resolve() == target:
            opened.append(str(args[0] if args else kwargs.get("mode", "r")))
        return path_open(self, *args, **kwargs)  # type: ignore[arg-type]

    def counting_open(file: object, *args: object, **kwargs: object) -> object:
        if isinstance(file, str | pathlib.Path) and pathlib.Path(file).resolve() == target:
            opened.append(str(args[0] if args else kwargs.get("mode", "r")))
        return builtin_open(file, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(pathlib.Path, "open", counting_path_open)
    monkeypatch.setattr(builtins, "open", counting_open)
    code = dispatch.main(["compare", str(current), "--baseline", "history:3", "--history-store",
                          str(store), "--no-plots"])
    monkeypatch.undo()
    out = capsys.readouterr().out
    verdict = json.loads((current / "verdict.json").read_text())
    assert verdict["baseline"]["source_run"] == "history:3", out       # the rolling baseline
    assert any(c["kind"] == "baseline" for c in verdict["checks"]), out
    assert code in (0, 1)
    assert [mode for mode in opened if "w" not in mode] == ["r"]


def test_history_spec_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = make_run(tmp_path / "run")
    assert compare.main([str(run_dir), "--baseline", "history:1", "--history-store",
                         str(tmp_path / "store")]) == 2
    assert "N >= 2" in capsys.readouterr().err
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    assert compare.main([str(run_dir), "--baseline", "history:5", "--history-store",
                         str(not_a_dir)]) == 2
    assert str(not_a_dir) in capsys.readouterr().err


# Reports: junit.xml, verdict.json, summary.md, GITHUB_STEP_SUMMARY, plots, pytest-benchmark.


def test_main_exit_codes(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    base = make_run(tmp_path / "base", seed=1, n_requests=120, request_cv=0.03)
    assert update.update(base, root=tmp_path / "b") == 0
    file = tmp_path / "b" / "cpu" / "smollm2-135m" / "synthetic.json"
    # one repeat (one start of one block) per side: the assumed 5 % run-to-run CV (10 df) bounds
    # what can be shown
    slow = make_run(tmp_path / "slow", seed=2, n_requests=120, request_cv=0.03,
                    effect=lambda _m, _c: 1.6)
    capsys.readouterr()
    assert command.main([str(slow), "--baseline", str(file), "--no-plots"]) == 1
    out = capsys.readouterr().out.splitlines()
    # the first gated regression: off's aggregate over concurrencies (the per-point checks
    # are reported)
    assert out[0].startswith("REGRESSION (exit 1): off mean_ttft_ms at all concurrencies "
                             "(geometric mean) vs baseline x1.")
    wrote = " ".join(line.strip() for line in out[-2:]).split("wrote into ")[-1]
    assert wrote == f"{slow}: verdict.json, summary.md, junit.xml, pytest_benchmark.json"
    same = make_run(tmp_path / "same", seed=3, n_requests=120, request_cv=0.03)
    # one start per side cannot rule out 5 % -> inconclusive: 0 normally, 3 with --strict
    assert command.main([str(same), "--baseline", str(file), "--no-plots"]) == 0
    capsys.readouterr()
    assert command.main([str(same), "--baseline", str(file), "--no-plots", "--strict"]) == 3
    assert capsys.readouterr().out.startswith("INCONCLUSIVE (exit 3, --strict): ")
    assert command.main([str(tmp_path / "nowhere"), "--no-plots"]) == 2
    other = make_run(tmp_path / "gpu", runner_class="mi300x", seed=4)
    assert command.main([str(other), "--baseline", str(file), "--no-plots"]) == 2
    doc = json.loads((other / "verdict.json").read_text())
    assert doc["overall"] == "error" and "'mi300x'" in doc["checks"][0]["reason"]
