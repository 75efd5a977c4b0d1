"""Baseline files: round trip, stable order, provenance, identity errors, atomic writes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from judge_runs import make_run

from servegate.judge import baselines as bl
from servegate.results import load_run


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
    point = bl.baseline_point(loaded, "on", 4)
    entry = point["metrics"]["mean_ttft_ms"]
    run = load_run(tmp_path / "run")
    values = [p["metrics"]["mean_ttft_ms"] for p in run["points"]
              if p["mode"] == "on" and p["concurrency"] == 4]
    assert entry["n_repeats"] == 2
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
    assert '"repeats": [' in text and '"ttft_ms": [' in text
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
    (lambda d: d["points"][2]["metrics"]["median_tpot_ms"]["repeats"].pop(),
     "points[2].metrics.median_tpot_ms.repeats"),
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
