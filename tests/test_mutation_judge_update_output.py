"""What ``servegate update-baselines`` prints and refuses, line by line (servegate.judge.update):
the old -> new table a reviewer reads next to the diff, the refusal list, the forced note, and
the command line (issue 15). Expected lines are written out here."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from judge_runs import make_run

from servegate.judge import update


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
