"""A point's load on its store lines (servegate.history.load) and the readers that compare like
with like: ``history:N``, the learned profile, ``history health`` and the site."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from judge_runs import hardware_fields, on
from unit.judge.block_runs import write_block_run

from servegate.commands.compare import history_baseline, noise_profile
from servegate.core.results import load_run
from servegate.history.health import health, render
from servegate.history.load import judged_run_filters, regimes, run_load_ids, series_changes
from servegate.history.profile import learn_profile
from servegate.history.records import (
    ACCURACY_METRIC,
    dumps_records,
    parse_line,
    records_from_run,
)
from servegate.history.report import analyse
from servegate.history.rolling import rolling_baseline, rolling_from_store
from servegate.history.store import HistoryError, add_run, read_store
from servegate.history.svg import series_chart_svg

RUNNER, MODEL, SUITE = "mi355x", "smollm2-135m", "blocks-synthetic"


def _with_load(run_dir: Path, out_c4: int | None, input_len: int = 128) -> Path:
    """Record the suite's [load] in run.json (c4's output shaped to ``out_c4``); None: a run
    from before run.json recorded its load."""
    if out_c4 is None:
        return run_dir
    run = json.loads((run_dir / "run.json").read_text())
    run["load"] = {"dataset": "random-ids", "input_len": input_len, "output_len": 32,
                   "concurrency": [2, 4], "num_prompts": [8, 16], "range_ratio": 1.0,
                   "shaped_output_len": [32, out_c4]}
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


def _night(tmp: Path, night: int, out_c4: int | None, slow: float = 1.0, **kw: Any) -> Path:
    """Night ``night``: 2 starts x 6 blocks, ``off`` ``slow`` times slower."""
    def effect(label: str, conc: int, start: int, block: int) -> float:
        return slow if label == "off" else 1.0
    return _with_load(write_block_run(
        tmp / f"night-{night:02d}", runner_class=RUNNER, seed=night, block_sd=0.005,
        start_sd=0.01, effect=effect, accuracy={"off": {"n": 50, "correct": 40}},
        started_at=f"2026-11-{night + 1:02d}T12:00:00+00:00", **kw), out_c4)


def _store(tmp: Path, loads: list[int | None], slow_from: int = 99) -> Path:
    store = tmp / "store"
    for night, out_c4 in enumerate(loads):
        add_run(_night(tmp, night, out_c4, 1.06 if night >= slow_from else 1.0), store)
    return store


def test_each_point_line_carries_its_load_with_a_stable_id(tmp_path: Path) -> None:
    run = load_run(_night(tmp_path, 0, out_c4=16))
    lines = records_from_run(run, "night-00")
    loads = {(r.concurrency, r.metric == ACCURACY_METRIC): r.load for r in lines}
    c2, c4 = loads[(2, False)], loads[(4, False)]
    assert c2 is not None and c4 is not None
    assert (c2["output_len"], c2["num_prompts"], c4["output_len"], c4["num_prompts"]) == \
        (32, 8, 16, 16)
    assert c2["chunk_size"] == 256 and c2["page_size"] == 64 and c2["dataset"] == "random-ids"
    assert c2["id"] != c4["id"] and len(c4["id"]) == 12
    assert records_from_run(run, "again")[0].load == lines[0].load       # stable
    assert run_load_ids(run) == {2: c2["id"], 4: c4["id"]}
    assert all(r.load is None for r in lines if r.metric == ACCURACY_METRIC)
    older = load_run(_night(tmp_path / "old", 0, out_c4=None))
    assert all(r.load is None for r in records_from_run(older, "old")) and not run_load_ids(older)
    store = tmp_path / "store"
    store.mkdir()
    (store / "night-00.jsonl").write_text(dumps_records(        # stored before lines had it
        dataclasses.replace(r, load=None) for r in records_from_run(run, "night-00")))
    assert add_run(tmp_path / "night-00", store).status == "upgraded"
    assert {r.concurrency: r.load for r in read_store(store, strict=True).records
            if r.load} == {2: c2, 4: c4}


def test_a_line_with_a_malformed_load_is_named(tmp_path: Path) -> None:
    line = records_from_run(load_run(_night(tmp_path, 0, out_c4=16)), "r")[0].to_json()
    for bad in ({"input_len": 128}, "x"):
        found = parse_line(json.dumps({**line, "load": bad}), tmp_path / "r.jsonl", "r")
        assert isinstance(found, str) and found.startswith("load must be an object")
    assert not isinstance(parse_line(json.dumps(line), tmp_path / "r.jsonl", "r"), str)


def test_history_n_pools_only_nights_of_the_judged_runs_load(tmp_path: Path) -> None:
    """2 nights of unknown load, 4 of c4 output 32, 3 of c4 output 16: judged on 16, c4 pools
    its 3 nights plus the 2 unknown (comparable with any) and is named short of 6; c2 (same
    load throughout) pools the last 6; judged on 32 c4 pools the nights before the change."""
    store = _store(tmp_path, [None, None, 32, 32, 32, 32, 16, 16, 16])
    records = read_store(store).records
    new = run_load_ids(load_run(tmp_path / "night-08"))
    old = run_load_ids(load_run(tmp_path / "night-05"))
    rolling = rolling_baseline(records, RUNNER, MODEL, SUITE, nights=6, loads=new)
    by = {(s.mode, s.concurrency, s.metric): s.run_ids for s in rolling.series}
    assert by[("on", 4, "mean_ttft_ms")] == ("night-00", "night-01", "night-06", "night-07",
                                             "night-08")
    assert by[("on", 2, "mean_ttft_ms")] == tuple(f"night-{n:02d}" for n in range(3, 9))
    assert any(s.startswith("on@c4 mean_ttft_ms: 5 night(s) on load") for s in rolling.short)
    assert not any("@c2" in s for s in rolling.short)
    before = rolling_baseline(records, RUNNER, MODEL, SUITE, nights=6, loads=old)
    for series in (s for s in before.series if s.concurrency == 4):   # (a change point may cut)
        assert series.run_ids[-1] == "night-05" and max(series.run_ids) == "night-05"
    with pytest.raises(HistoryError, match="too few nights on the judged run's load"):
        rolling_from_store(store, RUNNER, MODEL, SUITE, nights=6, full_window=True, loads=new)
    with pytest.raises(HistoryError, match=r"on@c4 mean_ttft_ms: 4 night\(s\) on load"):
        history_baseline(load_run(tmp_path / "night-08"), tmp_path / "night-08", "history:6",
                         store)                                       # compare's, run excluded
    assert rolling_from_store(store, RUNNER, MODEL, SUITE, nights=5, full_window=True,
                              loads=new).short == ()
    unfiltered = rolling_baseline(records, RUNNER, MODEL, SUITE, nights=6)
    assert all({"night-05", "night-06"} <= set(s.run_ids)             # what it did before
               for s in unfiltered.series if s.concurrency == 4)


def test_history_n_and_the_noise_profile_pool_only_the_judged_runs_hardware(
        tmp_path: Path) -> None:
    """Issue 39: 2 nights of unknown hardware (stored before lines carried it), 3 on a cpu of
    family 23, 3 on this one (25): judged on the last, both readers pool this hardware's and the
    unknown nights, never family 23's; the unknown ones are said."""
    store = tmp_path / "store"
    for night in range(8):
        run_dir = _night(tmp_path, night, out_c4=16)
        if night >= 2:
            on(run_dir, hardware_fields("23" if night < 5 else "25"))
        add_run(run_dir, store)
    records = read_store(store).records
    here = hardware_fields()["hardware"]
    assert {r.run_id: r.hardware for r in records if r.run_id in ("night-01", "night-07")} == {
        "night-01": None, "night-07": here}                     # every line of the run has it
    judged = load_run(tmp_path / "night-07")
    assert judged_run_filters(judged, tmp_path / "night-07")[2] == here
    window = history_baseline(judged, tmp_path / "night-07", "history:4", store)
    assert window["provenance"]["run_ids"] == ["night-00", "night-01", "night-05", "night-06"]
    assert window["provenance"]["fingerprint"] == {}            # unknown nights: not known
    recent = rolling_baseline(records, RUNNER, MODEL, SUITE, nights=2, hardware=here,
                              exclude_run_ids=["night-07"])
    assert recent.run_ids == ("night-05", "night-06") and recent.hardware == here
    profile = noise_profile(judged, tmp_path / "night-07", store, 30)
    assert profile is not None
    assert [n.run_id for n in profile.nights] == ["night-00", "night-01", "night-05", "night-06"]
    assert profile.unknown_hardware == 2


