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
    BASELINE_SCHEMA_VERSION,
    BaselineError,
    baseline_from_run,
    dumps_baseline,
    read_baseline,
)


def _as_v2_points(points: list[dict]) -> list[dict]:
    """Schema-3 points as schema 2 stored them: the blocks under ``repeats`` / ``n_repeats``,
    the repeat numbers on the point (a run from before blocks: one start per repeat)."""
    old = []
    for point in points:
        metrics = {name: {**{k: v for k, v in entry.items()
                             if k not in ("blocks", "n_blocks", "starts")},
                          "n_repeats": entry["n_blocks"], "repeats": entry["blocks"]}
                   for name, entry in point["metrics"].items()}
        starts = next(iter(point["metrics"].values()))["starts"]
        old.append({**point, "repeats": starts, "metrics": metrics})
    return old


def _old_baseline(tmp_path: Path, version: int, gpu_name: str = "AMD Instinct MI325X"
                  ) -> tuple[Path, dict]:
    """A baseline file as servegate wrote it at schema ``version`` (1: keyed by architecture;
    1 and 2: blocks under ``repeats``), and the schema-3 document of the same run."""
    run_dir = make_run(tmp_path / "run", runner_class="mi325x", model_profile="glm-5.2-mxfp4",
                       suite="nightly", repeats=2)
    current = baseline_from_run(load_run(run_dir), run_dir)
    document = {**current, "schema_version": version, "points": _as_v2_points(current["points"])}
    if version == 1:
        document["runner_class"] = "gfx942"
        document["provenance"] = {**current["provenance"],
                                  "fingerprint": {"gpu_name": gpu_name, "gpu_arch": "gfx942"}}
    path = tmp_path / "baselines" / document["runner_class"] / "glm-5.2-mxfp4" / "nightly.json"
    path.parent.mkdir(parents=True)
    path.write_text(dumps_baseline(document))
    return path, current


def _v1_baseline(tmp_path: Path, gpu_name: str) -> Path:
    return _old_baseline(tmp_path, 1, gpu_name)[0]


def test_previous_baseline_is_upgraded_by_servegate_upgrade(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _v1_baseline(tmp_path, "AMD Instinct MI325X")
    before = json.loads(path.read_text())
    in_memory, found = read_baseline(path)
    assert found == 1 and in_memory["runner_class"] == "mi325x"
    assert json.loads(path.read_text()) == before      # reading never rewrites
    assert dispatch.main(["upgrade", str(path)]) == 0
    assert f"baseline schema 1 -> {BASELINE_SCHEMA_VERSION}" in capsys.readouterr().out
    after = json.loads(path.read_text())
    assert after["schema_version"] == BASELINE_SCHEMA_VERSION == 3
    assert after["runner_class"] == "mi325x"
    assert after["points"] == in_memory["points"] and after["provenance"] == before["provenance"]
    assert dispatch.main(["upgrade", str(path)]) == 0
    assert "unchanged" in capsys.readouterr().out


def test_a_v2_baseline_is_rewritten_with_blocks_and_their_starts(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`servegate upgrade` on a schema-2 baseline: every metric's ``repeats`` / ``n_repeats``
    become ``blocks`` / ``n_blocks`` with each block's start (before blocks: its repeat), the
    point-level repeat numbers go; the file then equals the schema-3 baseline of the same run."""
    path, current = _old_baseline(tmp_path, 2)
    before = path.read_text()
    assert '"n_repeats"' in before and '"blocks"' not in before
    assert dispatch.main(["upgrade", str(path)]) == 0
    assert capsys.readouterr().out.strip() == f"upgraded {path}: baseline schema 2 -> 3"
    text = path.read_text()
    assert text == dumps_baseline(current)                 # byte for byte: sorted, one-line lists
    assert '"repeats"' not in text and '"n_repeats"' not in text
    entry = json.loads(text)["points"][0]["metrics"]["mean_ttft_ms"]
    assert entry["n_blocks"] == 2 and entry["starts"] == [0, 1] and len(entry["blocks"]) == 2
    assert read_baseline(path)[1] == 3


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
