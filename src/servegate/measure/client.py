"""Run sglang's own load client (``python -m sglang.benchmark.serving``) for one point and parse
its JSONL. No hand-written load generator: the numbers are the ones SGLang's CI reports.

``--dataset-name random-ids --tokenize-prompt --random-range-ratio 1`` gives prompts of exactly
``input_len`` tokens with no dataset download; ``--flush-cache`` after the client's warm-up
both avoids prefix reuse and leaves the marker the server-log parser cuts at.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servegate.results import Requests
from servegate.serve.process import kill_tree, tail

SUMMARY_STATS = ("mean", "median", "std", "p90", "p95", "p99")
SUMMARY_METRICS = ("ttft", "tpot", "itl", "e2e_latency")
OTHER_KEYS = ("completed", "duration", "request_throughput", "input_throughput",
              "output_throughput", "total_throughput", "total_input_tokens",
              "total_output_tokens", "concurrency", "max_output_tokens_per_s")
REQUIRED_KEYS = ("completed", "duration", "median_ttft_ms", "median_tpot_ms")


class ClientError(RuntimeError):
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


def client_argv(python: str, point: ClientPoint) -> list[str]:
    return [
        python, "-m", "sglang.benchmark.serving",
        "--backend", "sglang",
        "--base-url", point.base_url,
        "--model", point.model,
        "--tokenizer", point.tokenizer,
        "--dataset-name", "random-ids",
        "--tokenize-prompt",
        "--random-range-ratio", "1",
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


def run_client(argv: list[str], log_path: Path, timeout_s: float,
               env: dict[str, str] | None = None, watch: Callable[[], None] | None = None,
               poll_s: float = 1.0) -> None:
    """Run the client in its own session (killed with its children on any exit path).

    ``watch`` is called every ``poll_s`` while the client runs; whatever it raises (e.g. the
    server died) stops the client at once instead of letting it wait out ``timeout_s``.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        try:
            while True:
                try:
                    code = proc.wait(timeout=max(0.0, min(poll_s, deadline - time.monotonic())))
                    break
                except subprocess.TimeoutExpired as err:
                    if time.monotonic() >= deadline:
                        raise ClientError(f"load client timed out after {timeout_s:.0f} s "
                                          f"(log: {log_path})\n{tail(log_path)}") from err
                    if watch is not None:
                        watch()
        finally:
            if proc.poll() is None:
                kill_tree(proc, grace_s=5)
    if code != 0:
        raise ClientError(f"load client exited with code {code} (log: {log_path})\n"
                          f"{tail(log_path)}")


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
    for stat in SUMMARY_STATS:
        for metric in SUMMARY_METRICS:
            value = _num(record.get(f"{stat}_{metric}_ms"))
            if value is not None:
                metrics[f"{stat}_{metric}_ms"] = value
    for key in OTHER_KEYS:
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
    return metrics, _requests(path, record)


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
    ttft_ms: list[float] = []
    tpot_ms: list[float] = []
    e2e_ms: list[float] = []
    input_lens: list[int] = []
    output_lens: list[int] = []
    for ttft, itl, n_in, n_out, error in zip(record["ttfts"], record["itls"],
                                            record["input_lens"], record["output_lens"],
                                            record["errors"], strict=True):
        if error or _num(ttft) is None or not ttft:
            continue
        itl = [float(x) for x in itl or []]
        latency = float(ttft) + sum(itl)          # the client's details carry no latency
        ttft_ms.append(float(ttft) * 1000.0)
        e2e_ms.append(latency * 1000.0)
        input_lens.append(int(n_in))
        output_lens.append(int(n_out))
        if int(n_out) > 1:
            tpot = (latency - float(ttft)) / (int(n_out) - 1) * 1000.0
            if math.isfinite(tpot):
                tpot_ms.append(tpot)
    return Requests(ttft_ms=ttft_ms, tpot_ms=tpot_ms, e2e_latency_ms=e2e_ms,
                    input_lens=input_lens, output_lens=output_lens)
