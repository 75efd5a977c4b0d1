"""bench's run-folder contract on failure paths (no server: the slot runner is replaced)."""

from __future__ import annotations

import errno
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from fault_helpers import _assert_no_half_json, _cause, _failing_disk
from repo_files import LEGACY_SUITES, REPO_ROOT

from servegate.commands import bench
from servegate.commands.bench_context import Context
from servegate.config import load_suite, suite_path
from servegate.serve.process import ServerError

# suites/cpu.toml before [design]: its [suite].repeats = 1 is read as [design] starts = 1,
# blocks = 1, and it runs through the in-server executor like every suite (issue 30)
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
    def interrupted(ctx: Context, *args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "run_in_server", interrupted)   # cpu: every mode in one start
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
    def broken(ctx: Context, *args: object, **kwargs: object) -> None:
        raise ServerError("server exited with code 1 before it was ready (log: x)",
                          "ImportError: cannot import name 'foo' from 'sgl_kernel'")

    monkeypatch.setattr(bench, "run_in_server", broken)  # an older suite: in-server too
    code = bench.main(["--suite", str(LEGACY_CPU), "--results-dir", str(tmp_path)])
    run_dir, err = _last_line(capsys)
    assert code == 2
    assert "cannot import name 'foo'" in err
    assert err.strip().splitlines()[-1].startswith("servegate bench: ServerError: server exited")
    run = json.loads((run_dir / "run.json").read_text())
    assert run["complete"] is False and "ServerError" in run["error"]
    assert run["suite"] == "cpu"
    assert {k: run["design"][k] for k in ("in_server", "starts", "blocks", "unit")} == {
        "in_server": True, "starts": 1, "blocks": 1, "unit": "block"}
    assert "suite.repeats = 1 read as [design] starts = 1, blocks = 1" in run["design"]["note"]


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
    (tmp_path / "base" / "sglang").mkdir(parents=True)     # a tree; the head is not one
    (tmp_path / "base" / "sglang" / "__init__.py").write_text("")
    assert bench.main(["--base", str(tmp_path / "base"), "--head", str(tmp_path / "nothing"),
                       "--results-dir", str(tmp_path / "results")]) == 2
    assert f"--head {tmp_path / 'nothing'}: no such directory" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()


