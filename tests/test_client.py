"""sglang.benchmark.serving: the exact client argv, and its JSONL parsed or rejected clearly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servegate.measure.client import ClientError, ClientPoint, client_argv, parse_client_jsonl


def _point(tmp_path: Path) -> ClientPoint:
    return ClientPoint(base_url="http://127.0.0.1:3000", model="/m", tokenizer="/m",
                       input_len=300, output_len=16, num_prompts=8, concurrency=4, seed=7,
                       warmup_requests=1, output_file=tmp_path / "c.jsonl")


def test_client_argv_exact(tmp_path: Path) -> None:
    assert client_argv("/py", _point(tmp_path)) == [
        "/py", "-m", "sglang.benchmark.serving", "--backend", "sglang",
        "--base-url", "http://127.0.0.1:3000", "--model", "/m", "--tokenizer", "/m",
        "--dataset-name", "random-ids", "--tokenize-prompt", "--random-range-ratio", "1",
        "--random-input-len", "300", "--random-output-len", "16", "--num-prompts", "8",
        "--max-concurrency", "4", "--seed", "7", "--warmup-requests", "1", "--flush-cache",
        "--output-file", str(tmp_path / "c.jsonl"), "--output-details", "--disable-tqdm"]


def _record(**override: object) -> dict[str, object]:
    record: dict[str, object] = {
        "completed": 2, "duration": 3.5, "output_throughput": 9.1, "request_throughput": 0.6,
        "ttfts": [0.5, 0.7], "itls": [[0.1, 0.1, 0.2], [0.1]], "input_lens": [300, 300],
        "output_lens": [4, 2], "errors": ["", ""], "generated_texts": ["a", "b"],
    }
    for stat in ("mean", "median", "std", "p90", "p95", "p99"):
        for metric in ("ttft", "tpot", "itl", "e2e_latency"):
            record[f"{stat}_{metric}_ms"] = 1.0
    record.update(override)
    return record


def test_parse_summary_and_requests(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(_record(completed=1, ttfts=[9.0])) + "\n" +
                    json.dumps(_record()) + "\n")          # appended: the last record counts
    metrics, requests = parse_client_jsonl(path, expect_prompts=2)
    assert metrics["completed"] == 2 and metrics["median_ttft_ms"] == 1.0
    assert len([k for k in metrics if k.endswith("_ms")]) == 24
    assert requests["ttft_ms"] == [500.0, 700.0]
    assert requests["e2e_latency_ms"] == pytest.approx([900.0, 800.0])
    assert requests["tpot_ms"] == pytest.approx([400.0 / 3, 100.0])
    assert requests["output_lens"] == [4, 2]


@pytest.mark.parametrize(("content", "message"), [
    (None, "wrote no output file"),
    ("", "empty"),
    ("not json\n", "last line is not JSON"),
    ("[1, 2]\n", "expected a JSON object"),
    (json.dumps(_record(median_ttft_ms="fast")), "non-numeric 'median_ttft_ms'"),
    (json.dumps(_record(completed=0, errors=["Connection refused", ""])),
     "0 requests completed; errors: Connection refused"),
    (json.dumps(_record(completed=1)), "1 of 2 requests completed"),
    (json.dumps({k: v for k, v in _record().items() if k != "itls"}),
     r"per-request details missing \(itls\)"),
    (json.dumps(_record(ttfts=[0.5])), "differ in length"),
])
def test_garbage_output_is_a_clear_error(tmp_path: Path, content: str | None,
                                         message: str) -> None:
    path = tmp_path / "c.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ClientError, match=message):
        parse_client_jsonl(path, expect_prompts=2)
