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
from servegate.commands.bench import _plan, server_base_env
from servegate.config import load_suite, suite_path
from servegate.measure.logparse import batch_lines
from servegate.plan import LivePair, ServerSlot, device_env, live_pair_layout
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

    from servegate.config import suite_path
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


def _run_json(ctx: bench.Context) -> dict[str, Any]:
    return json.loads((ctx.session.run_dir / "run.json").read_text())


SHIPPED_CPU = REPO_ROOT / "suites" / "cpu.toml"


def _in_server_cpu(tmp_path: Path, starts: int) -> Path:
    """The shipped cpu suite (every mode inside each start: bench._run_in_server) with
    ``starts`` server starts, so that it has more than one slot."""
    text = SHIPPED_CPU.read_text()
    assert "starts = 1\n" in text
    path = tmp_path / "suite" / "cpu.toml"
    path.parent.mkdir()
    path.write_text(text.replace("starts = 1\n", f"starts = {starts}\n", 1))
    return path


def _slot_runner(monkeypatch: pytest.MonkeyPatch, design: str, runner: Any) -> None:
    """``runner`` replaces the slot function of ``design``; the other one must not be called."""
    def wrong_path(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a {design} suite ran a slot of the other design")

    used, unused = (("_run_slot", "_run_in_server") if design == "legacy"
                    else ("_run_in_server", "_run_slot"))
    monkeypatch.setattr(bench, used, runner)
    monkeypatch.setattr(bench, unused, wrong_path)


@pytest.mark.usefixtures("no_model_prep_without_history")
@pytest.mark.parametrize(("design", "slots"), [("legacy", 3), ("in-server", 2)])
def test_run_is_not_complete_while_any_slot_runs(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str],
                                                 design: str, slots: int) -> None:
    """legacy: a start per mode (3 modes, 1 repeat); in-server: 2 starts of every mode."""
    suite = LEGACY_CPU if design == "legacy" else _in_server_cpu(tmp_path, starts=2)
    seen: list[tuple[object, object]] = []

    def slot_reading_run_json(ctx: bench.Context, slot: Any, *args: object,
                              **kwargs: object) -> None:
        on_disk = _run_json(ctx)
        seen.append((on_disk["complete"], on_disk.get("finished_at")))

    _slot_runner(monkeypatch, design, slot_reading_run_json)
    code = bench.main(["--suite", str(suite), "--results-dir", str(tmp_path / "results"),
                       "--no-compare", "--skip-accuracy"])
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0
    assert len(seen) == slots                               # every slot of the cpu suite ran
    assert seen == [(False, None)] * len(seen)              # none saw a finished run
    run = json.loads((run_dir / "run.json").read_text())
    assert run["complete"] is True and run["finished_at"] and "error" not in run


@pytest.mark.usefixtures("no_model_prep_without_history")
@pytest.mark.parametrize("design", ["legacy", "in-server"])
def test_failure_in_the_last_slot_leaves_the_run_incomplete(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], design: str) -> None:
    """Three slots: legacy, one server start per mode; in-server, three starts."""
    suite = LEGACY_CPU if design == "legacy" else _in_server_cpu(tmp_path, starts=3)
    calls: list[int] = []

    def last_slot_fails(ctx: bench.Context, slot: Any, *args: object, **kwargs: object) -> None:
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("boom in the last slot")

    _slot_runner(monkeypatch, design, last_slot_fails)
    code = bench.main(["--suite", str(suite), "--results-dir", str(tmp_path / "results"),
                       "--no-compare", "--skip-accuracy", "--modes", "off,on,forced"])
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 2 and len(calls) == 3                   # the third slot was the last
    run = json.loads((run_dir / "run.json").read_text())
    assert run["complete"] is False and "boom in the last slot" in run["error"]


# Runner class ``cpu-gfx95``: a CPU server whose exact-fill device check sees gfx95.
#
# The one double is servegate's, at sglang's device check (``SERVEGATE_EMULATE_GFX95``, in the
# exact-fill hook); these tests pin what surrounds it: chosen only by name, the profile section
# that sets it, an inherited value never reaching another class's server, the read-back that ties
# every gate report to the double (and forbids the double on real devices), and bench judging the
# suite's in-run claims without a stored baseline. The real-server path is
# ``tests/test_bench_e2e.py::test_cpu_gfx95_suite_end_to_end``; the hook in a real sglang process
# is in ``tests/real_sglang/scheduler/test_hooks.py``.


