"""Run sglang's own load client (``python -m sglang.benchmark.serving``) for one point and parse
its JSONL. No hand-written load generator: the numbers are the ones SGLang's CI reports.
``random-ids`` prompts need no download; ``--flush-cache`` avoids prefix reuse and leaves the
marker the server-log parser cuts at."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servegate.config.suites import CLIENT_DATASET
from servegate.core.errors import ServegateError
from servegate.core.metrics import METRICS, RequestSample, per_request_samples, summarise
from servegate.core.results import Requests

# Counters kept beside the registered metrics (servegate.core.metrics), never judged.
COUNTER_KEYS = ("completed", "duration", "total_input_tokens", "total_output_tokens",
                "concurrency")
REQUIRED_KEYS = ("completed", "duration", "median_ttft_ms", "median_tpot_ms")


class ClientError(ServegateError, RuntimeError):
    """The client failed or wrote unusable output; the message names the file and the problem."""


@dataclass(frozen=True)
class ClientPoint:
    base_url: str
    model: str
    tokenizer: str
    input_len: int
    output_len: int
    num_prompts: int
    concurrency: int
    seed: int
    warmup_requests: int
    output_file: Path
    range_ratio: float = 1.0            # --random-range-ratio (the suite's [load].range_ratio)


def _ratio(value: float) -> str:
    """1.0 -> "1" (the argv the CPU suites always had), 0.5 -> "0.5"."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def client_argv(python: str, point: ClientPoint) -> list[str]:
    return [
        python, "-m", "sglang.benchmark.serving",
        "--backend", "sglang",
        "--base-url", point.base_url,
        "--model", point.model,
        "--tokenizer", point.tokenizer,
        "--dataset-name", CLIENT_DATASET,
        "--tokenize-prompt",
        "--random-range-ratio", _ratio(point.range_ratio),
        "--random-input-len", str(point.input_len),
        "--random-output-len", str(point.output_len),
        "--num-prompts", str(point.num_prompts),
        "--max-concurrency", str(point.concurrency),
        "--seed", str(point.seed),
        "--warmup-requests", str(point.warmup_requests),
        "--flush-cache",
        "--output-file", str(point.output_file),
        "--output-details",
        "--disable-tqdm",
    ]


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def parse_client_jsonl(path: Path, expect_prompts: int | None = None
                       ) -> tuple[dict[str, float], Requests]:
    """Summary metrics and per-request samples from the client's (last) JSONL record."""
    if not path.is_file():
        raise ClientError(f"{path}: the load client wrote no output file")
    lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    if not lines:
        raise ClientError(f"{path}: empty (the load client produced no result record)")
    try:
        record = json.loads(lines[-1])
    except json.JSONDecodeError as err:
        raise ClientError(f"{path}: last line is not JSON ({err})") from err
    if not isinstance(record, dict):
        raise ClientError(f"{path}: expected a JSON object per line")
    for key in REQUIRED_KEYS:
        if _num(record.get(key)) is None:
            raise ClientError(f"{path}: missing or non-numeric {key!r} in the client's record")
    metrics: dict[str, float] = {}
    for registered in METRICS.values():
        value = _num(record.get(registered.client_key))
        if value is not None:
            metrics[registered.name] = value
    for key in COUNTER_KEYS:
        value = _num(record.get(key))
        if value is not None:
            metrics[key] = value
    completed = int(metrics["completed"])
    if completed == 0:
        raise ClientError(f"{path}: 0 requests completed; errors: "
                          f"{_first_errors(record)}")
    if expect_prompts is not None and completed != expect_prompts:
        raise ClientError(f"{path}: {completed} of {expect_prompts} requests completed; "
                          f"errors: {_first_errors(record)}")
    requests = _requests(path, record)
    # A registered statistic the client does not report is computed from the samples.
    for registered in METRICS.values():
        samples = requests.get(registered.quantity or "") or []
        if registered.name not in metrics and registered.statistic and samples:
            metrics[registered.name] = summarise(samples, registered.statistic)
    return metrics, requests


def _first_errors(record: dict[str, Any]) -> str:
    errors = [e for e in record.get("errors") or [] if e]
    return "; ".join(str(e)[:200] for e in errors[:3]) or "none reported"


def _requests(path: Path, record: dict[str, Any]) -> Requests:
    details = ("ttfts", "itls", "input_lens", "output_lens", "errors")
    missing = [key for key in details if not isinstance(record.get(key), list)]
    if missing:
        raise ClientError(f"{path}: per-request details missing ({', '.join(missing)}); "
                          f"was --output-details passed?")
    lengths = {key: len(record[key]) for key in details}
    if len(set(lengths.values())) != 1:
        raise ClientError(f"{path}: per-request detail lists differ in length {lengths}")
    samples: list[RequestSample] = []
    # equivalent (strict=): the lengths were checked equal above
    for ttft, itl, n_in, n_out, error in zip(record["ttfts"], record["itls"],
                                            record["input_lens"], record["output_lens"],
                                            record["errors"], strict=True):  # pragma: no mutate
        if error or _num(ttft) is None or not ttft:
            continue
        samples.append(RequestSample(float(ttft), [float(x) for x in itl or []], int(n_in),
                                     int(n_out)))
    # Every registered per-request quantity (servegate.core.metrics), plus the lengths sent.
    requests: dict[str, Any] = per_request_samples(samples)
    requests["input_lens"] = [s.input_len for s in samples]
    requests["output_lens"] = [s.output_len for s in samples]
    return requests  # type: ignore[return-value]