def test_a_load_change_starts_a_new_regime_and_is_named() -> None:
    from servegate.history.records import Record

    def night(run: str, out: int | None) -> list[Record]:
        load = None if out is None else {"output_len": out, "id": f"id{out}"}
        return [Record(run_id=run, time=run, runner_class=RUNNER, model=MODEL, suite=SUITE,
                       mode="on", concurrency=4, metric="mean_ttft_ms", values=(1.0,),
                       load=load)]
    nights = [night("a", 32), night("b", None), night("c", 32), night("d", 16), night("e", None)]
    start, changes = regimes(nights)
    assert start == 3 and [c.run_id for c in changes] == ["d"]
    assert changes[0].changed == "c4 output_len 32 -> 16"
    assert series_changes([n[0] for n in nights]) == {3: "output_len 32 -> 16"}


def test_a_load_change_is_named_not_flagged_as_a_sustained_shift(tmp_path: Path) -> None:
    """20 nights, c4's output shortened at night 15 and ``off`` 6 % slower from there (what
    the new load costs): without the loads the rule flags off's mean TTFT (what it did before
    lines carried them); with them it reads only the 5 nights of the new load, flags nothing
    and names the change."""
    store = _store(tmp_path, [32] * 15 + [16] * 5, slow_from=15)
    records = read_store(store).records
    (blind,) = health([dataclasses.replace(r, load=None) for r in records],
                      metrics=("mean_ttft_ms",))
    assert {a["mode"]: bool(a["flagged"]) for a in blind["aggregates"]} == {
        "off": True, "on": False}
    (entry,) = health(records, metrics=("mean_ttft_ms",))
    assert entry["nights"] == 5
    assert all(a["flagged"] == [] for a in entry["aggregates"])
    assert entry["load_changes"] == [{"run_id": "night-15", "time": "2026-11-16T12:00:00+00:00",
                                      "changed": "c4 output_len 32 -> 16"}]
    assert "load changed at night-15 (2026-11-16T12:00:00+00:00): c4 output_len 32 -> 16" in \
        render([entry])
    profile = learn_profile(records, RUNNER, MODEL, SUITE)
    assert profile is not None and [n.run_id for n in profile.nights] == [
        f"night-{n}" for n in range(15, 20)]
    older = noise_profile(load_run(tmp_path / "night-00"), tmp_path / "night-00", store,
                          30)                                   # compare's, judged on 32
    assert older is not None and len(older.nights) == 14          # the old load's own nights


