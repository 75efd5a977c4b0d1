"""bench's ``complete`` flag on disk while the run is going (issue 15): run.json says
``complete: true`` only after the last point, never before the first (no server: the slot
runner is replaced by one that reads run.json as the judge would at that moment)."""

from __future__ import annotations

from repo_files import REPO_ROOT, LEGACY_SUITES

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


# suites/cpu.toml before [design]: one server start per mode (slots run by bench._run_slot)
LEGACY_CPU = LEGACY_SUITES / "cpu.toml"
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


@pytest.mark.usefixtures("no_model_prep")
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


@pytest.mark.usefixtures("no_model_prep")
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
