"""servegate.measure.client: sglang's load client per point, its argv, its JSONL records and its
failures (exit codes, timeouts, errors quoted, missing details named)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from fault_helpers import FAKE_CLIENT
from sglang_outputs import client_record

from servegate.measure.client import ClientError, ClientPoint, client_argv, parse_client_jsonl

# The load client's process handling (a stand-in child: a short python program).

def _client(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_failed_and_empty_requests_are_skipped_not_the_rest(tmp_path: Path) -> None:
    from servegate.measure.client import parse_client_jsonl

    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(client_record(ttfts=[0.5, 0.6, None, 0.7, 0.8],
                                       itls=[[0.1], [0.1], [], [0.2], [0.3]],
                                       input_lens=[300, 301, 302, 303, 304],
                                       output_lens=[2, 2, 2, 2, 2],
                                       errors=["", "timeout", "", "", ""], completed=5)))
    _, requests = parse_client_jsonl(path)
    assert requests["input_lens"] == [300, 303, 304]          # after a skipped one: go on
    assert requests["ttft_ms"] == [500.0, 700.0, 800.0]
    path.write_text(json.dumps(client_record()))
    _, requests = parse_client_jsonl(path)
    assert requests["input_lens"] == [300, 302]               # a zero TTFT is not a sample


def test_client_errors_quoted_three_at_most_and_cut(tmp_path: Path) -> None:
    from servegate.measure.client import ClientError, parse_client_jsonl

    path = tmp_path / "c.jsonl"
    errors = ["e1", "x" * 300, "", "e3", "e4"]
    path.write_text(json.dumps(client_record(completed=0, errors=errors, ttfts=[0.1] * 5,
                                       itls=[[]] * 5, input_lens=[1] * 5, output_lens=[1] * 5)))
    with pytest.raises(ClientError) as info:
        parse_client_jsonl(path)
    assert str(info.value) == f"{path}: 0 requests completed; errors: e1; {'x' * 200}; e3"
    path.write_text(json.dumps(client_record(completed=0, errors=["", "", ""])))
    with pytest.raises(ClientError, match=r"errors: none reported$"):
        parse_client_jsonl(path)


def test_missing_details_are_all_named(tmp_path: Path) -> None:
    from servegate.measure.client import ClientError, parse_client_jsonl

    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({k: v for k, v in client_record().items()
                                if k not in ("itls", "errors")}))
    with pytest.raises(ClientError, match=r"details missing \(itls, errors\); was "
                                          r"--output-details passed\?"):
        parse_client_jsonl(path)


# Faults at the load-client boundary: the client writes nothing, crashes, or hangs (stopped
# when the server dies, or at its timeout), with ``FAKE_CLIENT`` as the named test double.
#
# No server needed. A client that writes garbage during a real run is the ``e2e`` case
# ``test_port_in_use_is_retried_then_a_garbage_client_fails_and_secret_stays_out`` in
# ``test_faults_bench.py``.


# --------------------------------------------------------------------------- client boundary

def _fake_client(tmp_path: Path, what: str) -> tuple[list[str], Path]:
    script = tmp_path / "fake_client.py"
    script.write_text(FAKE_CLIENT)
    out = tmp_path / "client" / "point.jsonl"
    out.parent.mkdir(exist_ok=True)
    return [sys.executable, str(script), str(out), what], out


# sglang.benchmark.serving: the exact client argv, and its JSONL parsed or rejected clearly.


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


def _fullclient_record(**override: object) -> dict[str, object]:
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
    path.write_text(json.dumps(_fullclient_record(completed=1, ttfts=[9.0])) + "\n" +
                    json.dumps(_fullclient_record()) + "\n")          # appended: the last record counts
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
    (json.dumps(_fullclient_record(median_ttft_ms="fast")), "non-numeric 'median_ttft_ms'"),
    (json.dumps(_fullclient_record(completed=0, errors=["Connection refused", ""])),
     "0 requests completed; errors: Connection refused"),
    (json.dumps(_fullclient_record(completed=1)), "1 of 2 requests completed"),
    (json.dumps({k: v for k, v in _fullclient_record().items() if k != "itls"}),
     r"per-request details missing \(itls\)"),
    (json.dumps(_fullclient_record(ttfts=[0.5])), "differ in length"),
])
def test_garbage_output_is_a_clear_error(tmp_path: Path, content: str | None,
                                         message: str) -> None:
    path = tmp_path / "c.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ClientError, match=message):
        parse_client_jsonl(path, expect_prompts=2)


# servegate preflight without sglang: suite discovery, bad input (exit 2, naming file and key),
# and the client's --random-range-ratio from the suite's [load].range_ratio.


def _point_with_range_ratio(tmp_path: Path, ratio: float) -> ClientPoint:
    return ClientPoint(base_url="http://127.0.0.1:3000", model="/m", tokenizer="/m",
                       input_len=300, output_len=16, num_prompts=8, concurrency=4, seed=7,
                       warmup_requests=1, output_file=tmp_path / "c.jsonl", range_ratio=ratio)


@pytest.mark.parametrize(("ratio", "shown"), [(1.0, "1"), (0.5, "0.5"), (0.0, "0"), (0.25, "0.25")])
def test_client_gets_the_suites_range_ratio(tmp_path: Path, ratio: float, shown: str) -> None:
    argv = client_argv("/py", _point_with_range_ratio(tmp_path, ratio))
    assert argv[argv.index("--random-range-ratio") + 1] == shown
    assert argv.count("--random-range-ratio") == 1