def test_a_real_shift_within_one_load_is_still_flagged(tmp_path: Path) -> None:
    """A load change at night 2, then 22 nights of one load with off 6 % slower from night
    17: the rule's reference is nights 2-15 and it flags the shift."""
    store = _store(tmp_path, [32] * 2 + [16] * 22, slow_from=17)
    (entry,) = health(read_store(store).records, metrics=("mean_ttft_ms",))
    assert entry["nights"] == 22 and [c["run_id"] for c in entry["load_changes"]] == ["night-02"]
    flagged = {a["mode"]: a["flagged"] for a in entry["aggregates"]}
    assert flagged["on"] == [] and flagged["off"] and flagged["off"][0] in (
        "night-17", "night-18", "night-19")


def test_the_site_marks_the_night_the_load_changed(tmp_path: Path) -> None:
    from servegate.history.pages import series_pages
    from servegate.history.render import render_series

    store = _store(tmp_path, [32] * 4 + [16] * 3)
    reports = {r.key: r for r in analyse(read_store(store).records)}
    c4 = reports[(RUNNER, MODEL, SUITE, "on", 4, "mean_ttft_ms")]
    c2 = reports[(RUNNER, MODEL, SUITE, "on", 2, "mean_ttft_ms")]
    chart = series_chart_svg(c4)
    assert chart.count('class="load"') == 1 and "load changed: output_len 32 -&gt; 16" in chart
    assert chart.count('class="mean"') == 2                  # the means' line breaks there
    assert 'class="load"' not in series_chart_svg(c2)
    [[page]] = series_pages([c4]).values()
    html = render_series(page, [page], None, 0.05)
    assert html.count("load changed: output_len 32 -&gt; 16") == 2   # the chart and night 4
