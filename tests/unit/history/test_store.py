"""History store (issue 12): `history add` writes one JSON-lines file per accepted run.

Runs are synthetic run.json files (tests/judge_runs.py, the schema bench writes) and one run
rebuilt from the committed CPU baseline, so the store lines are checked against real numbers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from judge_runs import make_run
from unit.judge.block_runs import write_block_run

from servegate.core.paths import REPO_ROOT
from servegate.history.cli import main
from servegate.history.records import ACCURACY_METRIC, STORE_SCHEMA_VERSION
from servegate.history.store import (
    HistoryError,
    RunRefusedError,
    add_run,
    measured_timings,
    read_store,
)

CPU_BASELINE = REPO_ROOT / "baselines" / "cpu" / "smollm2-135m" / "cpu.json"


CONTRACT_KEYS = {"schema_version", "run_id", "time", "runner_class", "model", "suite", "mode",
                 "concurrency", "metric", "values", "starts", "blocks", "design",
                 "sglang_version", "sglang_commit", "servegate_commit"}


def _run_from_cpu_baseline(run_dir: Path) -> tuple[Path, dict[str, Any]]:
    """A run.json with the committed CPU baseline's points, repeats, accuracy and provenance."""
    baseline = json.loads(CPU_BASELINE.read_text())
    prov = baseline["provenance"]
    points = []
    for point in baseline["points"]:
        for repeat in range(max(e["n_blocks"] for e in point["metrics"].values())):
            points.append({
                "mode": point["mode"], "concurrency": point["concurrency"], "repeat": repeat,
                "order": len(points),
                "metrics": {name: entry["blocks"][repeat]
                            for name, entry in point["metrics"].items()},
            })
    run = {
        "schema_version": 1, "suite": baseline["suite"],
        "model_profile": baseline["model_profile"], "runner_class": baseline["runner_class"],
        "fingerprint": prov["fingerprint"], "command": prov["command"],
        "started_at": prov["run_started_at"], "finished_at": prov["run_finished_at"],
        "complete": True, "points": points,
        "accuracy": {mode: dict(entry) for mode, entry in baseline["accuracy"].items()},
    }
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir, baseline


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_add_real_cpu_run_shape_one_line_per_point_metric(tmp_path: Path) -> None:
    run_dir, baseline = _run_from_cpu_baseline(tmp_path / "cpu-cpu-20261130T130823Z")
    store = tmp_path / "store"
    assert main(["add", str(run_dir), "--store", str(store)]) == 0
    files = list(store.iterdir())
    assert [f.name for f in files] == ["cpu-cpu-20261130T130823Z.jsonl"]
    lines = _lines(files[0])
    perf = [line for line in lines if line["metric"] != ACCURACY_METRIC]
    expected = {(p["mode"], p["concurrency"], name): entry["blocks"]
                for p in baseline["points"] for name, entry in p["metrics"].items()}
    assert {(x["mode"], x["concurrency"], x["metric"]): x["values"] for x in perf} == expected
    for line in lines:
        assert set(line) >= CONTRACT_KEYS
        assert line["schema_version"] == STORE_SCHEMA_VERSION
        assert line["run_id"] == "cpu-cpu-20261130T130823Z"
        assert (line["runner_class"], line["model"], line["suite"]) == ("cpu", "smollm2-135m",
                                                                        "cpu")
        assert line["sglang_version"] == baseline["provenance"]["sglang"]
        assert line["sglang_commit"] == baseline["provenance"]["sglang_commit"]
        assert line["time"] == baseline["provenance"]["run_started_at"]
        # a run from before [design]: each repeat its own server start, one block each
        assert line["starts"] == list(range(len(line["values"])))
        assert line["blocks"] == [0] * len(line["values"])
        assert line["design"]["in_server"] is False and line["design"]["blocks"] == 1
    accuracy = {x["mode"]: x for x in lines if x["metric"] == ACCURACY_METRIC}
    assert set(accuracy) == set(baseline["accuracy"])
    for mode, line in accuracy.items():
        ref = baseline["accuracy"][mode]
        assert line["n"] == ref["n"]
        assert line["values"] == [ref["correct"] / ref["n"]]
    # the command line (which may carry a token) is not part of the store
    assert "hf_" not in files[0].read_text()


