"""What bench does after the last point: judge the run by what it has (a stored baseline or the
suite's in-run claims), or say that it is not judged (no server: the executors are replaced).

The suite is ``cpu-gfx95`` (a CPU server whose exact-fill device check sees gfx95; that runner
class's real-server path is ``tests/real_sglang/serving/test_cpu_suite_on_two_halves_e2e.py``): no
stored baseline exists for its runner class, and it has a ``[judge.claims]`` table.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from judge_runs import cpu_run, make_run, on, store
from judge_runs import hardware_fields as machine

from servegate.commands import bench, bench_finish
from servegate.config import suite_path
from servegate.core.results import load_run
from servegate.judge.baselines import local_baseline_path


def test_bench_judges_in_run_claims_without_a_baseline(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """No stored baseline for cpu-gfx95: bench still judges (the suite has [judge.claims]) and
    returns the judge's code; a suite with neither is not judged (exit 0)."""
    monkeypatch.setattr(bench, "ensure_gguf_model", lambda name, package_file: tmp_path / "m")
    monkeypatch.setattr(bench, "run_in_server", lambda *a, **k: None)
    monkeypatch.setattr(bench, "_require_gate", lambda *args: None)
    monkeypatch.setattr(bench, "add_to_history", lambda ctx: None)
    monkeypatch.setenv("COLUMNS", "400")                # rich: one log message per line
    judged: list[Path] = []

    def compare_run(run_dir: Path, strict: bool = False) -> int:
        judged.append(Path(run_dir))
        return 1

    monkeypatch.setattr(bench_finish, "compare_run", compare_run)
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


# This machine's local baseline (issue 39 item 2): kept in the user's cache (here the test's own
# folder, tests/conftest.py), never in the repository.


class _Console:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def log(self, text: str) -> None:
        self.lines.append(text)


def _ctx(run_dir: Path, claims: bool = True) -> SimpleNamespace:
    return SimpleNamespace(run=load_run(run_dir), run_dir=run_dir, console=_Console(),
                           suite=SimpleNamespace(judge_table={"claims": {}} if claims else {}))


def test_a_cpu_run_without_a_baseline_of_its_hardware_becomes_the_local_one(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, _local_baselines: Path) -> None:
    judged: list[int] = [1, 0, 0]
    monkeypatch.setattr(bench_finish, "compare_run", lambda run_dir, strict: judged.pop(0))
    regressed = _ctx(cpu_run(tmp_path / "regressed", seed=1))
    assert bench_finish.judge_run(regressed) == 1                # a regression: not kept
    assert not list(_local_baselines.rglob("*.json"))
    first = _ctx(cpu_run(tmp_path / "first", seed=2))
    assert bench_finish.judge_run(first) == 0
    (kept,) = _local_baselines.rglob("*.json")
    assert kept == local_baseline_path(first.run)
    assert kept.relative_to(_local_baselines).parts == (
        machine()["hardware"], "cpu", "smollm2-135m", "cpu.json")
    doc = json.loads(kept.read_text())
    assert doc["provenance"]["created_by"] == "servegate bench (this machine's local baseline)"
    assert doc["provenance"]["source_run"] == str(first.run_dir)
    assert doc["provenance"]["fingerprint"]["hardware"] == machine()["hardware"]
    assert [line for line in first.console.lines if str(kept) in line] == [
        f"kept as this machine's local baseline (hardware {machine()['hardware']}): {kept}; "
        "the next run on this hardware is judged against it"]
    second = _ctx(cpu_run(tmp_path / "second", seed=3))
    assert bench_finish.judge_run(second) == 0
    assert json.loads(kept.read_text()) == doc                # the first stays the reference
    assert not [line for line in second.console.lines if "kept as" in line]


def test_no_local_baseline_off_the_cpu_tier_for_an_unusable_run_or_beside_one_of_this_hardware(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, _local_baselines: Path) -> None:
    gpu = on(make_run(tmp_path / "gpu", runner_class="mi355x", suite="cpu"), machine())
    assert bench_finish.keep_local_baseline(_ctx(gpu)) is None
    injected = cpu_run(tmp_path / "injected")
    raw = json.loads((injected / "run.json").read_text())
    (injected / "run.json").write_text(json.dumps(
        {**raw, "injected": {"SERVEGATE_INJECT_DECODE_DELAY_MS": "20"}}))
    assert bench_finish.keep_local_baseline(_ctx(injected)) is None
    same = tmp_path / "repo" / "cpu" / "smollm2-135m" / "cpu.json"
    store(cpu_run(tmp_path / "reviewed", seed=4), same)        # a stored baseline of this hardware
    monkeypatch.setattr(bench_finish, "baseline_path", lambda *identity: same)
    assert bench_finish.keep_local_baseline(_ctx(cpu_run(tmp_path / "run"))) is None
    assert not list(_local_baselines.rglob("*.json"))


@pytest.mark.parametrize(("busy", "kept"), [(0, True), (1, True), (2, False)])
def test_a_contended_run_is_not_kept_as_the_local_baseline(
        tmp_path: Path, _local_baselines: Path, busy: int, kept: bool) -> None:
    """More than a quarter of the blocks busy with other work (the contention rule of the
    real-server tests): the sitting would set every later verdict's level, so it is not kept."""
    run_dir = cpu_run(tmp_path / f"busy{busy}", seed=5)
    raw = json.loads((run_dir / "run.json").read_text())
    points = raw["points"]
    assert len(points) == 6
    for i, point in enumerate(points):
        point["machine"] = {"other_cpu_pct": 60.0 if i < busy else 0.5, "cpu_steal_pct": 0.0}
    (run_dir / "run.json").write_text(json.dumps({**raw, "points": points}))
    ctx = _ctx(run_dir)
    assert (bench_finish.keep_local_baseline(ctx) is not None) is kept
    if not kept:
        assert ctx.console.lines == ["not kept as this machine's local baseline: 2 of 6 blocks "
                                     "busy with other work (more than a quarter)"]