def test_bench_judges_in_run_claims_without_a_baseline(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """No stored baseline for cpu-gfx95: bench still judges (the suite has [judge.claims]) and
    returns the judge's code; a suite with neither is not judged (exit 0)."""
    monkeypatch.setattr(bench, "ensure_gguf_model", lambda name, package_file: tmp_path / "m")
    monkeypatch.setattr(bench, "_run_slot", lambda *a, **k: None)
    monkeypatch.setattr(bench, "_run_in_server", lambda *a, **k: None)
    monkeypatch.setattr(bench, "_require_gate", lambda *args: None)
    monkeypatch.setattr(bench, "_add_to_history", lambda ctx: None)
    monkeypatch.setenv("COLUMNS", "400")                # rich: one log message per line
    judged: list[Path] = []

    def compare_run(run_dir: Path, strict: bool = False) -> int:
        judged.append(Path(run_dir))
        return 1

    monkeypatch.setattr(bench, "compare_run", compare_run)
    code = bench.main(["--suite", "cpu-gfx95", "--runner", "cpu-gfx95",
                       "--results-dir", str(tmp_path / "r"), "--skip-accuracy"])
    out, err = capsys.readouterr()
    run_dir = Path(out.strip().splitlines()[-1])
    assert code == 1 and judged == [run_dir]
    assert json.loads((run_dir / "run.json").read_text())["runner_class"] == "cpu-gfx95"
    assert "judging its in-run claims only" in err
    # cpu-gate has no [judge.claims] and no baseline for cpu-gfx95 would exist: not judged
    no_claims = tmp_path / "noclaims.toml"
    text = suite_path("cpu-gfx95").read_text()
    no_claims.write_text(text.split("[judge.claims]")[0].replace('name = "cpu-gfx95"',
                                                                 'name = "noclaims"'))
    judged.clear()
    code = bench.main(["--suite", str(no_claims), "--runner", "cpu-gfx95",
                       "--results-dir", str(tmp_path / "r2"), "--skip-accuracy"])
    assert code == 0 and judged == []
    assert "no in-run claims (the suite has no judge.claims table); not judged" in \
        capsys.readouterr().err


# ------------------------------------------------ head vs base: live pair or a start per tree

AB_CPU = REPO_ROOT / "tests" / "data" / "suites" / "ab-cpu.toml"


TREES = {"base": None, "head": None}


def test_a_cpu_runs_head_vs_base_as_one_live_pair_per_start() -> None:
    suite = load_suite(AB_CPU)
    layout = live_pair_layout(suite, "cpu")
    assert layout.live and (layout.gpus, layout.per_server) == (0, 0)
    [pair] = _plan(suite, ["off"], dict(TREES), False, "cpu")
    assert isinstance(pair, LivePair) and pair.devices == ()
    assert len(pair.points) == 2 * 4


def test_eight_gpus_hold_two_tp4_servers_with_halves_crossed_over() -> None:
    suite = load_suite(suite_path("nightly"))
    layout = live_pair_layout(suite, "mi355x")
    assert layout.live and (layout.gpus, layout.per_server) == (8, 4), layout
    pairs = _plan(suite, ["off", "on"], dict(TREES), False, "mi355x")
    assert [p.devices for p in pairs] == [((0, 1, 2, 3), (4, 5, 6, 7)),
                                          ((4, 5, 6, 7), (0, 1, 2, 3))]
    assert device_env("gfx95", (4, 5, 6, 7)) == {"HIP_VISIBLE_DEVICES": "4,5,6,7"}
    assert device_env("nvidia", (0, 1)) == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert device_env("cpu", ()) == {}


def test_too_few_devices_fall_back_to_a_start_per_tree_and_say_so() -> None:
    suite = load_suite(suite_path("premerge"))
    layout = live_pair_layout(suite, "mi325x")           # its smallest CI label has 4 GPUs
    assert not layout.live and "no live pair" in layout.note and "4 GPUs" in layout.note
    slots = _plan(suite, ["off", "on"], dict(TREES), False, "mi325x")
    assert all(isinstance(s, ServerSlot) and s.in_server for s in slots)
    assert sorted(s.arm for s in slots) == ["base", "head"]


def test_one_tree_runs_are_never_live_pairs() -> None:
    slots = _plan(load_suite(suite_path("cpu")), ["off", "on"], {"": None}, False, "cpu")
    assert all(isinstance(s, ServerSlot) for s in slots)


def test_injected_slowdowns_reach_only_the_arms_named() -> None:
    environ = {"SERVEGATE_INJECT_DELAY_MS": "40", "SERVEGATE_INJECT_ARMS": "head",
               "HF_TOKEN": "x"}
    assert server_base_env("head", environ)["SERVEGATE_INJECT_DELAY_MS"] == "40"
    base = server_base_env("base", environ)
    assert not [k for k in base if k.startswith("SERVEGATE_INJECT_")]
    assert base["HF_TOKEN"] == "x"
    unscoped = {"SERVEGATE_INJECT_DELAY_MS": "40"}
    assert server_base_env("base", unscoped) == unscoped == server_base_env("", unscoped)


def test_an_idle_server_log_slice_has_no_batches() -> None:
    busy = ("[2026-12-01 12:30:00] Prefill batch, #new-seq: 1, #new-token: 256, ...\n"
            "[2026-12-01 12:30:01] Decode batch, #running-req: 2, #token: 640, ...\n"
            "[2026-12-01 12:30:01 DP1 TP2] Prefill batch, #new-seq: 2, ...\n")
    idle = ('[2026-12-01 12:30:02] INFO:     127.0.0.1:4 - "GET /v1/models HTTP/1.1" 200 OK\n'
            "servegate-hook: mode ack seq=3 mode=off gate=False in pid 7\n")
    assert batch_lines(busy) == 3 and batch_lines(idle) == 0 and batch_lines("") == 0


def test_the_devices_a_runner_sees_override_the_registry_count() -> None:
    suite = load_suite(suite_path("premerge"))
    assert live_pair_layout(suite, "mi325x", gpus=8).live        # on its 8-GPU label
    assert not live_pair_layout(suite, "mi355x", gpus=6).live    # only 6 visible: fall back
