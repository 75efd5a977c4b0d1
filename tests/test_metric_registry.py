"""One metric registry: a new per-request metric is one registration (plus the client mapping),
and is then measured, judged, stored in a baseline and plotted without touching any other code."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from judge_runs import make_run

from servegate import metrics
from servegate.judge import update
from servegate.judge.baselines import baseline_path, load_baseline
from servegate.judge.evaluate import judge
from servegate.measure.client import parse_client_jsonl
from servegate.report import write_reports
from servegate.results import load_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def decode_metric() -> Iterator[str]:
    """Decode time per request (latency - TTFT), a quantity servegate does not ship."""
    metrics.register_quantity(metrics.Quantity(
        "decode_ms", "ms", "lower", "decode time",
        lambda r: (r.latency_s - r.ttft_s) * 1000.0))
    yield "mean_decode_ms"
    metrics.unregister("decode_ms")
    assert "mean_decode_ms" not in metrics.METRICS


def _through_the_client(run_dir: Path, tmp: Path) -> None:
    """Re-derive every point's metrics and samples through the real client parser, from a
    client record built like sglang's (TTFTs and inter-token latencies in seconds)."""
    path = run_dir / "run.json"
    run = json.loads(path.read_text())
    for index, point in enumerate(run["points"]):
        req = point["requests"]
        n_out = req["output_lens"]
        ttfts = [t / 1000.0 for t in req["ttft_ms"]]
        itls = [[(e - t) / 1000.0 / (n - 1)] * (n - 1)
                for t, e, n in zip(req["ttft_ms"], req["e2e_latency_ms"], n_out, strict=True)]
        record = {"completed": len(ttfts), "duration": 1.0, "median_ttft_ms": 1.0,
                  "median_tpot_ms": 1.0, "ttfts": ttfts, "itls": itls,
                  "input_lens": req["input_lens"], "output_lens": n_out,
                  "errors": [""] * len(ttfts)}
        jsonl = tmp / f"client-{index}.jsonl"
        jsonl.write_text(json.dumps(record) + "\n")
        parsed, requests = parse_client_jsonl(jsonl, expect_prompts=len(ttfts))
        point["metrics"] = {**point["metrics"], "mean_decode_ms": parsed["mean_decode_ms"]}
        point["requests"] = {**point["requests"], "decode_ms": requests["decode_ms"]}
    path.write_text(json.dumps(run))


def test_client_mapping_computes_what_the_client_does_not_report(decode_metric: str,
                                                                  tmp_path: Path) -> None:
    record = {"completed": 2, "duration": 1.0, "median_ttft_ms": 500.0, "median_tpot_ms": 9.0,
              "ttfts": [0.5, 0.7], "itls": [[0.1, 0.1, 0.2], [0.3]], "input_lens": [9, 9],
              "output_lens": [4, 2], "errors": ["", ""]}
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(record) + "\n")
    parsed, requests = parse_client_jsonl(path, expect_prompts=2)
    assert requests["decode_ms"] == pytest.approx([400.0, 300.0])
    assert parsed[decode_metric] == pytest.approx(350.0)
    assert parsed["p99_decode_ms"] == pytest.approx(np.percentile([400.0, 300.0], 99))
    assert parsed["median_ttft_ms"] == 500.0      # reported by the client: taken as is


def test_new_metric_is_judged_stored_and_plotted(decode_metric: str, tmp_path: Path) -> None:
    table = {"floors": {decode_metric: 0.05, "mean_ttft_ms": 0.05}}
    reference = make_run(tmp_path / "ref", modes=("off", "on"), seed=1)
    slower = make_run(tmp_path / "cur", modes=("off", "on"), seed=2,
                      effect=lambda mode, conc: 1.4)
    for run_dir in (reference, slower):
        _through_the_client(run_dir, tmp_path)
        run = json.loads((run_dir / "run.json").read_text())
        run["judge_table"] = table
        (run_dir / "run.json").write_text(json.dumps(run))
    root = tmp_path / "baselines"
    assert update.update(reference, root=root) == 0
    stored = load_baseline(baseline_path("cpu", "smollm2-135m", "synthetic", root))
    for point in stored["points"]:
        assert decode_metric in point["metrics"]
        assert len(point["requests"]["decode_ms"]) == 60
    judgement = judge(slower, baselines_root=root)
    decode_checks = [c for c in judgement.checks
                     if c.metric == decode_metric and c.kind == "baseline"]
    assert len(decode_checks) == len(load_run(slower)["points"])
    assert {c.verdict for c in decode_checks} == {"regression"}      # 40 % slower
    assert all(c.interval is not None and c.interval.estimate > 1.3 for c in decode_checks)
    written = {p.relative_to(slower).as_posix() for p in write_reports(judgement)}
    plot = slower / "plots" / f"{decode_metric}_vs_concurrency.png"
    assert plot.relative_to(slower).as_posix() in written
    assert plot.read_bytes()[:8] == PNG_MAGIC
