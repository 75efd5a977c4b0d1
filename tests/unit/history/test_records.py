"""One history store line (servegate.history.records): a run's lines keep every value's server
start and block and the night's design; a schema-1 line reads as each value its own start; a
line with bad levels is named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from judge_runs import make_run
from unit.judge.block_runs import write_block_run

from servegate.core.results import load_run
from servegate.history.records import (
    ACCURACY_METRIC,
    STORE_SCHEMA_VERSION,
    Design,
    Record,
    dumps_records,
    parse_line,
    records_from_run,
)


def _lines(run_dir: Path) -> list[Record]:
    return records_from_run(load_run(run_dir), run_dir.name)


def test_in_server_run_keeps_every_value_with_its_start_and_block_and_the_design(
        tmp_path: Path) -> None:
    run_dir = write_block_run(tmp_path / "blocks-1", starts=2, blocks=3, concurrencies=(2,),
                              accuracy={"off": {"n": 20, "correct": 15}})
    points = json.loads((run_dir / "run.json").read_text())["points"]
    records = _lines(run_dir)
    [record] = [r for r in records if (r.mode, r.metric) == ("on", "mean_ttft_ms")]
    expected = {(p["start"], p["block"]): p["metrics"]["mean_ttft_ms"] for p in points
                if p["mode"] == "on"}
    assert dict(zip(zip(record.starts, record.blocks, strict=True), record.values,
                    strict=True)) == expected
    assert record.starts == (0, 0, 0, 1, 1, 1) and record.blocks == (0, 1, 2, 0, 1, 2)
    assert record.by_start() == {s: tuple(expected[(s, b)] for b in range(3)) for s in (0, 1)}
    assert record.design == Design(in_server=True, starts=2, blocks=3)
    [accuracy] = [r for r in records if r.metric == ACCURACY_METRIC]
    assert accuracy.values == (0.75,) and accuracy.design == record.design
    # written and read back: the same records, at the current schema
    for raw, original in zip(dumps_records(records).splitlines(), records, strict=True):
        assert json.loads(raw)["schema_version"] == STORE_SCHEMA_VERSION
        assert parse_line(raw, tmp_path / "blocks-1.jsonl", "blocks-1") == (
            original, STORE_SCHEMA_VERSION)


def test_a_run_from_before_blocks_is_each_repeat_its_own_start(tmp_path: Path) -> None:
    [record, *_] = _lines(make_run(tmp_path / "cpu-cpu-1", repeats=3))
    assert (record.starts, record.blocks) == ((0, 1, 2), (0, 0, 0))
    assert record.design == Design(in_server=False, starts=3, blocks=1)


def test_a_schema_1_line_reads_each_value_its_own_start_block_0(tmp_path: Path) -> None:
    [record, *_] = _lines(make_run(tmp_path / "cpu-cpu-1", repeats=2))
    line = json.loads(dumps_records([record]))
    for key in ("starts", "blocks", "design"):
        del line[key]
    line["values"] = [1.0, 2.0, 3.0]
    parsed = parse_line(json.dumps({**line, "schema_version": 1}), tmp_path / "x.jsonl",
                        "cpu-cpu-1")
    assert not isinstance(parsed, str)
    upgraded, found = parsed
    assert found == 1
    assert (upgraded.starts, upgraded.blocks) == ((0, 1, 2), (0, 0, 0))
    assert upgraded.design == Design(in_server=False, starts=3, blocks=1)
    assert upgraded.by_start() == {0: (1.0,), 1: (2.0,), 2: (3.0,)}


def test_a_record_without_levels_is_each_value_its_own_start() -> None:
    common: dict[str, Any] = {"run_id": "r", "time": "t", "runner_class": "cpu", "model": "m",
                              "suite": "s", "mode": "off", "concurrency": 2,
                              "metric": "mean_ttft_ms"}
    record = Record(values=(1.0, 2.0), **common)
    assert (record.starts, record.blocks) == ((0, 1), (0, 0))
    assert record.design == Design(in_server=False, starts=2, blocks=1)
    tied = Record(values=(1.0, 2.0, 3.0), starts=(0, 0, 1), blocks=(0, 1, 0), **common)
    assert tied.design == Design(in_server=False, starts=2, blocks=2)
    with pytest.raises(ValueError, match="one of each per value"):
        Record(values=(1.0, 2.0), starts=(0,), **common)


@pytest.mark.parametrize(("edit", "message"), [
    ({"starts": [0]}, "starts must be a list of"),
    ({"blocks": [0, -1]}, "blocks must be a list of"),
    ({"design": {"in_server": True, "starts": 0, "blocks": 6}}, "design.starts must be"),
    ({"design": None}, "design must be an object"),
    ({"schema_version": "2"}, "schema_version must be an integer"),
    ({"timings": [1.0]}, "timings must be an object"),
    ({"arm": "left"}, "arm must be head, base or absent"),
    ({"schema_version": STORE_SCHEMA_VERSION + 1}, f"schema_version {STORE_SCHEMA_VERSION + 1} "
                                                   "is newer"),
])
def test_a_line_with_bad_levels_or_version_is_named(tmp_path: Path, edit: dict[str, Any],
                                                    message: str) -> None:
    [record, *_] = _lines(make_run(tmp_path / "cpu-cpu-1", repeats=2))
    line = {**json.loads(dumps_records([record])), **edit}
    problem = parse_line(json.dumps(line), tmp_path / "cpu-cpu-1.jsonl", "cpu-cpu-1")
    assert isinstance(problem, str) and problem.startswith(message)


TIMINGS = {"server_starts": [{"label": "s0", "seconds": 31.2, "attempt": 1}], "warmups": [],
           "blocks": [{"arm": "", "mode": "off", "start": 0, "block": 0, "concurrency": 2,
                       "seconds": 2.8}], "switches": [], "gsm8k": [],
           "serving_seconds": 2.8, "total_seconds": 40.0}


def _with_timings(run_dir: Path, timings: Any) -> Path:
    path = run_dir / "run.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "timings": timings}))
    return run_dir


def test_a_runs_timings_ride_on_its_first_line_only_and_read_back(tmp_path: Path) -> None:
    records = _lines(_with_timings(make_run(tmp_path / "cpu-cpu-1", repeats=2), TIMINGS))
    assert records[0].timings == TIMINGS
    assert all(r.timings is None for r in records[1:])
    lines = dumps_records(records).splitlines()
    assert "timings" in json.loads(lines[0]) and "timings" not in json.loads(lines[1])
    back = [parse_line(line, tmp_path / "cpu-cpu-1.jsonl", "cpu-cpu-1") for line in lines]
    assert [b[0] for b in back if not isinstance(b, str)] == records
    assert {b[1] for b in back if not isinstance(b, str)} == {STORE_SCHEMA_VERSION}


def test_a_line_without_timings_still_reads(tmp_path: Path) -> None:
    """Runs from before timings (and their store lines) have none: no schema bump needed."""
    records = _lines(make_run(tmp_path / "cpu-cpu-1"))
    assert records and all(r.timings is None for r in records)
    parsed = parse_line(dumps_records(records[:1]), tmp_path / "x.jsonl", "cpu-cpu-1")
    assert not isinstance(parsed, str) and parsed[0].timings is None


def test_a_head_vs_base_runs_lines_are_each_trees_own(tmp_path: Path) -> None:
    """Each tree's values on lines of their own (``arm``), never one line mixing the two
    servers; they read back with their tree and are a series apart from one-tree nights."""
    run_dir = write_block_run(tmp_path / "ab-1", arms=("base", "head"), starts=1, blocks=2,
                              concurrencies=(2,),
                              effect=lambda label, *_: 2.0 if label.startswith("head-") else 1.0)
    records = _lines(run_dir)
    ttft = {r.arm: r for r in records if (r.mode, r.metric) == ("off", "mean_ttft_ms")}
    assert set(ttft) == {"base", "head"} and len(ttft["head"].values) == 2
    assert min(ttft["head"].values) > 1.5 * max(ttft["base"].values)
    assert ttft["head"].identity[2] == "blocks-synthetic:head"
    back = parse_line(dumps_records([ttft["head"]]), tmp_path / "ab-1.jsonl", "ab-1")
    assert not isinstance(back, str) and back[0].arm == "head"
    assert "arm" not in json.loads(dumps_records(_lines(write_block_run(tmp_path / "one")))
                                   .splitlines()[0])
