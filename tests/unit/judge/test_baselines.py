"""Baseline files: round trip, stable order, provenance, identity errors, atomic writes."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from judge_runs import make_run
from unit.judge.block_runs import write_block_run

from servegate.core.results import load_run
from servegate.judge import baselines as bl
from servegate.judge.baselines import (
    BaselineError,
    BaselineMismatchError,
    baseline_from_run,
    baseline_path,
    dumps_baseline,
    ensure_matches,
    run_identity,
    validate_baseline,
)


def _stored(tmp_path: Path, **kw) -> tuple[Path, dict]:
    run_dir = make_run(tmp_path / "run", repeats=2, modes=("off", "on", "forced"), **kw)
    run = load_run(run_dir)
    doc = bl.baseline_from_run(run, run_dir)
    path = bl.baseline_path("cpu", "smollm2-135m", "synthetic", root=tmp_path / "baselines")
    bl.write_baseline(path, doc)
    return path, doc


def test_round_trip_and_layout(tmp_path):
    path, doc = _stored(tmp_path)
    assert path == tmp_path / "baselines" / "cpu" / "smollm2-135m" / "synthetic.json"
    loaded = bl.load_baseline(path)
    assert loaded == json.loads(json.dumps(doc))
    [point] = [p for p in loaded["points"] if (p["mode"], p["concurrency"]) == ("on", 4)]
    entry = point["metrics"]["mean_ttft_ms"]
    run = load_run(tmp_path / "run")
    values = [p["metrics"]["mean_ttft_ms"] for p in run["points"]
              if p["mode"] == "on" and p["concurrency"] == 4]
    assert entry["n_blocks"] == 2 and entry["blocks"] == pytest.approx(values, abs=1e-6)
    assert entry["starts"] == [0, 1]                    # before blocks: a repeat is its start
    assert entry["value"] == pytest.approx(sum(values) / 2, rel=1e-6)
    assert entry["spread"] is not None and entry["spread"] > 0
    assert len(point["requests"]["ttft_ms"]) == 120
    assert [(p["mode"], p["concurrency"]) for p in loaded["points"]] == [
        ("off", 2), ("off", 4), ("on", 2), ("on", 4), ("forced", 2), ("forced", 4)]


def test_stable_key_order_and_one_line_lists(tmp_path):
    path, _doc = _stored(tmp_path)
    text = path.read_text()
    assert bl.dumps_baseline(json.loads(text)) == text           # idempotent
    top_keys = [k for k in json.loads(text)]
    assert top_keys == sorted(top_keys)
    assert '"blocks": [' in text and '"starts": [' in text and '"ttft_ms": [' in text
    assert '"repeats"' not in text and '"n_repeats"' not in text
    ttft_line = next(line for line in text.splitlines() if '"ttft_ms": [' in line)
    assert ttft_line.rstrip().rstrip(",").endswith("]")         # the whole list on one line
    assert len(text.splitlines()) < 600


def test_request_sample_capped_and_seeded(tmp_path):
    run_dir = make_run(tmp_path / "run", n_requests=400, repeats=2)
    run = load_run(run_dir)
    doc = bl.baseline_from_run(run, run_dir, request_cap=100)
    again = bl.baseline_from_run(run, run_dir, request_cap=100)
    req = doc["points"][0]["requests"]
    assert len(req["ttft_ms"]) == 100 and req["n_ttft_ms"] == 800
    assert req == again["points"][0]["requests"]


def test_provenance_present_and_secret_free(tmp_path):
    path, _ = _stored(tmp_path)
    prov = bl.load_baseline(path)["provenance"]
    assert prov["source_run"] == str(tmp_path / "run")
    assert prov["sglang"] == "0.5.23" and prov["sglang_commit"] == "abc1234"
    assert prov["fingerprint"]["runner_class"] == "cpu"
    assert prov["command"][:2] == ["servegate", "bench"]
    assert prov["created_at"].endswith("+00:00")
    assert "hf_abcdefghijklmnop" not in path.read_text()


def test_wrong_runner_or_model_names_both(tmp_path):
    path, doc = _stored(tmp_path)
    other = load_run(make_run(tmp_path / "gpu", runner_class="mi355x", model_profile="glm-5.2"))
    with pytest.raises(bl.BaselineMismatchError) as err:
        bl.ensure_matches(doc, path, other, "results/gpu-run")
    message = str(err.value)
    for needle in ("'cpu'", "'mi355x'", "'smollm2-135m'", "'glm-5.2'", str(path),
                   "results/gpu-run"):
        assert needle in message


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda d: d["points"][1]["metrics"]["mean_ttft_ms"].__setitem__("value", "fast"),
     "points[1].metrics.mean_ttft_ms.value"),
    (lambda d: d["points"][0].__setitem__("mode", "sideways"), "points[0].mode"),
    (lambda d: d["provenance"].pop("source_run"), "provenance.source_run"),
    (lambda d: d.__setitem__("runner_class", ""), "runner_class"),
    (lambda d: d["points"][2]["metrics"]["median_tpot_ms"]["blocks"].pop(),
     "points[2].metrics.median_tpot_ms.blocks"),
    (lambda d: d["points"][2]["metrics"]["median_tpot_ms"]["starts"].pop(),
     "points[2].metrics.median_tpot_ms.starts"),
])
def test_malformed_file_names_file_and_field(tmp_path, mutate, field):
    path, _doc = _stored(tmp_path)
    bad = json.loads(path.read_text())
    mutate(bad)
    path.write_text(json.dumps(bad))
    with pytest.raises(bl.BaselineError) as err:
        bl.load_baseline(path)
    assert str(path) in str(err.value) and field in str(err.value)


def test_not_json_names_file(tmp_path):
    path = tmp_path / "b.json"
    path.write_text("{ nope")
    with pytest.raises(bl.BaselineError, match=str(path)):
        bl.load_baseline(path)


def test_atomic_write_keeps_old_file_on_failure(tmp_path, monkeypatch):
    path, _ = _stored(tmp_path)
    before = path.read_text()
    run = load_run(tmp_path / "run")
    new = bl.baseline_from_run(run, tmp_path / "run")

    def boom(*_args, **_kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        bl.write_baseline(path, new)
    assert path.read_text() == before
    assert [p.name for p in path.parent.iterdir()] == [path.name]   # no temp file left


def test_invalid_document_never_written(tmp_path):
    path = tmp_path / "cpu" / "m" / "s.json"
    with pytest.raises(bl.BaselineError, match="schema_version"):
        bl.write_baseline(path, {"schema_version": 99})
    assert not path.exists()


def _gsm8k(run_dir: Path, mode: str, correct: list[bool], first_id: int = 0) -> None:
    folder = run_dir / "gsm8k"
    folder.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"id": first_id + i, "gold": str(i), "predicted": "0", "correct": c,
                         "output": ""}) for i, c in enumerate(correct)]
    (folder / f"{mode}.jsonl").write_text("\n".join(lines) + "\n")


def _accuracy_run(tmp_path: Path, name: str, correct: list[bool]) -> Path:
    run_dir = make_run(tmp_path / name, modes=("off",),
                       accuracy={"off": {"n": len(correct), "correct": sum(correct)}})
    _gsm8k(run_dir, "off", correct)
    return run_dir


def test_outcomes_stored_compactly_and_validated(tmp_path):
    pattern = [True, False, True, True] * 300
    run_dir = _accuracy_run(tmp_path, "base", pattern)
    doc = bl.baseline_from_run(load_run(run_dir), run_dir)
    out = doc["accuracy"]["off"]["outcomes"]
    assert out["ids"] == list(range(1200)) and out["correct"] == "1011" * 300
    path = tmp_path / "b.json"
    bl.write_baseline(path, doc)
    assert sum(1 for line in path.read_text().splitlines() if '"ids"' in line) == 1
    assert bl.decode_outcomes(bl.load_baseline(path)["accuracy"]["off"]["outcomes"]) == \
        dict(enumerate(pattern))
    for bad, field in ((("correct", "1011" * 299 + "1012"), "outcomes.correct"),
                       (("correct", "1111" * 300), "outcomes.correct"),
                       (("ids", [*range(1199), 0]), "outcomes.ids")):
        broken = json.loads(json.dumps(doc))
        broken["accuracy"]["off"]["outcomes"][bad[0]] = bad[1]
        with pytest.raises(bl.BaselineError, match=field):
            bl.validate_baseline(broken, path)


def test_accuracy_vs_baseline_is_paired_on_question_ids(tmp_path):
    """1319 questions at ~93 %, 20 flipped each way: the unpaired interval (+-3 points) cannot
    show non-inferiority within 1 point; pairing the same ids can."""
    from servegate.judge.evaluate import judge

    rng = np.random.default_rng(0)
    base = [bool(v) for v in rng.random(1319) < 0.93]
    cur = list(base)
    right = [i for i, c in enumerate(base) if c][:20]
    wrong = [i for i, c in enumerate(base) if not c][:20]
    for i in right + wrong:                              # 20 flipped each way
        cur[i] = not cur[i]
    cur_correct = sum(cur)
    assert 1180 < cur_correct < 1260
    base_dir = _accuracy_run(tmp_path, "base", base)
    path = tmp_path / "baselines" / "cpu" / "smollm2-135m" / "synthetic.json"
    bl.write_baseline(path, bl.baseline_from_run(load_run(base_dir), base_dir))
    run_dir = _accuracy_run(tmp_path, "cur", cur)
    check = next(c for c in judge(run_dir, baseline_file=path).checks if c.kind == "accuracy")
    assert check.interval.method.startswith("paired") and "paired on 1319" in check.reason
    assert check.verdict == "pass", check.describe()
    assert check.current_value == pytest.approx(cur_correct / 1319)
    (run_dir / "gsm8k" / "off.jsonl").unlink()           # nothing to pair with: unpaired
    check = next(c for c in judge(run_dir, baseline_file=path).checks if c.kind == "accuracy")
    assert check.interval.method == "newcombe" and check.verdict == "inconclusive"
    assert "no gsm8k records" in check.reason


def test_judge_seed_varies_by_run_and_is_recorded(tmp_path):
    from servegate.judge.evaluate import judge
    from servegate.report import verdict_json

    a = make_run(tmp_path / "a")
    b = make_run(tmp_path / "b")
    run = json.loads((b / "run.json").read_text())
    run["started_at"] = "2026-12-01T12:00:00+00:00"
    (b / "run.json").write_text(json.dumps(run))
    seeds = [verdict_json.build(judge(d))["seed"] for d in (a, b, a)]
    assert seeds[0] != seeds[1] and seeds[0] == seeds[2]


# The baseline document built from a run (servegate.judge.baselines.baseline_from_run), field
# by field against a hand-written run.json: per-metric entries (mean, sample spread, CV, every
# block's value with its start),
# the capped request sample, accuracy with its per-question outcomes, and the provenance with the
# token scrubbed (issue 15).


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
    assert [(p["mode"], p["concurrency"]) for p in doc["points"]] == [
        ("off", 2), ("off", 4), ("on", 4)]
    assert all(set(p) == {"mode", "concurrency", "metrics", "requests"} for p in doc["points"])
    entry = doc["points"][1]["metrics"]["mean_ttft_ms"]
    spread = float(np.std([10.0, 11.0], ddof=1))           # 0.707107
    assert entry == {"value": 10.5, "spread": round(spread, 6),
                     "cv": round(spread / 10.5, 6), "n_blocks": 2, "blocks": [10.0, 11.0],
                     "starts": [0, 1]}                     # in repeat order, not file order
    assert set(doc["points"][1]["metrics"]) == {"mean_ttft_ms"}    # NaN and bool dropped
    single = doc["points"][0]["metrics"]["mean_ttft_ms"]
    assert single == {"value": 5.0, "spread": None, "cv": None, "n_blocks": 1,
                      "blocks": [5.0], "starts": [0]}


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
            doc["chunk_size"], doc["page_size"]) == (3, "mi300x", "glm", "nightly", 16384, 64)
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
    doc = {"b": {"note": "MI355X · gfx950", "blocks": [1.5, 2, 3.25]}, "a": None}
    assert dumps_baseline(doc) == (
        '{\n  "a": null,\n  "b": {\n    "blocks": [1.5, 2, 3.25],\n'
        '    "note": "MI355X · gfx950"\n  }\n}\n')
    with pytest.raises(ValueError):
        dumps_baseline({"value": float("nan")})


def test_metric_entries_keep_six_decimals() -> None:
    doc = baseline_from_run(_run(points=[_point("off", 4, 0, 1.23456789, []),
                                         _point("off", 4, 1, 2.0, [])]), Path("r"))
    entry = doc["points"][0]["metrics"]["mean_ttft_ms"]
    assert entry["blocks"] == [1.234568, 2.0]
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


# Every shape rule of a stored baseline, one broken field at a time, with the exact error a
# reviewer sees (file, field path, what was expected, what was found), and the edge values that
# must stay valid (issue 15). The valid document is written out here, not built by the code under
# test.


PATH = Path("baselines/mi300x/glm/nightly.json")


def _valid() -> dict[str, Any]:
    return {
        "schema_version": 3, "runner_class": "mi300x", "model_profile": "glm", "suite": "nightly",
        "provenance": {"created_at": "2026-11-30T00:00:00+00:00", "source_run": "results/x"},
        "points": [{
            "mode": "off", "concurrency": 1,
            "metrics": {"mean_ttft_ms": {"value": 10.0, "n_blocks": 1, "blocks": [10.0],
                                         "starts": [0], "spread": None}},
            "requests": {"ttft_ms": [9.0, 11.0]}}],
        "accuracy": {"off": {"n": 2, "correct": 2,
                             "outcomes": {"ids": [3, 7], "correct": "11"}}},
    }


def _set(doc: dict[str, Any], where: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node: Any = out
    keys = [int(k) if k.isdigit() else k for k in where.split("/")]
    for key in keys[:-1]:
        node = node[key]
    if value is DELETE:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return out


DELETE = object()


M = "points/0/metrics/mean_ttft_ms"


@pytest.mark.parametrize(("where", "value", "message"), [
    ("schema_version", 2, "schema_version must be 3, got 2"),     # validation never upgrades
    ("runner_class", "", "runner_class must be a non-empty string, got ''"),
    ("model_profile", 3, "model_profile must be a non-empty string, got 3"),
    ("suite", DELETE, "suite must be a non-empty string, got None"),
    ("provenance", [], "provenance must be an object, got []"),
    ("provenance/created_at", None, "provenance.created_at must be a string, got None"),
    ("provenance/source_run", 1, "provenance.source_run must be a string, got 1"),
    ("points", {}, "points must be a list, got {}"),
    ("points/0", 5, "points[0] must be an object, got 5"),
    ("points/0/mode", "fast", "points[0].mode must be one of ('off', 'on', 'forced'), "
                              "got 'fast'"),
    ("points/0/concurrency", 0, "points[0].concurrency must be an integer >= 1, got 0"),
    ("points/0/concurrency", True, "points[0].concurrency must be an integer >= 1, got True"),
    ("points/0/concurrency", 2.0, "points[0].concurrency must be an integer >= 1, got 2.0"),
    ("points/0/metrics", [], "points[0].metrics must be an object, got []"),
    (M, 1.0, "points[0].metrics.mean_ttft_ms must be an object, got 1.0"),
    (f"{M}/value", "10", "points[0].metrics.mean_ttft_ms.value must be a number, got '10'"),
    (f"{M}/value", float("nan"), "points[0].metrics.mean_ttft_ms.value must be a number, "
                                 "got nan"),
    (f"{M}/n_blocks", 0, "points[0].metrics.mean_ttft_ms.n_blocks must be an integer >= 1, "
                         "got 0"),
    (f"{M}/n_blocks", True, "points[0].metrics.mean_ttft_ms.n_blocks must be an integer >= 1, "
                            "got True"),
    (f"{M}/n_blocks", DELETE, "points[0].metrics.mean_ttft_ms.n_blocks must be an integer >= 1, "
                              "got None"),
    (f"{M}/blocks", [10.0, 11.0], "points[0].metrics.mean_ttft_ms.blocks must be a list of 1 "
                                  "numbers (one per block), got [10.0, 11.0]"),
    (f"{M}/blocks", [None], "points[0].metrics.mean_ttft_ms.blocks must be a list of 1 "
                            "numbers (one per block), got [None]"),
    (f"{M}/blocks", DELETE, "points[0].metrics.mean_ttft_ms.blocks must be a list of 1 "
                            "numbers (one per block), got None"),
    (f"{M}/spread", "x", "points[0].metrics.mean_ttft_ms.spread must be a number or null, "
                         "got 'x'"),
    (f"{M}/starts", [0, 1], "points[0].metrics.mean_ttft_ms.starts must be a list of 1 start "
                            "indexes (the start of each block), got [0, 1]"),
    (f"{M}/starts", [-1], "points[0].metrics.mean_ttft_ms.starts must be a list of 1 start "
                          "indexes (the start of each block), got [-1]"),
    (f"{M}/starts", [True], "points[0].metrics.mean_ttft_ms.starts must be a list of 1 start "
                            "indexes (the start of each block), got [True]"),
    (f"{M}/starts", 0, "points[0].metrics.mean_ttft_ms.starts must be a list of 1 start "
                       "indexes (the start of each block), got 0"),
    (f"{M}/starts", DELETE, "points[0].metrics.mean_ttft_ms.starts must be a list of 1 start "
                            "indexes (the start of each block), got None"),
    ("points/0/requests", [], "points[0].requests must be an object, got []"),
    ("points/0/requests/ttft_ms", [1.0, "2"], "points[0].requests.ttft_ms must be a list of "
                                              "numbers, got [1.0, '2']"),
    ("accuracy", [], "accuracy must be an object, got []"),
    ("accuracy/off", 1, "accuracy.off must be an object, got 1"),
    ("accuracy/off/n", -1, "accuracy.off.n must be an integer >= 0, got -1"),
    ("accuracy/off/correct", 1.0, "accuracy.off.correct must be an integer >= 0, got 1.0"),
    ("accuracy/off/correct", 3, "accuracy.off.correct must be <= n, got 3"),
    ("accuracy/off/outcomes", [], "accuracy.off.outcomes must be an object with ids and "
                                  "correct, got []"),
])
def test_each_broken_field_is_named(where: str, value: Any, message: str) -> None:
    with pytest.raises(BaselineError) as info:
        validate_baseline(_set(_valid(), where, value), PATH)
    assert str(info.value) == f"{PATH}: {message}"


def test_a_duplicate_point_is_named() -> None:
    doc = _valid()
    doc["points"].append(copy.deepcopy(doc["points"][0]))
    with pytest.raises(BaselineError) as info:
        validate_baseline(doc, PATH)
    assert str(info.value) == (f"{PATH}: points[1] must be a unique (mode, concurrency), "
                               "got ('off', 1)")


def test_not_an_object_names_the_type() -> None:
    with pytest.raises(BaselineError) as info:
        validate_baseline([], PATH)
    assert str(info.value) == f"{PATH}: top level must be a JSON object, got 'list'"


def test_edge_values_stay_valid() -> None:
    doc = _valid()
    assert validate_baseline(doc, PATH) is doc
    for where, value in (("points/0/requests", DELETE), ("accuracy", DELETE),
                         (f"{M}/spread", 0.5), (f"{M}/spread", DELETE),
                         ("accuracy/off/outcomes", DELETE), ("points", []),
                         ("points/0/mode", "forced"), (f"{M}/starts", [3])):
        validate_baseline(_set(_valid(), where, value), PATH)
    empty = _set(_set(_valid(), "accuracy/off/n", 0), "accuracy/off/correct", 0)
    del empty["accuracy"]["off"]["outcomes"]
    validate_baseline(empty, PATH)


# The baseline identity and its provenance, as update-baselines relies on them (issue 15).
#
# Each test states one refusal on its own (a run that is wrong in exactly one way), so a refusal
# that silently stops applying cannot hide behind another one that still fires.


def _baseline_doc(tmp_path: Path, **identity: str) -> dict[str, object]:
    run = json.loads((make_run(tmp_path / "bl", **identity) / "run.json").read_text())
    return baseline_from_run(run, tmp_path / "bl")


@pytest.mark.parametrize(("field", "run_identity", "words"), [
    ("suite", {"suite": "nightly"}, "suite 'synthetic'"),
    ("model_profile", {"model_profile": "glm-5.2-mxfp4"}, "model_profile 'smollm2-135m'"),
    ("runner_class", {"runner_class": "mi355x"}, "runner_class 'cpu'"),
])
def test_ensure_matches_refuses_a_baseline_differing_in_one_field(
        tmp_path: Path, field: str, run_identity: dict[str, str], words: str) -> None:
    baseline = _baseline_doc(tmp_path)
    run = json.loads((make_run(tmp_path / "run", **run_identity) / "run.json").read_text())
    with pytest.raises(BaselineMismatchError, match=words):
        ensure_matches(baseline, Path("baselines/x.json"), run, "results/r")
    same = json.loads((make_run(tmp_path / "same") / "run.json").read_text())
    ensure_matches(baseline, Path("baselines/x.json"), same, "results/r")   # no error


def test_provenance_records_whether_the_run_was_complete(tmp_path: Path) -> None:
    complete = json.loads((make_run(tmp_path / "c") / "run.json").read_text())
    assert baseline_from_run(complete, tmp_path / "c")["provenance"]["run_complete"] is True
    partial = json.loads((make_run(tmp_path / "p", complete=False) / "run.json").read_text())
    prov = baseline_from_run(partial, tmp_path / "p", forced_reasons=["run is incomplete"])[
        "provenance"]
    assert prov["run_complete"] is False
    assert prov["forced"] is True and prov["forced_reasons"] == ["run is incomplete"]


# Baselines with per-question outcomes, the command line, and the old -> new printout.

def _baseline_with_outcomes(tmp_path: Path, outcomes: object, n: int = 4,
                            correct: int = 2) -> Path:
    run = json.loads((make_run(tmp_path / "run") / "run.json").read_text())
    doc = baseline_from_run(run, tmp_path / "run")
    doc["accuracy"] = {"on": {"n": n, "correct": correct, "accuracy": correct / n,
                              "outcomes": outcomes}}
    path = tmp_path / "bl.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(("outcomes", "words"), [
    ([1, 0], "accuracy.on.outcomes must be an object with ids and correct"),
    ({"ids": [1, 2, 3], "correct": "1100"}, "accuracy.on.outcomes.ids must be 4 unique integer "
                                            "question ids, got '3 ids'"),
    ({"ids": "1234", "correct": "1100"}, "accuracy.on.outcomes.ids must be 4 unique integer "
                                         "question ids, got '1234'"),
    ({"ids": [1, 2, 3, 3], "correct": "1100"}, "outcomes.ids must be 4 unique"),
    ({"ids": [1, 2, 3, True], "correct": "1100"}, "outcomes.ids must be 4 unique"),
    ({"ids": [1, 2, 3, "4"], "correct": "1100"}, "outcomes.ids must be 4 unique"),
    ({"ids": [1, 2, 3, 4], "correct": "110"}, "accuracy.on.outcomes.correct must be a string "
                                              "of 4 '0'/'1' characters, got '110'"),
    ({"ids": [1, 2, 3, 4], "correct": "11x0"}, "outcomes.correct must be a string of 4"),
    ({"ids": [1, 2, 3, 4], "correct": 1100}, "outcomes.correct must be a string of 4"),
    ({"ids": [1, 2, 3, 4], "correct": "1110"}, "accuracy.on.outcomes.correct must be 2 ones "
                                               "(accuracy correct), got 3"),
])
def test_stored_outcomes_are_validated_naming_the_field(tmp_path: Path, outcomes: object,
                                                        words: str) -> None:
    from servegate.judge.baselines import BaselineError, load_baseline

    path = _baseline_with_outcomes(tmp_path, outcomes)
    with pytest.raises(BaselineError) as info:
        load_baseline(path)
    assert str(info.value).startswith(f"{path}: ") and words in str(info.value)


def test_valid_outcomes_load_and_decode(tmp_path: Path) -> None:
    from servegate.judge.baselines import decode_outcomes, load_baseline

    path = _baseline_with_outcomes(tmp_path, {"ids": [7, 3, 11, 5], "correct": "1010"})
    entry = load_baseline(path)["accuracy"]["on"]
    assert decode_outcomes(entry["outcomes"]) == {7: True, 3: False, 11: True, 5: False}
    with pytest.raises(ValueError):
        decode_outcomes({"ids": [1, 2], "correct": "1"})


@pytest.mark.parametrize("starts", [[0, -1], [0, True], [0, "0"], [0, 1.0]])
def test_a_blocks_start_indexes_are_integers_from_zero(starts: list[Any]) -> None:
    doc = _set(_set(_valid(), f"{M}/n_blocks", 2), f"{M}/blocks", [10.0, 12.0])
    validate_baseline(_set(doc, f"{M}/starts", [0, 2]), PATH)     # a start may have no block
    validate_baseline(_set(doc, f"{M}/starts", [1, 1]), PATH)     # or several
    with pytest.raises(BaselineError) as info:
        validate_baseline(_set(doc, f"{M}/starts", starts), PATH)
    assert str(info.value) == (f"{PATH}: points[0].metrics.mean_ttft_ms.starts must be a list "
                               f"of 2 start indexes (the start of each block), got {starts!r}")



def test_an_in_server_baseline_keeps_its_design_and_each_values_start(tmp_path: Path) -> None:
    run_dir = write_block_run(tmp_path / "run", starts=2, blocks=3, concurrencies=(4,))
    run = json.loads((run_dir / "run.json").read_text())
    run["design"]["start_seconds"] = [30.0, 31.0]          # the run's cost: not the reference's
    doc = bl.baseline_from_run(run, run_dir)
    assert doc["design"] == {"in_server": True, "starts": 2, "blocks": 3, "unit": "block"}
    entry = doc["points"][0]["metrics"]["mean_ttft_ms"]
    assert entry["n_blocks"] == 6 and entry["starts"] == [0, 0, 0, 1, 1, 1]
    values = [p["metrics"]["mean_ttft_ms"] for p in sorted(
        (p for p in run["points"] if p["mode"] == "off"), key=lambda p: (p["start"], p["block"]))]
    assert entry["blocks"] == [round(v, 6) for v in values]     # in (start, block) order
    legacy = bl.baseline_from_run(load_run(make_run(tmp_path / "legacy", repeats=3)),
                                  tmp_path / "legacy")
    assert "design" not in legacy
    assert legacy["points"][0]["metrics"]["mean_ttft_ms"]["starts"] == [0, 1, 2]


def test_the_request_sample_is_seeded_zero_by_default(tmp_path: Path) -> None:
    run = load_run(make_run(tmp_path / "run", n_requests=60))
    sampled = bl.baseline_from_run(run, tmp_path / "run", request_cap=10)
    assert sampled["points"] == bl.baseline_from_run(run, tmp_path / "run", request_cap=10,
                                                     seed=0)["points"]
    assert sampled["points"] != bl.baseline_from_run(run, tmp_path / "run", request_cap=10,
                                                     seed=1)["points"]


def test_every_identity_mismatch_is_listed(tmp_path: Path) -> None:
    path, doc = _stored(tmp_path)
    other = load_run(make_run(tmp_path / "gpu", runner_class="mi355x", model_profile="glm-5.2"))
    with pytest.raises(bl.BaselineMismatchError) as err:
        bl.ensure_matches(doc, path, other, "results/gpu-run")
    assert str(err.value) == (
        "baseline does not belong to this run: "
        f"runner_class 'cpu' (baseline {path}) vs 'mi355x' (run results/gpu-run); "
        f"model_profile 'smollm2-135m' (baseline {path}) vs 'glm-5.2' (run results/gpu-run)")


def test_a_file_of_a_newer_schema_names_file_and_version(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(bl.BaselineError) as err:
        bl.load_baseline(path)
    assert str(path) in str(err.value) and "99" in str(err.value)
    with pytest.raises(bl.BaselineError) as err:
        bl.write_baseline(tmp_path / "new.json", {"schema_version": 99})
    assert str(err.value).startswith(f"{tmp_path / 'new.json'}: schema_version")


def test_text_is_written_as_text_not_escapes() -> None:
    assert '"source_run": "résultats/nuit-7"' in bl.dumps_baseline(
        {"provenance": {"source_run": "résultats/nuit-7"}})


# Schema 2 -> 3 (issue 30: blocks named as blocks). A v2 file kept every block's value under the
# metric's ``repeats`` (``n_repeats``) and the repeat numbers (and, in-server, each block's start)
# on the point; v3 keeps ``blocks`` with the ``starts`` they ran in on every metric. The v2
# documents below are written out by hand, as servegate wrote them before the bump.


def _v2(points: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"schema_version": 2, "runner_class": "mi300x", "model_profile": "glm",
            "suite": "nightly", "chunk_size": 16384, "page_size": 64,
            "provenance": {"created_at": "2026-11-30T00:00:00+00:00", "source_run": "results/x"},
            "points": points, "accuracy": {}, **extra}


def _v2_metric(values: list[float], **extra: Any) -> dict[str, Any]:
    mean = sum(values) / len(values)
    return {"value": mean, "spread": None, "cv": None, "n_repeats": len(values),
            "repeats": values, **extra}


def _written(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "baselines" / "mi300x" / "glm" / "nightly.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def test_a_v2_in_server_baseline_reads_as_blocks_with_their_starts(tmp_path: Path) -> None:
    design = {"in_server": True, "starts": 2, "blocks": 3, "unit": "block"}
    point = {"mode": "off", "concurrency": 4, "repeats": [0, 1, 2, 3, 4, 5],
             "starts": [0, 0, 0, 1, 1, 1],
             "metrics": {"mean_ttft_ms": _v2_metric([1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                                                    starts=[0, 0, 0, 1, 1, 1]),
                         # a block lacked this metric: its own starts, not the point's
                         "median_tpot_ms": _v2_metric([1.0, 2.0, 4.0, 5.0, 6.0],
                                                      starts=[0, 0, 1, 1, 1])},
             "requests": {"ttft_ms": [1.5]}}
    path = _written(tmp_path, _v2([point], design=design))
    doc, found = bl.read_baseline(path)
    assert found == 2 and doc["schema_version"] == 3 and doc["design"] == design
    [upgraded] = doc["points"]
    assert set(upgraded) == {"mode", "concurrency", "metrics", "requests"}
    assert upgraded["requests"] == {"ttft_ms": [1.5]}
    assert upgraded["metrics"]["mean_ttft_ms"] == {
        "value": 3.5, "spread": None, "cv": None, "n_blocks": 6,
        "blocks": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "starts": [0, 0, 0, 1, 1, 1]}
    tpot = upgraded["metrics"]["median_tpot_ms"]
    assert (tpot["n_blocks"], tpot["blocks"], tpot["starts"]) == (
        5, [1.0, 2.0, 4.0, 5.0, 6.0], [0, 0, 1, 1, 1])


@pytest.mark.parametrize(("repeats", "starts"), [([0, 1, 2], [0, 1, 2]), ([3, 5, 7], [3, 5, 7])])
def test_a_v2_baseline_from_before_blocks_has_each_repeat_as_its_own_start(
        tmp_path: Path, repeats: list[int], starts: list[int]) -> None:
    point = {"mode": "on", "concurrency": 2, "repeats": repeats,
             "metrics": {"mean_ttft_ms": _v2_metric([7.0, 8.0, 9.0])}}
    doc = bl.load_baseline(_written(tmp_path, _v2([point])))
    assert "design" not in doc
    entry = doc["points"][0]["metrics"]["mean_ttft_ms"]
    assert (entry["n_blocks"], entry["blocks"], entry["starts"]) == (3, [7.0, 8.0, 9.0], starts)
    assert "repeats" not in doc["points"][0] and "n_repeats" not in entry


def test_a_v2_metric_missing_from_a_repeat_counts_its_values_in_order(tmp_path: Path) -> None:
    """A value without a start of its own: the point's starts, else its repeat numbers, where
    they count the metric's values; else one start per value, in order."""
    point = {"mode": "on", "concurrency": 2, "repeats": [4, 5, 6], "starts": [0, 0],
             "metrics": {"mean_ttft_ms": _v2_metric([1.0, 2.0, 3.0]),      # repeats match
                         "median_tpot_ms": _v2_metric([1.0, 2.0])},        # the starts match
             }
    lone = {"mode": "off", "concurrency": 2, "repeats": [4, 5, 6],
            "metrics": {"mean_ttft_ms": _v2_metric([1.0, 2.0])}}           # neither matches
    doc = bl.load_baseline(_written(tmp_path, _v2([point, lone])))
    on, off = doc["points"]
    assert on["metrics"]["mean_ttft_ms"]["starts"] == [4, 5, 6]
    assert on["metrics"]["median_tpot_ms"]["starts"] == [0, 0]
    assert off["metrics"]["mean_ttft_ms"]["starts"] == [0, 1]


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda m, p: m.__setitem__("n_repeats", 2),
     "points[0].metrics.mean_ttft_ms.blocks must be a list of 2 numbers (one per block), "
     "got [7.0, 8.0, 9.0]"),
    (lambda m, p: m.pop("n_repeats"),
     "points[0].metrics.mean_ttft_ms.n_blocks must be an integer >= 1, got None"),
    (lambda m, p: m.pop("repeats"),
     "points[0].metrics.mean_ttft_ms.blocks must be a list of 3 numbers (one per block), "
     "got None"),
    (lambda m, p: m.__setitem__("starts", ["a", 0, 0]),
     "points[0].metrics.mean_ttft_ms.starts must be a list of 3 start indexes (the start of "
     "each block), got ['a', 0, 0]"),
    (lambda m, p: p.__setitem__("repeats", [0, True, 2]),    # coerced never: True is no start
     "points[0].metrics.mean_ttft_ms.starts must be a list of 3 start indexes (the start of "
     "each block), got [0, True, 2]"),
    (lambda m, p: p.__setitem__("repeats", [{"ttft_ms": [9.0]}] * 3),
     "points[0].metrics.mean_ttft_ms.starts must be a list of 3 start indexes (the start of "
     "each block), got [{'ttft_ms': [9.0]}, {'ttft_ms': [9.0]}, {'ttft_ms': [9.0]}]"),
    (lambda m, p: p["metrics"].__setitem__("mean_ttft_ms", 1.0),
     "points[0].metrics.mean_ttft_ms must be an object, got 1.0"),
    (lambda m, p: p.__setitem__("metrics", []), "points[0].metrics must be an object, got []"),
])
def test_a_malformed_v2_baseline_names_the_upgraded_field(tmp_path: Path, mutate: Any,
                                                          message: str) -> None:
    """The upgrade renames and never coerces: a v2 file that was wrong stays wrong, and the
    error names the file and the schema-3 field (never a crash inside the upgrade)."""
    point = {"mode": "on", "concurrency": 2, "repeats": [0, 1, 2],
             "metrics": {"mean_ttft_ms": _v2_metric([7.0, 8.0, 9.0])}}
    mutate(point["metrics"]["mean_ttft_ms"], point)
    path = _written(tmp_path, _v2([point]))
    with pytest.raises(BaselineError) as info:
        bl.load_baseline(path)
    assert str(info.value) == f"{path}: {message}"