@pytest.mark.usefixtures("no_model_prep")
def test_suite_file_outside_suites_is_judged_with_its_own_table(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`bench --suite FILE` records FILE's [judge] table; compare judges with it, not with
    suites/<name>.toml (whose floors differ)."""
    from judge_runs import make_run

    from servegate.judge.evaluate import judge

    shipped = suite_path("cpu").read_text()
    assert "mean_ttft_ms = 0.10" in shipped
    other = tmp_path / "elsewhere" / "cpu.toml"
    other.parent.mkdir()
    other.write_text(shipped.replace("mean_ttft_ms = 0.10", "mean_ttft_ms = 0.37"))

    def interrupted(ctx: Context, *args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "run_in_server", interrupted)
    bench.main(["--suite", str(other), "--results-dir", str(tmp_path / "results")])
    [run_dir] = (tmp_path / "results").iterdir()
    recorded = json.loads((run_dir / "run.json").read_text())
    assert recorded["suite_source"]["path"] == str(other)
    assert recorded["judge_table"]["floors"]["mean_ttft_ms"] == 0.37
    assert recorded["judge_table"] == load_suite(other).judge_table
    assert recorded["load"] == load_suite(other).load.record()       # the history keys by it

    # Judge a complete run of that suite, carrying the recorded table, against a baseline.
    from servegate.core.results import load_run
    from servegate.judge.baselines import baseline_from_run, baseline_path, write_baseline

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


# Faults of the results folder and the disk: the run folder cannot be created or is read-only,
# the disk fills (or turns read-only) mid-run, and atomic writes keep the previous file whole.
#
# No server needed: the fault strikes before one would start (model preparation is stubbed).


# --------------------------------------------------------------------------- results folder

@pytest.fixture
def no_model_prep_in_a_tagged_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tag: str) -> None:
    """Model preparation is not under test here (the fault strikes before a server would start)."""
    monkeypatch.setattr(bench, "ensure_gguf_model", lambda name, package_file: tmp_path / "m")


@pytest.mark.usefixtures("no_model_prep_in_a_tagged_env")
def test_results_dir_not_creatable(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "results"
    blocker.write_text("a file where the results folder should be\n")
    code = bench.main(["--suite", "cpu", "--results-dir", str(blocker / "sub")])
    out, err = capfd.readouterr()
    assert code == 2 and out == ""
    assert re.fullmatch(r"cannot create the run folder: \[Errno 20\] Not a directory: .*",
                        _cause(err))
    assert blocker.read_text().startswith("a file")


@pytest.mark.usefixtures("no_model_prep_in_a_tagged_env")
@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_results_dir_read_only(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    results = tmp_path / "results"
    results.mkdir(mode=0o555)
    try:
        code = bench.main(["--suite", "cpu", "--results-dir", str(results)])
    finally:
        results.chmod(0o755)
    _, err = capfd.readouterr()
    assert code == 2 and "Permission denied" in _cause(err)
    assert list(results.iterdir()) == []


@pytest.mark.usefixtures("no_model_prep_in_a_tagged_env")
@pytest.mark.parametrize("err_no", [errno.ENOSPC, errno.EROFS])
def test_disk_full_mid_run_keeps_previous_run_json(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str],
        err_no: int) -> None:
    """run.json + summary.md are written once, then the disk fills (or turns read-only) at the
    next save: exit 2 naming the file, the previous run.json intact, no temp file left."""
    results = tmp_path / "results"
    written = _failing_disk(monkeypatch, results, err_no, after=2)
    code = bench.main(["--suite", "cpu", "--results-dir", str(results), "--no-compare"])
    out, err = capfd.readouterr()
    assert code == 2
    run_dir = Path(out.strip().splitlines()[-1])
    assert written == ["run.json", "summary.md"]
    cause = _cause(err)
    assert cause == f"OSError: [Errno {err_no}] {os.strerror(err_no)}: '{run_dir / 'run.json'}'"
    run = json.loads((run_dir / "run.json").read_text())      # the first save, whole
    assert run["complete"] is False and run["points"] == [] and "error" not in run
    _assert_no_half_json(run_dir)


# bench's ``complete`` flag on disk while the run is going (issue 15): run.json says
# ``complete: true`` only after the last point, never before the first (no server: the slot
# runner is replaced by one that reads run.json as the judge would at that moment).


@pytest.fixture
def no_model_prep_without_history(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(bench, "ensure_gguf_model", lambda name, package_file: tmp_path / "m")
    monkeypatch.setenv("SERVEGATE_RUNNER", "cpu")
    monkeypatch.delenv("SERVEGATE_HISTORY", raising=False)


def _run_json(ctx: Context) -> dict[str, Any]:
    return json.loads((ctx.session.run_dir / "run.json").read_text())


SHIPPED_CPU = REPO_ROOT / "suites" / "cpu.toml"


def _in_server_cpu(tmp_path: Path, starts: int) -> Path:
    """The shipped cpu suite (every mode inside each start: bench_in_server.run_in_server) with
    ``starts`` server starts, so that it has more than one slot."""
    text = SHIPPED_CPU.read_text()
    assert "starts = 1\n" in text
    path = tmp_path / "suite" / "cpu.toml"
    path.parent.mkdir()
    path.write_text(text.replace("starts = 1\n", f"starts = {starts}\n", 1))
    return path


def _legacy_cpu(tmp_path: Path, repeats: int) -> Path:
    """The older cpu suite ([suite].repeats, no [design]) with ``repeats`` repeats: read as that
    many server starts of one block of every mode."""
    text = LEGACY_CPU.read_text()
    assert "repeats = 1\n" in text
    path = tmp_path / "legacy" / "cpu.toml"
    path.parent.mkdir()
    path.write_text(text.replace("repeats = 1\n", f"repeats = {repeats}\n", 1))
    return path


def _slot_runner(monkeypatch: pytest.MonkeyPatch, runner: Any) -> None:
    """``runner`` replaces the in-server executor, which runs every single-tree suite, older
    ones too; the live-pair executor (head vs base only) must not be called."""
    def wrong_path(*args: object, **kwargs: object) -> None:
        raise AssertionError("a single-tree suite ran a live pair")

    monkeypatch.setattr(bench, "run_in_server", runner)
    monkeypatch.setattr(bench, "run_live_pair", wrong_path)


@pytest.mark.usefixtures("no_model_prep_without_history")
@pytest.mark.parametrize(("design", "slots"), [("legacy", 2), ("in-server", 2)])
def test_run_is_not_complete_while_any_slot_runs(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str],
                                                 design: str, slots: int) -> None:
    """Two starts of every mode: [design] starts = 2, or an older suite's repeats = 2."""
    suite = (_legacy_cpu(tmp_path, repeats=2) if design == "legacy"
             else _in_server_cpu(tmp_path, starts=2))
    seen: list[tuple[object, object]] = []
    modes: list[tuple[str, ...]] = []

    def slot_reading_run_json(ctx: Context, slot: Any, *args: object,
                              **kwargs: object) -> None:
        on_disk = _run_json(ctx)
        seen.append((on_disk["complete"], on_disk.get("finished_at")))
        modes.append(tuple(sorted({p.mode for p in slot.points})))

    _slot_runner(monkeypatch, slot_reading_run_json)
    code = bench.main(["--suite", str(suite), "--results-dir", str(tmp_path / "results"),
                       "--no-compare", "--skip-accuracy"])
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0
    assert len(seen) == slots                               # every slot of the cpu suite ran
    assert seen == [(False, None)] * len(seen)              # none saw a finished run
    assert modes == [("forced", "off", "on")] * slots       # every mode inside each start
    run = json.loads((run_dir / "run.json").read_text())
    assert run["complete"] is True and run["finished_at"] and "error" not in run


@pytest.mark.usefixtures("no_model_prep_without_history")
@pytest.mark.parametrize("design", ["legacy", "in-server"])
def test_failure_in_the_last_slot_leaves_the_run_incomplete(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], design: str) -> None:
    """Three slots: three starts of every mode ([design] starts = 3, or repeats = 3)."""
    suite = (_legacy_cpu(tmp_path, repeats=3) if design == "legacy"
             else _in_server_cpu(tmp_path, starts=3))
    calls: list[int] = []

    def last_slot_fails(ctx: Context, slot: Any, *args: object, **kwargs: object) -> None:
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("boom in the last slot")

    _slot_runner(monkeypatch, last_slot_fails)
    code = bench.main(["--suite", str(suite), "--results-dir", str(tmp_path / "results"),
                       "--no-compare", "--skip-accuracy", "--modes", "off,on,forced"])
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 2 and len(calls) == 3                   # the third slot was the last
    run = json.loads((run_dir / "run.json").read_text())
    assert run["complete"] is False and "boom in the last slot" in run["error"]
