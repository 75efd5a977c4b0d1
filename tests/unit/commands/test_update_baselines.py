"""servegate.commands.update_baselines (``servegate update-baselines``) and the baseline identity (issue 15).

Each test states one refusal on its own (a run that is wrong in exactly one way), so a refusal
that silently stops applying cannot hide behind another one that still fires.
"""

from __future__ import annotations

import errno
import io
import json
from pathlib import Path

import pytest
from fault_helpers import _cause, _failing_disk
from judge_runs import make_run, stored_baseline

from servegate.commands import update_baselines as update
from servegate.judge.baselines import (
    load_baseline,
)


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


def test_forced_incomplete_run_keeps_run_complete_false_on_disk(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", complete=False)
    target = _target(tmp_path / "b")
    assert update.main([str(run), "--force", "--baseline", str(target)]) == 0
    prov = json.loads(target.read_text())["provenance"]
    assert prov["run_complete"] is False
    assert prov["run_started_at"] == "2026-11-30T12:00:00+00:00"
    assert prov["run_finished_at"] == "2026-11-30T12:30:00+00:00"


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


# What ``servegate update-baselines`` prints and refuses, line by line (servegate.commands.update_baselines):
# the old -> new table a reviewer reads next to the diff, the refusal list, the forced note, and
# the command line (issue 15). Expected lines are written out here.


def _doc(points: list[tuple[str, int, dict[str, float]]],
         accuracy: dict[str, dict[str, float]] | None = None) -> dict:
    return {"points": [{"mode": m, "concurrency": c,
                        "metrics": {k: {"value": v} for k, v in metrics.items()}}
                       for m, c, metrics in points],
            "accuracy": accuracy or {}}


def test_diff_lines_in_mode_then_concurrency_order_with_new_and_removed() -> None:
    old = _doc([("off", 16, {"b": 2.0}), ("on", 4, {"a": 1.0}), ("off", 4, {"a": 0.0})],
               {"off": {"accuracy": 0.5, "n": 10}, "on": {"accuracy": 0.4, "n": 10}})
    new = _doc([("forced", 4, {"a": 3.0}), ("off", 4, {"a": 1.0}),
                ("off", 16, {"b": 3.0, "c": 1.0})],
               {"off": {"accuracy": 0.75, "n": 20}, "forced": {"accuracy": 0.1, "n": 20}})
    assert update.diff_lines(old, new) == [
        f"  {'off@c4':<12} {'a':<24} {'0':>10} -> {'1':<10} (old value 0)",
        f"  {'off@c16':<12} {'b':<24} {'2':>10} -> {'3':<10} (x1.500)",
        f"  {'off@c16':<12} {'c':<24} {'-':>10} -> {'1':<10} (new)",
        f"  {'on@c4':<12} {'a':<24} {'1':>10} -> {'-':<10} (removed)",
        f"  {'forced@c4':<12} {'a':<24} {'-':>10} -> {'3':<10} (new)",
        f"  {'forced':<12} {'accuracy':<24} {'-':>10} -> {'0.1':<10} (new) n=20",
        f"  {'off':<12} {'accuracy':<24} {'0.5':>10} -> {'0.75':<10} (+0.2500) n=20",
        f"  {'on':<12} {'accuracy':<24} {'0.4':>10} -> {'-':<10} (removed) n=None",
    ]
    assert update.diff_lines(None, _doc([("off", 4, {"a": 1.23456})])) == [
        f"  {'off@c4':<12} {'a':<24} {'-':>10} -> {'1.235':<10} (new)"]


def test_a_new_baseline_is_announced_diffed_and_written(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run", concurrencies=(4,), modes=("off",))
    target = tmp_path / "baselines" / "cpu" / "smollm2-135m" / "synthetic.json"
    out = io.StringIO()
    assert update.update(run_dir, target=target, out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == f"update-baselines: {target} (new baseline)"
    assert lines[-1] == f"wrote {target}"
    assert all(line.endswith("(new)") for line in lines[1:-1]) and len(lines) > 3
    assert json.loads(target.read_text())["suite"] == "synthetic"
    again = io.StringIO()
    assert update.update(run_dir, target=target, out=again) == 0
    assert again.getvalue().splitlines()[0] == f"update-baselines: {target} (replacing)"
    assert "(x1.000)" in again.getvalue()


def test_a_refused_run_lists_every_reason_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_dir = make_run(tmp_path / "run", complete=False, error="boom",
                       fingerprint_runner="mi300x")
    target = tmp_path / "elsewhere.json"
    assert update.update(run_dir, target=target) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"update-baselines: refusing to store {run_dir} as {target}:"
    assert "  - run.json runner_class 'cpu' contradicts its fingerprint runner_class 'mi300x'" \
        in err
    assert (f"  - target {target} is not baselines/cpu/smollm2-135m/synthetic.json (another "
            "runner class, model or suite)") in err
    assert err[-1] == ("  (pass --force to store it anyway; the reasons are recorded in "
                       "provenance)")
    assert len(err) >= 5 and not target.exists()


def test_forced_prints_the_reasons_and_records_them(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run", concurrencies=(4,), modes=("off",))
    target = tmp_path / "x.json"
    out = io.StringIO()
    assert update.update(run_dir, target=target, force=True, out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[1] == (f"  forced despite: target {target} is not "
                        "baselines/cpu/smollm2-135m/synthetic.json (another runner class, "
                        "model or suite)")
    provenance = json.loads(target.read_text())["provenance"]
    assert "forced" in json.dumps(provenance)


def test_a_baseline_for_another_identity_is_named_field_by_field(tmp_path: Path) -> None:
    target = tmp_path / "cpu" / "smollm2-135m" / "synthetic.json"
    existing = {"runner_class": "mi300x", "model_profile": "glm", "suite": "synthetic"}
    run = json.loads((make_run(tmp_path / "run") / "run.json").read_text())
    assert update.refusal_reasons(run, target, existing) == [
        f"runner_class: run has 'cpu' but baseline {target} is for 'mi300x'",
        f"model_profile: run has 'smollm2-135m' but baseline {target} is for 'glm'"]
    assert update.refusal_reasons(run, target, None) == []


def test_unreadable_inputs_are_refused_with_the_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert update.update(tmp_path / "nothing") == 2
    assert capsys.readouterr().err.startswith("update-baselines: ")
    run_dir = make_run(tmp_path / "run")
    bad = tmp_path / "cpu" / "smollm2-135m" / "synthetic.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{")
    assert update.update(run_dir, target=bad) == 2
    assert f"update-baselines: {bad}" in capsys.readouterr().err


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        update.main(["--help"])
    text = " ".join(capsys.readouterr().out.split())        # argparse wraps help lines
    assert text.startswith("usage: servegate update-baselines [-h] [--force] [--baseline "
                           "BASELINE]")
    assert "store an incomplete/mismatched run anyway (recorded in provenance)" in text
    assert "target file (default: baselines/<runner>/<model>/<suite>.json)" in text
    assert "Refuses incomplete or failed runs" in text
    run_dir = make_run(tmp_path / "run", concurrencies=(4,), modes=("off",))
    target = tmp_path / "t.json"
    assert update.main([str(run_dir), "--baseline", str(target)]) == 2      # wrong place
    assert update.main([str(run_dir), "--baseline", str(target), "--force"]) == 0
    assert target.is_file()


# ``servegate update-baselines``: refusals, --force with provenance, old -> new printout.


def _cpu_synthetic_target(root):
    return root / "cpu" / "smollm2-135m" / "synthetic.json"


def test_stores_new_baseline_and_prints(tmp_path, capsys):
    run = make_run(tmp_path / "run", seed=1)
    assert update.update(run, root=tmp_path / "b") == 0
    out = capsys.readouterr().out
    assert "new baseline" in out and "(new)" in out
    doc = load_baseline(_cpu_synthetic_target(tmp_path / "b"))
    assert doc["provenance"]["source_run"] == str(run)
    assert doc["provenance"]["forced"] is False


def test_replacing_prints_old_new_and_ratio(tmp_path, capsys):
    assert update.update(make_run(tmp_path / "r1", seed=1), root=tmp_path / "b") == 0
    old = load_baseline(_cpu_synthetic_target(tmp_path / "b"))
    capsys.readouterr()
    run2 = make_run(tmp_path / "r2", seed=2, effect=lambda _m, _c: 1.5)
    assert update.update(run2, root=tmp_path / "b") == 0
    out = capsys.readouterr().out
    new = load_baseline(_cpu_synthetic_target(tmp_path / "b"))
    a = old["points"][0]["metrics"]["mean_ttft_ms"]["value"]
    b = new["points"][0]["metrics"]["mean_ttft_ms"]["value"]
    line = next(ln for ln in out.splitlines() if "off@c2" in ln and "mean_ttft_ms" in ln)
    assert f"{a:.4g}" in line and f"{b:.4g}" in line and f"(x{b / a:.3f})" in line
    assert "replacing" in out


def test_refuses_incomplete_and_failed_runs(tmp_path, capsys):
    run = make_run(tmp_path / "run", complete=False, error="server died at on@c4")
    assert update.main([str(run), "--baseline", str(_cpu_synthetic_target(tmp_path / "b"))]) == 2
    err = capsys.readouterr().err
    assert "incomplete" in err and "server died at on@c4" in err and "--force" in err
    assert not _cpu_synthetic_target(tmp_path / "b").exists()


def test_refuses_other_runner_class_or_model(tmp_path, capsys):
    root = tmp_path / "b"
    assert update.update(make_run(tmp_path / "cpu"), root=root) == 0
    gpu = make_run(tmp_path / "gpu", runner_class="mi355x", model_profile="glm-5.2-mxfp4")
    before = _cpu_synthetic_target(root).read_text()
    assert update.main([str(gpu), "--baseline", str(_cpu_synthetic_target(root))]) == 2
    err = capsys.readouterr().err
    assert "'mi355x'" in err and "'cpu'" in err and "glm-5.2-mxfp4" in err
    assert _cpu_synthetic_target(root).read_text() == before
    lying = make_run(tmp_path / "lying", fingerprint_runner="h200")
    assert update.update(lying, root=root) == 2
    assert "contradicts its fingerprint" in capsys.readouterr().err


def test_force_stores_and_records_why(tmp_path, capsys):
    run = make_run(tmp_path / "run", complete=False)
    target = _cpu_synthetic_target(tmp_path / "b")
    assert update.main([str(run), "--force", "--baseline", str(target)]) == 0
    assert "forced despite" in capsys.readouterr().out
    prov = json.loads(target.read_text())["provenance"]
    assert prov["forced"] is True
    assert any("incomplete" in reason for reason in prov["forced_reasons"])


def test_unreadable_run_is_input_error(tmp_path, capsys):
    assert update.main([str(tmp_path / "missing")]) == 2
    assert "run.json" in capsys.readouterr().err


# Faults of the judge stage: ``servegate compare`` with a missing, malformed or foreign
# baseline or an unwritable run folder, and ``servegate update-baselines`` with a malformed or
# foreign target, a full disk or a missing run. The old baseline is never touched.
#
# No server needed: runs are synthetic (:func:`judge_runs.make_run`).


# --------------------------------------------------------------------------- baselines

@pytest.fixture
def judged_run(tmp_path: Path) -> Path:
    return make_run(tmp_path / "run", n_requests=20)


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
    target = stored_baseline(tmp_path, runner_class="mi300x")
    before = target.read_bytes()
    code, err = _update(judged_run, target, capsys)
    assert code == 2
    assert "runner_class: run has 'cpu' but baseline" in err and "'mi300x'" in err
    assert target.read_bytes() == before


def test_update_baselines_disk_full_keeps_old(judged_run: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    target = stored_baseline(tmp_path)
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