def test_add_same_run_twice_is_a_no_op_and_a_different_run_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run_dir = make_run(tmp_path / "cpu-cpu-1", seed=1)
    first = add_run(run_dir, store)
    before = first.path.read_bytes()
    again = add_run(run_dir, store)
    assert (first.status, again.status) == ("added", "unchanged")
    assert again.path.read_bytes() == before
    other = make_run(tmp_path / "elsewhere" / "cpu-cpu-1", seed=2)   # same id, other numbers
    with pytest.raises(HistoryError, match="already in the store"):
        add_run(other, store)
    assert first.path.read_bytes() == before
    assert sorted(p.name for p in store.iterdir()) == ["cpu-cpu-1.jsonl"]


def test_add_refuses_fault_injected_run(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    run = json.loads((run_dir / "run.json").read_text())
    run["injected"] = {"SERVEGATE_INJECT_DECODE_DELAY_MS": "100"}
    (run_dir / "run.json").write_text(json.dumps(run))
    with pytest.raises(RunRefusedError) as err:
        add_run(run_dir, tmp_path / "store")
    assert any("fault injection" in r and "DECODE_DELAY" in r for r in err.value.reasons)
    assert not (tmp_path / "store").exists()


def test_read_names_malformed_and_other_version_lines_and_skips_them(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = add_run(make_run(tmp_path / "cpu-cpu-1", seed=1), store).path
    second = add_run(make_run(tmp_path / "cpu-cpu-2", seed=2), store).path
    good = len(_lines(first)) + len(_lines(second))
    lines = second.read_text().splitlines()
    newer = json.loads(lines[0])
    newer["schema_version"] = STORE_SCHEMA_VERSION + 1
    lines[0] = json.dumps(newer)
    lines[2] = lines[2][:40]                    # truncated line (a crash mid-write elsewhere)
    second.write_text("\n".join(lines) + "\n")
    (store / ".cpu-cpu-3.jsonl.abc.tmp").write_text("{half")   # write_text's temp: not a run
    contents = read_store(store)
    assert len(contents.records) == good - 2
    problems = sorted(str(p) for p in contents.problems)
    assert problems[0].startswith(f"{second}:1: schema_version {STORE_SCHEMA_VERSION + 1}")
    assert problems[1].startswith(f"{second}:3: not valid JSON")
    with pytest.raises(HistoryError, match=rf"{second.name}:1: schema_version"):
        read_store(store, strict=True)


def test_line_whose_run_id_disagrees_with_its_file_is_named(tmp_path: Path) -> None:
    store = tmp_path / "store"
    path = add_run(make_run(tmp_path / "cpu-cpu-1"), store).path
    (store / "copied.jsonl").write_text(path.read_text().splitlines()[0] + "\n")
    problems = read_store(store).problems
    assert [(p.path.name, p.line) for p in problems] == [("copied.jsonl", 1)]
    assert "does not match the file name" in problems[0].message


def _as_schema_1(path: Path) -> None:
    """Rewrite a store file as schema 1 wrote it: values alone, no starts, blocks or design."""
    lines = []
    for line in _lines(path):
        for key in ("starts", "blocks", "design"):
            del line[key]
        lines.append(json.dumps({**line, "schema_version": 1}, sort_keys=True) + "\n")
    path.write_text("".join(lines))


def test_a_schema_1_store_is_read_each_value_its_own_start_and_still_publishes(
        tmp_path: Path) -> None:
    store = tmp_path / "store"
    for night in range(3):
        path = add_run(make_run(tmp_path / f"cpu-cpu-{night}", seed=night, repeats=3), store).path
        _as_schema_1(path)
    contents = read_store(store, strict=True)
    assert contents.problems == [] and contents.records
    for record in contents.records:
        n = len(record.values)
        assert record.starts == tuple(range(n)) and record.blocks == (0,) * n
        assert record.design is not None and record.design.to_json() == {
            "in_server": False, "starts": n, "blocks": 1}
    assert main(["report", "--store", str(store)]) == 0
    assert main(["publish", "--store", str(store), "--out", str(tmp_path / "site")]) == 0
    assert (tmp_path / "site" / "index.html").is_file()


def test_adding_a_run_stored_at_schema_1_rewrites_it_with_its_levels(tmp_path: Path) -> None:
    store = tmp_path / "store"
    run_dir = write_block_run(tmp_path / "blocks-1", starts=2, blocks=3)
    path = add_run(run_dir, store).path
    current = path.read_text()
    _as_schema_1(path)
    again = add_run(run_dir, store)
    assert again.status == "upgraded" and path.read_text() == current
    assert add_run(run_dir, store).status == "unchanged"
    other = write_block_run(tmp_path / "other" / "blocks-1", starts=2, blocks=3, seed=7)
    _as_schema_1(path)
    old = path.read_text()
    with pytest.raises(HistoryError, match="already in the store"):
        add_run(other, store)                   # another run's values: refused, untouched
    assert path.read_text() == old


def _timed_run(run_dir: Path, started_at: str, seconds: float, **kwargs: Any) -> Path:
    """A run.json with bench's ``timings`` (one block of ``seconds``)."""
    make_run(run_dir, **kwargs)
    path = run_dir / "run.json"
    run = json.loads(path.read_text())
    run.update(started_at=started_at, timings={
        "server_starts": [{"label": "s0", "seconds": 30.0, "attempt": 1}], "warmups": [],
        "blocks": [{"arm": "", "mode": "off", "start": 0, "block": 0, "concurrency": 2,
                    "seconds": seconds}], "switches": [], "gsm8k": [],
        "serving_seconds": seconds, "total_seconds": 30.0 + seconds})
    path.write_text(json.dumps(run))
    return run_dir


def test_measured_timings_per_suite_and_runner_newest_last(tmp_path: Path) -> None:
    store = tmp_path / "store"
    add_run(_timed_run(tmp_path / "b-night", "2026-12-02T02:00:00Z", 2.0), store)
    add_run(_timed_run(tmp_path / "a-night", "2026-12-01T02:00:00Z", 1.0), store)
    add_run(_timed_run(tmp_path / "other-suite", "2026-12-03T02:00:00Z", 9.0,
                       suite="premerge"), store)
    add_run(_timed_run(tmp_path / "other-runner", "2026-12-03T02:00:00Z", 9.0,
                       runner_class="mi355x", fingerprint_runner="mi355x"), store)
    add_run(make_run(tmp_path / "untimed", seed=3), store)        # a run from before timings
    nights = measured_timings(store, "synthetic", "cpu")
    assert [n["run_id"] for n in nights] == ["a-night", "b-night"]
    assert [n["timings"]["blocks"][0]["seconds"] for n in nights] == [1.0, 2.0]
    assert nights[1]["timings"]["total_seconds"] == 32.0
    assert measured_timings(store, "synthetic", "h200") == []
    assert measured_timings(tmp_path / "no-store", "synthetic", "cpu") == []


def test_a_run_stored_before_timings_is_rewritten_with_them(tmp_path: Path) -> None:
    store = tmp_path / "store"
    untimed = make_run(tmp_path / "old" / "cpu-cpu-1", seed=1)
    path = add_run(untimed, store).path
    timed = _timed_run(tmp_path / "cpu-cpu-1", "2026-11-30T12:00:00+00:00", 2.0, seed=1)
    assert add_run(timed, store).status == "upgraded"
    assert [n["run_id"] for n in measured_timings(store, "synthetic", "cpu")] == ["cpu-cpu-1"]
    assert add_run(timed, store).status == "unchanged"
    before = path.read_text()
    with pytest.raises(HistoryError, match="already in the store"):
        add_run(untimed, store)                 # dropping the timings is not an upgrade
    assert path.read_text() == before
