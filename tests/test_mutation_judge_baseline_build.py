"""The baseline document built from a run (servegate.judge.baselines.baseline_from_run), field
by field against a hand-written run.json: per-metric entries (mean, sample spread, CV, repeats),
the capped request sample, accuracy with its per-question outcomes, and the provenance with the
token scrubbed (issue 15)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from servegate.judge.baselines import (
    BaselineError,
    baseline_from_run,
    baseline_path,
    dumps_baseline,
    run_identity,
)

TOKEN = "hf_abcdefghijklmnopqrstuv"


def _point(mode: str, conc: int, repeat: int, ttft: float, requests: list[float]) -> dict:
    return {"mode": mode, "concurrency": conc, "repeat": repeat,
            "metrics": {"mean_ttft_ms": ttft, "bad": float("nan"), "flag": True},
            "requests": {"ttft_ms": requests, "tpot_ms": [float("inf"), 2.0]}}


def _run(**extra: Any) -> dict[str, Any]:
    run = {"runner_class": "mi300x", "model_profile": "glm", "suite": "nightly",
           "chunk_size": 16384, "page_size": 64, "complete": True,
           "started_at": "2026-11-30T01:00:00+00:00", "finished_at": "2026-11-30T02:00:00+00:00",
           "command": ["servegate", "bench", "--token", TOKEN],
           "fingerprint": {"runner_class": "mi300x", "sglang": "0.5.23", "sglang_commit": "abc",
                           "note": f"token {TOKEN}", "gpus": 4},
           "points": [_point("on", 4, 0, 12.0, [1.0, 2.0]), _point("off", 4, 1, 11.0, [3.0]),
                      _point("off", 4, 0, 10.0, [1.23456]), _point("off", 2, 0, 5.0, [])]}
    run.update(extra)
    return run


def test_points_in_order_with_metric_entries() -> None:
    doc = baseline_from_run(_run(), Path("results/r"))    # type: ignore[arg-type]
    assert [(p["mode"], p["concurrency"], p["repeats"]) for p in doc["points"]] == [
        ("off", 2, [0]), ("off", 4, [0, 1]), ("on", 4, [0])]
    entry = doc["points"][1]["metrics"]["mean_ttft_ms"]
    spread = float(np.std([10.0, 11.0], ddof=1))           # 0.707107
    assert entry == {"value": 10.5, "spread": round(spread, 6),
                     "cv": round(spread / 10.5, 6), "n_repeats": 2, "repeats": [10.0, 11.0]}
    assert set(doc["points"][1]["metrics"]) == {"mean_ttft_ms"}    # NaN and bool dropped
    single = doc["points"][0]["metrics"]["mean_ttft_ms"]
    assert single == {"value": 5.0, "spread": None, "cv": None, "n_repeats": 1,
                      "repeats": [5.0]}


def test_a_zero_mean_has_no_cv() -> None:
    run = _run(points=[_point("off", 4, 0, 0.0, [1.0]), _point("off", 4, 1, 0.0, [1.0])])
    entry = baseline_from_run(run, Path("r"))["points"][0]["metrics"]["mean_ttft_ms"]  # type: ignore[arg-type]
    assert (entry["spread"], entry["cv"]) == (0.0, None)


def test_request_samples_pooled_rounded_counted_and_capped() -> None:
    doc = baseline_from_run(_run(), Path("r"))              # type: ignore[arg-type]
    off4 = doc["points"][1]["requests"]
    assert off4 == {"ttft_ms": [1.235, 3.0], "n_ttft_ms": 2, "tpot_ms": [2.0, 2.0],
                    "n_tpot_ms": 2}
    assert doc["points"][0]["requests"] == {"tpot_ms": [2.0], "n_tpot_ms": 1}
    many = _run(points=[_point("off", 4, 0, 1.0, [float(v) for v in range(100)])])
    capped = baseline_from_run(many, Path("r"), request_cap=10, seed=3)   # type: ignore[arg-type]
    sample = capped["points"][0]["requests"]["ttft_ms"]
    assert len(sample) == 10 and capped["points"][0]["requests"]["n_ttft_ms"] == 100
    assert sample == sorted(sample) and len(set(sample)) == 10       # kept in order, no repeats
    again = baseline_from_run(many, Path("r"), request_cap=10, seed=3)  # type: ignore[arg-type]
    assert again["points"] == capped["points"]
    exact = baseline_from_run(many, Path("r"), request_cap=100)         # type: ignore[arg-type]
    assert exact["points"][0]["requests"]["ttft_ms"] == [float(v) for v in range(100)]


def test_provenance_and_identity_with_the_token_scrubbed() -> None:
    doc = baseline_from_run(_run(), Path("results/r"), forced_reasons=["why"])  # type: ignore[arg-type]
    assert (doc["schema_version"], doc["runner_class"], doc["model_profile"], doc["suite"],
            doc["chunk_size"], doc["page_size"]) == (2, "mi300x", "glm", "nightly", 16384, 64)
    prov = doc["provenance"]
    assert TOKEN not in json.dumps(doc)
    assert prov["command"] == ["servegate", "bench", "--token", "<redacted>"]
    assert prov["fingerprint"]["note"] == "token <redacted>" and prov["fingerprint"]["gpus"] == 4
    assert (prov["created_by"], prov["source_run"], prov["run_started_at"],
            prov["run_finished_at"], prov["run_complete"], prov["sglang"],
            prov["sglang_commit"], prov["forced"], prov["forced_reasons"]) == (
        "servegate update-baselines", "results/r", "2026-11-30T01:00:00+00:00",
        "2026-11-30T02:00:00+00:00", True, "0.5.23", "abc", True, ["why"])
    assert prov["created_at"].endswith("+00:00") and "." not in prov["created_at"]
    plain = baseline_from_run(_run(complete=False), Path("r"))["provenance"]  # type: ignore[arg-type]
    assert (plain["forced"], plain["forced_reasons"], plain["run_complete"]) == (False, [], False)


def test_accuracy_with_outcomes_only_when_the_records_agree(tmp_path: Path) -> None:
    folder = tmp_path / "gsm8k"
    folder.mkdir()
    (folder / "off.jsonl").write_text("".join(
        json.dumps({"id": i, "gold": "1", "correct": c, "output": "x"}) + "\n"
        for i, c in ((4, True), (2, False), (9, True))))
    (folder / "on.jsonl").write_text(json.dumps({"id": 1, "gold": "1", "correct": True,
                                                 "output": "x"}) + "\n")
    run = _run(accuracy={"off": {"n": 3, "correct": 2}, "on": {"n": 3, "correct": 1},
                         "forced": {"n": 0, "correct": 0}, "bad": {"n": "3", "correct": 1}})
    acc = baseline_from_run(run, tmp_path)["accuracy"]      # type: ignore[arg-type]
    assert acc["off"] == {"n": 3, "correct": 2, "accuracy": 0.666667,
                          "outcomes": {"ids": [2, 4, 9], "correct": "011"}}
    assert acc["on"] == {"n": 3, "correct": 1, "accuracy": 0.333333}   # 1 record for n=3
    assert acc["forced"] == {"n": 0, "correct": 0, "accuracy": None}
    assert "bad" not in acc


@pytest.mark.parametrize(("field", "value"), [("runner_class", ""), ("model_profile", "a/b"),
                                              ("suite", ".hidden")])
def test_baseline_path_refuses_names_that_are_not_one_file(field: str, value: str) -> None:
    parts = {"runner_class": "cpu", "model_profile": "m", "suite": "s", field: value}
    with pytest.raises(BaselineError) as info:
        baseline_path(parts["runner_class"], parts["model_profile"], parts["suite"])
    assert str(info.value) == f"run.json: {field} {value!r} cannot name a baseline file"


def test_baseline_path_layout(tmp_path: Path) -> None:
    assert baseline_path("cpu", "m", "s", root=tmp_path) == tmp_path / "cpu" / "m" / "s.json"
    assert baseline_path("cpu", "m", "s").parts[-4:] == ("baselines", "cpu", "m", "s.json")


def test_run_identity_falls_back_to_the_fingerprint_and_empty_names() -> None:
    assert run_identity({"fingerprint": {"runner_class": "mi300x"}, "suite": "s"}) == (
        "mi300x", "", "s")
    assert run_identity({"runner_class": "cpu", "model_profile": "m",
                         "fingerprint": {"runner_class": "mi355x"}}) == ("cpu", "m", "")
    assert run_identity({}) == ("", "", "")
    assert run_identity({"fingerprint": {}}) == ("", "", "")


def test_the_stored_text_is_sorted_two_space_utf8_with_number_lists_on_one_line() -> None:
    doc = {"b": {"note": "MI355X · gfx950", "repeats": [1.5, 2, 3.25]}, "a": None}
    assert dumps_baseline(doc) == (
        '{\n  "a": null,\n  "b": {\n    "note": "MI355X · gfx950",\n'
        '    "repeats": [1.5, 2, 3.25]\n  }\n}\n')
    with pytest.raises(ValueError):
        dumps_baseline({"value": float("nan")})


def test_metric_entries_keep_six_decimals() -> None:
    doc = baseline_from_run(_run(points=[_point("off", 4, 0, 1.23456789, []),
                                         _point("off", 4, 1, 2.0, [])]), Path("r"))
    entry = doc["points"][0]["metrics"]["mean_ttft_ms"]
    assert entry["repeats"] == [1.234568, 2.0]
    assert entry["value"] == round((1.23456789 + 2.0) / 2, 6) == 1.617284


def test_a_capped_request_sample_never_repeats_a_request() -> None:
    requests = [float(i) for i in range(12)]
    doc = baseline_from_run(_run(points=[_point("off", 4, 0, 1.0, requests)]), Path("r"),
                            request_cap=10, seed=3)
    kept = doc["points"][0]["requests"]["ttft_ms"]
    assert len(kept) == len(set(kept)) == 10 and kept == sorted(kept)
    every = baseline_from_run(_run(points=[_point("off", 4, 0, 1.0, requests)]), Path("r"),
                              request_cap=12)
    assert every["points"][0]["requests"]["ttft_ms"] == requests


def test_a_point_without_request_samples_still_has_its_metrics() -> None:
    point = _point("off", 4, 0, 3.0, [])
    del point["requests"]
    doc = baseline_from_run(_run(points=[point]), Path("r"))
    assert doc["points"][0]["metrics"]["mean_ttft_ms"]["value"] == 3.0
