"""``servegate update-baselines``: refusals, --force with provenance, old -> new printout."""

from __future__ import annotations

import json

from judge_runs import make_run

from servegate.judge import update
from servegate.judge.baselines import load_baseline


def _target(root):
    return root / "cpu" / "smollm2-135m" / "synthetic.json"


def test_stores_new_baseline_and_prints(tmp_path, capsys):
    run = make_run(tmp_path / "run", seed=1)
    assert update.update(run, root=tmp_path / "b") == 0
    out = capsys.readouterr().out
    assert "new baseline" in out and "(new)" in out
    doc = load_baseline(_target(tmp_path / "b"))
    assert doc["provenance"]["source_run"] == str(run)
    assert doc["provenance"]["forced"] is False


def test_replacing_prints_old_new_and_ratio(tmp_path, capsys):
    assert update.update(make_run(tmp_path / "r1", seed=1), root=tmp_path / "b") == 0
    old = load_baseline(_target(tmp_path / "b"))
    capsys.readouterr()
    run2 = make_run(tmp_path / "r2", seed=2, effect=lambda _m, _c: 1.5)
    assert update.update(run2, root=tmp_path / "b") == 0
    out = capsys.readouterr().out
    new = load_baseline(_target(tmp_path / "b"))
    a = old["points"][0]["metrics"]["mean_ttft_ms"]["value"]
    b = new["points"][0]["metrics"]["mean_ttft_ms"]["value"]
    line = next(ln for ln in out.splitlines() if "off@c2" in ln and "mean_ttft_ms" in ln)
    assert f"{a:.4g}" in line and f"{b:.4g}" in line and f"(x{b / a:.3f})" in line
    assert "replacing" in out


def test_refuses_incomplete_and_failed_runs(tmp_path, capsys):
    run = make_run(tmp_path / "run", complete=False, error="server died at on@c4")
    assert update.main([str(run), "--baseline", str(_target(tmp_path / "b"))]) == 2
    err = capsys.readouterr().err
    assert "incomplete" in err and "server died at on@c4" in err and "--force" in err
    assert not _target(tmp_path / "b").exists()


def test_refuses_other_runner_class_or_model(tmp_path, capsys):
    root = tmp_path / "b"
    assert update.update(make_run(tmp_path / "cpu"), root=root) == 0
    gpu = make_run(tmp_path / "gpu", runner_class="mi355x", model_profile="glm-5.2-mxfp4")
    before = _target(root).read_text()
    assert update.main([str(gpu), "--baseline", str(_target(root))]) == 2
    err = capsys.readouterr().err
    assert "'mi355x'" in err and "'cpu'" in err and "glm-5.2-mxfp4" in err
    assert _target(root).read_text() == before
    lying = make_run(tmp_path / "lying", fingerprint_runner="h200")
    assert update.update(lying, root=root) == 2
    assert "contradicts its fingerprint" in capsys.readouterr().err


def test_force_stores_and_records_why(tmp_path, capsys):
    run = make_run(tmp_path / "run", complete=False)
    target = _target(tmp_path / "b")
    assert update.main([str(run), "--force", "--baseline", str(target)]) == 0
    assert "forced despite" in capsys.readouterr().out
    prov = json.loads(target.read_text())["provenance"]
    assert prov["forced"] is True
    assert any("incomplete" in reason for reason in prov["forced_reasons"])


def test_unreadable_run_is_input_error(tmp_path, capsys):
    assert update.main([str(tmp_path / "missing")]) == 2
    assert "run.json" in capsys.readouterr().err
