"""bench's ``complete`` flag on disk while the run is going (issue 15): run.json says
``complete: true`` only after the last point, never before the first (no server: the slot
runner is replaced by one that reads run.json as the judge would at that moment)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from servegate import bench


@pytest.fixture
def no_model_prep(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(bench, "ensure_gguf_model", lambda name, package_file: tmp_path / "m")
    monkeypatch.setenv("SERVEGATE_RUNNER", "cpu")
    monkeypatch.delenv("SERVEGATE_HISTORY", raising=False)


def _run_json(ctx: bench.Context) -> dict[str, Any]:
    return json.loads((ctx.session.run_dir / "run.json").read_text())


@pytest.mark.usefixtures("no_model_prep")
def test_run_is_not_complete_while_any_slot_runs(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[tuple[object, object]] = []

    def slot_reading_run_json(ctx: bench.Context, slot: Any, *args: object,
                              **kwargs: object) -> None:
        on_disk = _run_json(ctx)
        seen.append((on_disk["complete"], on_disk.get("finished_at")))

    monkeypatch.setattr(bench, "_run_slot", slot_reading_run_json)
    code = bench.main(["--suite", "cpu", "--results-dir", str(tmp_path), "--no-compare",
                       "--skip-accuracy"])
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0
    assert len(seen) >= 2                                   # every slot of the cpu suite ran
    assert seen == [(False, None)] * len(seen)              # none saw a finished run
    run = json.loads((run_dir / "run.json").read_text())
    assert run["complete"] is True and run["finished_at"] and "error" not in run


@pytest.mark.usefixtures("no_model_prep")
def test_failure_in_the_last_slot_leaves_the_run_incomplete(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[int] = []

    def last_slot_fails(ctx: bench.Context, slot: Any, *args: object, **kwargs: object) -> None:
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("boom in the last slot")

    monkeypatch.setattr(bench, "_run_slot", last_slot_fails)
    code = bench.main(["--suite", "cpu", "--results-dir", str(tmp_path), "--no-compare",
                       "--skip-accuracy", "--modes", "off,on,forced"])
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 2 and len(calls) == 3                   # one server slot per mode
    run = json.loads((run_dir / "run.json").read_text())
    assert run["complete"] is False and "boom in the last slot" in run["error"]
