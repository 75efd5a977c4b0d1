"""What bench does after the last point: judge the run by what it has (a stored baseline or the
suite's in-run claims), or say that it is not judged (no server: the executors are replaced).

The suite is ``cpu-gfx95`` (a CPU server whose exact-fill device check sees gfx95; its real-server
path is ``tests/real_sglang/serving/test_emulated_gfx95_e2e.py``): no stored baseline exists for
its runner class, and it has a ``[judge.claims]`` table.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servegate.commands import bench, bench_finish
from servegate.config import suite_path


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
