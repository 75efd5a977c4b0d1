"""Typed, versioned files: committed baselines and golden traces load through the versioned
loader; older files are upgraded in memory and by `servegate upgrade`; bad files name the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from judge_runs import make_run

from servegate.commands import dispatch
from servegate.core.results import RUN_SCHEMA_VERSION, load_run
from servegate.judge.baselines import (
    BaselineError,
    baseline_from_run,
    dumps_baseline,
    read_baseline,
)


def _v1_baseline(tmp_path: Path, gpu_name: str) -> Path:
    run_dir = make_run(tmp_path / "run", runner_class="mi325x", model_profile="glm-5.2-mxfp4",
                       suite="nightly")
    document = baseline_from_run(load_run(run_dir), run_dir)
    document["schema_version"] = 1                    # as servegate wrote it before v2
    document["runner_class"] = "gfx942"
    document["provenance"]["fingerprint"] = {"gpu_name": gpu_name, "gpu_arch": "gfx942"}
    path = tmp_path / "baselines" / "gfx942" / "glm-5.2-mxfp4" / "nightly.json"
    path.parent.mkdir(parents=True)
    path.write_text(dumps_baseline(document))
    return path


def test_previous_baseline_is_upgraded_by_servegate_upgrade(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _v1_baseline(tmp_path, "AMD Instinct MI325X")
    before = json.loads(path.read_text())
    in_memory, found = read_baseline(path)
    assert found == 1 and in_memory["runner_class"] == "mi325x"
    assert json.loads(path.read_text()) == before      # reading never rewrites
    assert dispatch.main(["upgrade", str(path)]) == 0
    assert "baseline schema 1 -> 2" in capsys.readouterr().out
    after = json.loads(path.read_text())
    assert after["schema_version"] == 2 and after["runner_class"] == "mi325x"
    assert after["points"] == before["points"] and after["provenance"] == before["provenance"]
    assert dispatch.main(["upgrade", str(path)]) == 0
    assert "unchanged" in capsys.readouterr().out


def test_previous_run_json_is_upgraded_in_memory_and_on_request(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run", runner_class="gfx95")
    raw = json.loads((run_dir / "run.json").read_text())
    raw["schema_version"] = 1
    raw["fingerprint"].update(gpu_name="AMD Instinct MI355X", gpu_arch="gfx950")
    (run_dir / "run.json").write_text(json.dumps(raw))
    run = load_run(run_dir)
    assert run["runner_class"] == "mi355x" and run["schema_version"] == RUN_SCHEMA_VERSION
    assert dispatch.main(["upgrade", str(run_dir / "run.json")]) == 0
    rewritten = json.loads((run_dir / "run.json").read_text())
    assert rewritten["schema_version"] == RUN_SCHEMA_VERSION
    assert rewritten["runner_class"] == rewritten["fingerprint"]["runner_class"] == "mi355x"


def test_unnameable_old_gpu_and_bad_files_are_refused_untouched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _v1_baseline(tmp_path, "")                  # gfx942: MI300X or MI325X? unknown
    before = path.read_bytes()
    with pytest.raises(BaselineError, match="cannot be named as a GPU model"):
        read_baseline(path)
    stray = tmp_path / "notes.json"
    stray.write_text('{"hello": 1}')
    assert dispatch.main(["upgrade", str(path), str(stray)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and f"{stray}: not a servegate" in err
    assert path.read_bytes() == before
