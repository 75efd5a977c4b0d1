"""servegate.core.metrics: the one metric registry (registration, lookup, directions, statistics,
per-request samples). Expected values are written out by hand."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from judge_runs import make_run

from servegate.commands import update_baselines as update
from servegate.core import metrics
from servegate.core.results import load_run
from servegate.judge.baselines import baseline_path, load_baseline
from servegate.judge.evaluate import judge
from servegate.measure.client import parse_client_jsonl
from servegate.report import write_reports


@pytest.fixture(autouse=True)
def registry_restored() -> Iterator[None]:
    """Every test leaves the registry as it found it (registration has no undo: only tests need one).
    Restored in place: other modules hold the registry's dicts themselves."""
    saved = dict(metrics.METRICS), dict(metrics.QUANTITIES)
    yield
    for registry, before in zip((metrics.METRICS, metrics.QUANTITIES), saved, strict=True):
        registry.clear()
        registry.update(before)


@pytest.fixture
def latency_quantity() -> object:
    quantity = metrics.Quantity("queue_ms", "ms", "lower", "queue wait",
                                lambda r: r.ttft_s * 2.0)
    metrics.register_quantity(quantity, client_prefix="queue_wait_ms")
    return quantity


@pytest.mark.usefixtures("latency_quantity")
def test_register_quantity_registers_its_statistics_with_the_client_stem() -> None:
    registered = metrics.METRICS["p99_queue_ms"]
    assert registered == metrics.Metric(
        name="p99_queue_ms", direction="lower", unit="ms", label="p99 queue wait",
        client_key="p99_queue_wait_ms", quantity="queue_ms", statistic="p99")
    assert {f"{s}_queue_ms" for s in metrics.STATISTICS} <= set(metrics.METRICS)


def test_register_quantity_without_prefix_uses_its_name() -> None:
    metrics.register_quantity(metrics.Quantity("wait_ms", "s", "higher", "wait",
                                               lambda r: None))
    assert metrics.METRICS["mean_wait_ms"].client_key == "mean_wait_ms"
    assert metrics.METRICS["mean_wait_ms"].direction == "higher"
    assert metrics.METRICS["mean_wait_ms"].unit == "s"


def test_register_metric_registers_a_summary_only_metric() -> None:
    peak = metrics.Metric("peak_x", "higher", "tok/s", "peak x", "peak_x")
    metrics.register_metric(peak)
    assert metrics.metric("peak_x") is peak
    assert metrics.direction("peak_x") == "higher"
    assert "peak_x" not in metrics.QUANTITIES


def test_unknown_metric_lists_the_known_ones() -> None:
    with pytest.raises(ValueError) as info:
        metrics.metric("fastness")
    message = str(info.value)
    assert message.startswith("metric 'fastness': not registered (known: ")
    assert "input_throughput, max_output_tokens_per_s, mean_e2e_latency_ms, " in message
    assert message.endswith("total_throughput)")


def test_accuracy_names_are_higher_is_better_without_registration() -> None:
    assert metrics.direction("accuracy") == "higher"
    assert metrics.direction("gsm8k_accuracy") == "higher"
    assert metrics.direction("median_ttft_ms") == "lower"


def test_statistics_are_over_the_last_axis() -> None:
    cube = np.arange(24, dtype=float).reshape(2, 3, 4)
    for stat, reference in (("mean", np.mean), ("median", np.median), ("std", np.std)):
        assert metrics.statistic_fn(stat)(cube).shape == (2, 3)
        assert np.allclose(metrics.statistic_fn(stat)(cube), reference(cube, axis=2))
    assert np.allclose(metrics.statistic_fn("p50")(cube), np.median(cube, axis=2))
    assert metrics.summarise([1, 2, 3, 10], "p50") == 2.5
    assert metrics.summarise([2, 4], "std") == 1.0


@pytest.mark.parametrize("bad", ["p0", "p100", "p101", "x50", "q50", "max"])
def test_unknown_statistic_is_an_error(bad: str) -> None:
    with pytest.raises(ValueError) as info:
        metrics.statistic_fn(bad)
    assert str(info.value) == f"statistic {bad!r}: expected mean, median, std or p<q>"


def test_fractional_percentiles_in_range_are_fine() -> None:
    assert metrics.summarise([0.0, 10.0], "p0.5") == pytest.approx(0.05)
    assert metrics.summarise([0.0, 10.0], "p99.9") == pytest.approx(9.99)


def test_undefined_and_infinite_samples_are_dropped() -> None:
    one_token = metrics.RequestSample(ttft_s=0.5, itl_s=[], input_len=10, output_len=1)
    two = metrics.RequestSample(ttft_s=0.5, itl_s=[0.1], input_len=10, output_len=2)
    inf = metrics.RequestSample(ttft_s=math.inf, itl_s=[0.1], input_len=10, output_len=2)
    out = metrics.per_request_samples([one_token, two, inf])
    assert out["tpot_ms"] == pytest.approx([100.0])            # 1 output token: no TPOT
    assert out["ttft_ms"] == [500.0, 500.0]
    assert out["e2e_latency_ms"] == pytest.approx([500.0, 600.0])


# One metric registry: a new per-request metric is one registration (plus the client mapping),
# and is then measured, judged, stored in a baseline and plotted without touching any other code.


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def decode_metric() -> str:
    """Decode time per request (latency - TTFT), a quantity servegate does not ship."""
    metrics.register_quantity(metrics.Quantity(
        "decode_ms", "ms", "lower", "decode time",
        lambda r: (r.latency_s - r.ttft_s) * 1000.0))
    return "mean_decode_ms"


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