@pytest.mark.parametrize("points", [{}, [5], "x"])
def test_a_v2_baseline_whose_points_are_not_objects_is_named_not_a_crash(
        tmp_path: Path, points: Any) -> None:
    path = _written(tmp_path, _v2(points))
    with pytest.raises(BaselineError, match=r"points(\[0\])? must be"):
        bl.load_baseline(path)


def test_upgrade_baseline_reads_an_in_memory_document_of_any_known_schema(
        tmp_path: Path) -> None:
    point = {"mode": "on", "concurrency": 2, "repeats": [0, 1],
             "metrics": {"mean_ttft_ms": _v2_metric([7.0, 8.0])}}
    old = _v2([point])
    before = copy.deepcopy(old)
    doc = bl.upgrade_baseline(old, PATH)
    assert old == before                                   # the caller's document untouched
    assert doc["schema_version"] == 3
    assert doc["points"][0]["metrics"]["mean_ttft_ms"]["blocks"] == [7.0, 8.0]
    current = _valid()
    assert bl.upgrade_baseline(current, PATH) == _valid()   # current: validated as it is
    with pytest.raises(BaselineError, match=r"schema_version 4 is newer"):
        bl.upgrade_baseline({**_valid(), "schema_version": 4}, PATH)
    broken = _set(_valid(), f"{M}/blocks", [1.0, 2.0])
    with pytest.raises(BaselineError, match=r"mean_ttft_ms\.blocks must be a list of 1"):
        bl.upgrade_baseline(broken, PATH)


def test_a_v2_baseline_judges_like_the_v3_baseline_of_the_same_run(tmp_path: Path) -> None:
    """The same run stored at schema 3 and as its v2 file: the judge reads the same blocks."""
    from servegate.judge.evidence import evidence_from_baseline

    run_dir = write_block_run(tmp_path / "run", starts=2, blocks=3, concurrencies=(4,))
    v3 = bl.baseline_from_run(load_run(run_dir), run_dir)
    v2 = copy.deepcopy(v3)
    v2["schema_version"] = 2
    for point in v2["points"]:
        entries = list(point["metrics"].values())
        point["repeats"] = list(range(len(entries[0]["blocks"])))
        point["starts"] = list(entries[0]["starts"])
        for entry in entries:
            entry["repeats"], entry["n_repeats"] = entry.pop("blocks"), entry.pop("n_blocks")
    upgraded = bl.upgrade_baseline(v2, PATH)
    assert upgraded["points"] == v3["points"]
    old, new = evidence_from_baseline(upgraded), evidence_from_baseline(v3)
    assert old.slots("", "off", 4, "mean_ttft_ms") == new.slots("", "off", 4, "mean_ttft_ms")
    assert len(new.slots("", "off", 4, "mean_ttft_ms")) == 6
