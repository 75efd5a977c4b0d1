"""servegate.core.results: run.json's model, its upgrades and its error locations (issue 15)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from judge_runs import make_run

from servegate.core.results import RunFolderError, load_run


def _v1(tmp_path: Path, runner: str, **fingerprint: Any) -> Path:
    run_dir = make_run(tmp_path / "run", runner_class=runner)
    raw = json.loads((run_dir / "run.json").read_text())
    raw["schema_version"] = 1
    raw["fingerprint"] = {"sglang": "0.5.23", "host": "h", **fingerprint}
    (run_dir / "run.json").write_text(json.dumps(raw))
    return run_dir


@pytest.mark.parametrize(("v1_runner", "fingerprint", "model"), [
    ("gfx95", {}, "mi355x"),                   # the one gfx95 model, from the v1 name alone
    ("gfx942", {"gpu_name": "AMD Instinct MI325X"}, "mi325x"),
    ("gfx942", {"gpu_name": "AMD Instinct MI300X"}, "mi300x"),
    ("nvidia", {"gpu_name": "NVIDIA H200 141GB"}, "h200"),
    ("nvidia", {"gpu_name": "NVIDIA B200"}, "b200"),
    # the device's own architecture wins over the v1 name
    ("gfx942", {"gpu_arch": "gfx950:sramecc+:xnack-"}, "mi355x"),
])
def test_v1_runner_class_becomes_the_gpu_model(tmp_path: Path, v1_runner: str,
                                               fingerprint: dict[str, str], model: str) -> None:
    run = load_run(_v1(tmp_path, v1_runner, **fingerprint))
    assert run["runner_class"] == model
    assert run["fingerprint"]["runner_class"] == model
    assert run["fingerprint"]["sglang"] == "0.5.23"          # the rest of it is kept


def test_v1_without_a_fingerprint_is_upgraded_from_its_name(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run", runner_class="gfx95")
    raw = json.loads((run_dir / "run.json").read_text())
    raw["schema_version"] = 1
    raw.pop("fingerprint")
    (run_dir / "run.json").write_text(json.dumps(raw))
    run = load_run(run_dir)
    assert run["runner_class"] == "mi355x" and run["fingerprint"] == {"runner_class": "mi355x"}


def test_v1_cpu_run_is_unchanged(tmp_path: Path) -> None:
    run = load_run(_v1(tmp_path, "cpu", runner_class="cpu"))
    assert run["runner_class"] == "cpu" and run["fingerprint"]["runner_class"] == "cpu"


@pytest.mark.parametrize(("v1_runner", "fingerprint", "words"), [
    ("gfx942", {}, "runner_class 'gfx942' (schema 1) cannot be named as a GPU model: GPU "
                   "'<no name>' (gfx942): not one of the registered gfx942 models"),
    ("nvidia", {"gpu_name": "NVIDIA A100"}, "runner_class 'nvidia' (schema 1) cannot be named"),
    ("rocm-other", {"gpu_name": "AMD Instinct MI355X"}, "runner_class 'rocm-other' (schema 1)"),
])
def test_v1_runner_class_that_names_no_model_is_an_error(tmp_path: Path, v1_runner: str,
                                                         fingerprint: dict[str, str],
                                                         words: str) -> None:
    run_dir = _v1(tmp_path, v1_runner, **fingerprint)
    with pytest.raises(RunFolderError) as info:
        load_run(run_dir)
    assert str(info.value).startswith(f"{run_dir / 'run.json'}: ")
    assert words in str(info.value)


def _load_changed(tmp_path: Path, change: Any) -> tuple[Path, pytest.ExceptionInfo[RunFolderError]]:
    """A synthetic run whose run.json ``change`` edits, and the error loading it raises."""
    run_dir = make_run(tmp_path / "run")
    data = json.loads((run_dir / "run.json").read_text())
    change(data)
    (run_dir / "run.json").write_text(json.dumps(data))
    with pytest.raises(RunFolderError) as info:
        load_run(run_dir)
    return run_dir, info


@pytest.mark.parametrize(("change", "where"), [
    (lambda d: d.update(suite=5), ": suite: "),                       # top level: no dot
    (lambda d: d["points"][0].update(repeat="x"), ": points[0].repeat: "),
    (lambda d: d["points"][1]["alignment"].update(chunk_size="x"), ": points[1].alignment.chunk_size: "),
])
def test_error_location_reads_as_a_path(tmp_path: Path, change: Any, where: str) -> None:
    run_dir, info = _load_changed(tmp_path, change)
    assert f"{run_dir / 'run.json'}{where}" in str(info.value)


def test_unusable_reasons_one_at_a_time() -> None:
    from servegate.core.results import unusable_reasons

    good: dict[str, Any] = {"complete": True, "points": [{"mode": "off"}]}
    assert unusable_reasons(good) == []        # type: ignore[arg-type]
    cases = [
        ({"complete": None}, ["run is incomplete (run.json complete is not true)"]),
        ({"complete": 1}, ["run is incomplete (run.json complete is not true)"]),
        ({"injected": {"SERVEGATE_INJECT_DELAY_MS": "40"}},
         ["run had servegate fault injection enabled: {'SERVEGATE_INJECT_DELAY_MS': '40'}"]),
        ({"error": "ServerError: boom"}, ["run failed: ServerError: boom"]),
        ({"points": []}, ["run has no points"]),
    ]
    for change, reasons in cases:
        run = {k: v for k, v in {**good, **change}.items() if v is not None}
        assert unusable_reasons(run) == reasons, change    # type: ignore[arg-type]


def test_bad_run_json_quotes_the_offending_value(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    data = json.loads((run_dir / "run.json").read_text())
    data["points"][0]["repeat"] = "first"
    (run_dir / "run.json").write_text(json.dumps(data))
    with pytest.raises(RunFolderError) as info:
        load_run(run_dir)
    assert str(info.value).endswith("(got 'first')")
    (run_dir / "run.json").write_text("{broken")
    with pytest.raises(RunFolderError) as info:
        load_run(run_dir)
    assert str(info.value).startswith(f"{run_dir / 'run.json'}: not valid JSON (")


# Typed, versioned files: committed baselines and golden traces load through the versioned
# loader; older files are upgraded in memory and by `servegate upgrade`; bad files name the field.


@pytest.mark.parametrize(("change", "needle"), [
    (lambda d: d["points"][1].update(mode="fast"), "points[1].mode"),
    (lambda d: d["points"][0].pop("concurrency"), "points[0].concurrency: Field required"),
    (lambda d: d["points"][0]["metrics"].update(mean_ttft_ms="fast"),
     "points[0].metrics.mean_ttft_ms"),
    (lambda d: d.update(complete="maybe"), "complete: Input should be a valid boolean"),
    (lambda d: d.update(compleat=True), "compleat: Extra inputs are not permitted"),
    (lambda d: d.update(schema_version=9), "schema_version 9 is newer than this servegate"),
    (lambda d: d.pop("schema_version"), "schema_version must be an integer, got None"),
])
def test_bad_run_json_names_file_and_field(tmp_path: Path, change, needle: str) -> None:
    run_dir, info = _load_changed(tmp_path, change)
    assert str(run_dir / "run.json") in str(info.value) and needle in str(info.value)
