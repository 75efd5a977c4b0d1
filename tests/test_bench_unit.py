"""bench's run-folder contract on failure paths (no server: the slot runner is replaced)."""

from __future__ import annotations

from repo_files import LEGACY_SUITES

import json
from pathlib import Path

import pytest

from servegate import bench
from servegate.serve.process import ServerError

# suites/cpu.toml before [design] (a server start per mode and repeat: bench's _run_slot path)
LEGACY_CPU = LEGACY_SUITES / "cpu.toml"


@pytest.fixture
def no_model_prep(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(bench, "ensure_gguf_model", lambda name, package_file: tmp_path / "m")
    monkeypatch.setenv("SERVEGATE_RUNNER", "cpu")


def _last_line(capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    out, err = capsys.readouterr()
    return Path(out.strip().splitlines()[-1]), err


@pytest.mark.usefixtures("no_model_prep")
def test_interrupt_leaves_incomplete_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    def interrupted(ctx: bench.Context, *args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "_run_in_server", interrupted)   # cpu: every mode in one start
    code = bench.main(["--suite", "cpu", "--results-dir", str(tmp_path / "results")])
    run_dir, err = _last_line(capsys)
    assert code == 130
    run = json.loads((run_dir / "run.json").read_text())
    assert run["complete"] is False and run["error"].startswith("interrupted")
    assert run["suite"] == "cpu" and run["runner_class"] == "cpu" and run["points"] == []
    assert run["design"]["in_server"] is True
    assert "INCOMPLETE" in (run_dir / "summary.md").read_text()
    assert "servegate bench: interrupted" in err


@pytest.mark.usefixtures("no_model_prep")
def test_infra_failure_exit_2_with_log_tail(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    def broken(ctx: bench.Context, *args: object, **kwargs: object) -> None:
        raise ServerError("server exited with code 1 before it was ready (log: x)",
                          "ImportError: cannot import name 'foo' from 'sgl_kernel'")

    monkeypatch.setattr(bench, "_run_slot", broken)      # the legacy suite: a start per mode
    code = bench.main(["--suite", str(LEGACY_CPU), "--results-dir", str(tmp_path)])
    run_dir, err = _last_line(capsys)
    assert code == 2
    assert "cannot import name 'foo'" in err
    assert err.strip().splitlines()[-1].startswith("servegate bench: ServerError: server exited")
    run = json.loads((run_dir / "run.json").read_text())
    assert run["complete"] is False and "ServerError" in run["error"]
    assert run["suite"] == "cpu" and run["design"]["in_server"] is False


def test_input_errors_exit_2(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SERVEGATE_RUNNER", "cpu")
    assert bench.main(["--suite", "nope", "--results-dir", str(tmp_path)]) == 2
    assert "suites/nope.toml: not found" in capsys.readouterr().err
    assert bench.main(["--suite", "premerge", "--results-dir", str(tmp_path)]) == 2
    assert "this runner is 'cpu'" in capsys.readouterr().err
    assert bench.main(["--suite", "cpu", "--modes", "off,fast",
                       "--results-dir", str(tmp_path)]) == 2
    assert "--modes: 'fast'" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())                  # no run folder for input errors


@pytest.mark.usefixtures("no_model_prep")
def test_suite_file_outside_suites_is_judged_with_its_own_table(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`bench --suite FILE` records FILE's [judge] table; compare judges with it, not with
    suites/<name>.toml (whose floors differ)."""
    from judge_runs import make_run

    from servegate.config import load_suite, suite_path
    from servegate.judge.evaluate import judge

    shipped = suite_path("cpu").read_text()
    assert "mean_ttft_ms = 0.10" in shipped
    other = tmp_path / "elsewhere" / "cpu.toml"
    other.parent.mkdir()
    other.write_text(shipped.replace("mean_ttft_ms = 0.10", "mean_ttft_ms = 0.37"))

    def interrupted(ctx: bench.Context, *args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "_run_in_server", interrupted)
    bench.main(["--suite", str(other), "--results-dir", str(tmp_path / "results")])
    [run_dir] = (tmp_path / "results").iterdir()
    recorded = json.loads((run_dir / "run.json").read_text())
    assert recorded["suite_source"]["path"] == str(other)
    assert recorded["judge_table"]["floors"]["mean_ttft_ms"] == 0.37
    assert recorded["judge_table"] == load_suite(other).judge_table

    # Judge a complete run of that suite, carrying the recorded table, against a baseline.
    from servegate.judge.baselines import baseline_from_run, baseline_path, write_baseline
    from servegate.results import load_run

    reference, judged = tmp_path / "reference", tmp_path / "judged"
    make_run(reference, suite="cpu", modes=("off", "on"), seed=1)
    make_run(judged, suite="cpu", modes=("off", "on"), seed=2)
    root = tmp_path / "baselines"
    ref_run = load_run(reference)
    write_baseline(baseline_path("cpu", "smollm2-135m", "cpu", root),
                   baseline_from_run(ref_run, reference))
    run = json.loads((judged / "run.json").read_text())
    run["suite_source"], run["judge_table"] = recorded["suite_source"], recorded["judge_table"]
    (judged / "run.json").write_text(json.dumps(run))
    judgement = judge(judged, baselines_root=root)
    assert str(other) in judgement.config.source
    gated = [c for c in judgement.checks if c.kind == "baseline" and c.metric == "mean_ttft_ms"]
    assert gated and {c.floor for c in gated} == {0.37}
