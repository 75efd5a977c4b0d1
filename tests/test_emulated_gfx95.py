"""Runner class ``cpu-gfx95``: a CPU server whose exact-fill device check sees gfx95.

The one double is servegate's, at sglang's device check (``SERVEGATE_EMULATE_GFX95``, in the
exact-fill hook); these tests pin what surrounds it: chosen only by name, the profile section
that sets it, an inherited value never reaching another class's server, the read-back that ties
every gate report to the double (and forbids the double on real devices), and bench judging the
suite's in-run claims without a stored baseline. The real-server path is
``tests/test_bench_e2e.py::test_cpu_gfx95_suite_end_to_end``; the hook in a real sglang process
is in ``tests/test_hooks.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servegate import bench, runner, runners
from servegate.config import load_suite, suite_path
from servegate.measure import logparse
from servegate.measure.exactfill import ExactFillMismatch, check_effective, device_double
from servegate.serve.launch import EMULATE_GFX95_ENV, build_launch

DOUBLE = "servegate-hook: device double: gfx95 emulated (gcnArchName=gfx950:sramecc+:xnack-)"


def _log(test_data: Path, name: str) -> str:
    return (test_data / "sglang-cpu-logs" / f"{name}.log").read_text()


def test_emulated_class_is_gated_but_never_detected_or_covered_by_its_arch() -> None:
    cls = runners.get("cpu-gfx95")
    assert (cls.arch, cls.gated, cls.emulated) == ("gfx95", True, True)
    assert cls.gate_modes == ("off", "on") and cls.ci_labels == ()
    assert cls not in runners.of_arch("gfx95")
    assert runners.classify("gfx950", "").name == "mi355x"         # still the only real gfx95
    assert not runners.selects("gfx95", "cpu-gfx95") and runners.selects("cpu-gfx95", "cpu-gfx95")
    assert "cpu-gfx95" not in {c.name for c in runners.expand(["gfx95", "cpu"])}
    assert not runners.is_gpu("cpu-gfx95") and runners.is_gpu("gfx95") and runners.is_gpu("mi355x")
    assert not load_suite(suite_path("premerge")).runs_on("cpu-gfx95")
    assert runners.ci_cells("nightly") == [c for c in runners.ci_cells("nightly")
                                           if "cpu-gfx95" not in c["cell"]]


def test_detection_never_picks_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVEGATE_RUNNER", raising=False)
    monkeypatch.setattr(runner, "_import_torch", lambda: None)
    monkeypatch.setattr(runner, "_run", lambda argv: "")
    assert runner.detect().runner_class == "cpu"
    assert runner.detect("cpu-gfx95").runner_class == "cpu-gfx95"


def test_fingerprint_names_the_double(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "_driver", lambda: pytest.fail("no GPU driver on a CPU class"))
    fp = runner.fingerprint(runner.Detected("cpu-gfx95", "override"), "m", torch_module=None)
    assert "gfx95 emulated" in fp["device_double"] and fp["gpu_name"].startswith("none (CPU")
    real = runner.fingerprint(runner.Detected("cpu", "override"), "m", torch_module=None)
    assert "device_double" not in real


# sglang's crash diagnostics off: each deliberate SIGTERM stop would otherwise sleep 5 s
NO_STOP_DIAGNOSTICS = {"SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0",
                       "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "0"}


def test_suite_and_profile_section() -> None:
    suite = load_suite(suite_path("cpu-gfx95"))
    assert suite.runner_classes() == ("cpu-gfx95",) and suite.modes == ("off", "on")
    assert isinstance(suite.judge_table, dict) and "claims" in suite.judge_table
    server = suite.server_for("cpu-gfx95")
    assert server.runner_class == "cpu-gfx95"                  # its own section, not [cpu]
    assert server.env == {"SGLANG_USE_CPU_ENGINE": "1", EMULATE_GFX95_ENV: "1",
                          **NO_STOP_DIAGNOSTICS}
    assert server.cpu_standin and server.args == load_suite(suite_path("cpu")).server_for(
        "cpu").args


def test_only_the_profile_sets_the_double() -> None:
    base = {EMULATE_GFX95_ENV: "1", "PATH": "/usr/bin"}
    cpu = build_launch(python="py", model_path="m", runner=load_suite(suite_path("cpu"))
                       .server_for("cpu"), mode="on", port=1, base_env=base)
    assert EMULATE_GFX95_ENV not in cpu.env                     # inherited: dropped
    emulated = build_launch(python="py", model_path="m", runner=load_suite(
        suite_path("cpu-gfx95")).server_for("cpu-gfx95"), mode="off", port=1, base_env={})
    assert emulated.env[EMULATE_GFX95_ENV] == "1" and emulated.set_env[EMULATE_GFX95_ENV] == "1"
    assert emulated.env["SGLANG_EXACT_CHUNK_FILL"] == "0"       # off stays the real gate's off


def test_read_back_ties_the_gate_to_the_double(test_data: Path) -> None:
    forced = _log(test_data, "srv64x")                          # real batches, all at 256
    off = _log(test_data, "srv64")
    aligned = logparse.alignment(logparse.parse_prefill_lines(forced)[2:], 256)
    not_aligned = logparse.alignment(logparse.parse_prefill_lines(off)[2:], 256)
    # the forced log carries the forcing hook's line; strip it for the real-gate modes
    real = forced.replace("servegate-hook: exact chunk fill forced", "servegate-hook: (removed)")
    real = "\n".join(line for line in real.splitlines() if "sitecustomize" not in line)
    on = f"{real}\n{DOUBLE} in pid 41\nservegate-hook: exact chunk fill gate=True in pid 41\n"
    assert check_effective("on", "cpu-gfx95", on, aligned) is True
    assert device_double("cpu-gfx95", on) == \
        "gfx95 emulated (gcnArchName=gfx950:sramecc+:xnack-) in pids [41]"
    gate_off = f"{off}\n{DOUBLE} in pid 7\nservegate-hook: exact chunk fill gate=False in pid 7\n"
    assert check_effective("off", "cpu-gfx95", gate_off, not_aligned) is False
    with pytest.raises(ExactFillMismatch, match="saturated prefill batches are exactly 256"):
        check_effective("on", "cpu-gfx95", gate_off.replace("gate=False", "gate=True"),
                        not_aligned)
    with pytest.raises(ExactFillMismatch, match="no 'servegate-hook: device double' line"):
        check_effective("on", "cpu-gfx95",
                        f"{real}\nservegate-hook: exact chunk fill gate=True in pid 41\n", aligned)
    with pytest.raises(ExactFillMismatch, match=r"evaluated in pids \[42\] without the device"):
        check_effective("on", "cpu-gfx95", on + "servegate-hook: exact chunk fill gate=True in "
                                                "pid 42\n", aligned)
    for real_device in ("mi355x", "cpu"):
        with pytest.raises(ExactFillMismatch, match="is a real device, but the server ran"):
            check_effective("on", real_device, on, aligned)


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
