"""The run folder contract shared by bench (writer), accuracy, judge and report (readers).

A run folder (``results/<suite>-<runner>-<UTC stamp>/``) holds:

- ``run.json``        this schema (written atomically, rewritten after every point)
- ``client/``         sglang.benchmark.serving JSONL output per point (raw, kept)
- ``server/``         one full server log per server start
- ``gsm8k/<mode>.jsonl`` per-question records (accuracy step)
- ``summary.md``      human summary; sections appended by measure, accuracy and judge
- ``verdict.json``, ``junit.xml``, ``plots/`` written by ``servegate compare``

``run.json`` keys other tools rely on (contract from issue 3): ``points`` (list of Point),
``complete`` (true only when every planned point finished), plus the provenance keys below.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, TypedDict

from servegate.errors import ServegateError

RUN_SCHEMA_VERSION = 1
MODES: tuple[str, ...] = ("off", "on", "forced")
Mode = Literal["off", "on", "forced"]


class Alignment(TypedDict):
    chunk_size: int
    saturated_batches: int          # prefill batches that were limited by the chunk budget
    aligned_fraction: float         # saturated batches exactly at chunk_size / saturated_batches
    min_saturated_tokens: int       # smallest saturated batch (0 when there is none)
    prefill_tokens: list[int]       # every prefill batch's #new-token, health/warm-up excluded


class Requests(TypedDict):
    """Per-request samples from the client's --output-details (same order as sent): one list per
    quantity registered in :mod:`servegate.metrics` (these three ship), plus the lengths sent."""

    ttft_ms: list[float]
    tpot_ms: list[float]            # (latency - ttft) / (output_len - 1); 1-token outputs dropped
    e2e_latency_ms: list[float]
    input_lens: list[int]
    output_lens: list[int]


class Point(TypedDict):
    mode: Mode
    concurrency: int
    repeat: int                     # 0-based repeat index (a server restart per repeat)
    order: int                      # position in the interleaved execution order
    metrics: dict[str, float]       # the client's summary keys, e.g. median_ttft_ms, mean_tpot_ms
    requests: Requests
    alignment: Alignment
    exact_fill_effective: bool      # read back from the server (hook line / prefill batches)
    files: dict[str, str]           # paths relative to the run folder: client_jsonl, server_log


class Fingerprint(TypedDict, total=False):
    runner_class: str               # cpu | gfx95 | gfx942 | rocm-other | nvidia
    gpu_name: str
    gpu_count: int
    gpu_arch: str
    driver: str
    rocm: str
    cuda: str
    torch: str
    sglang: str
    sglang_commit: str
    model: str
    model_revision: str
    image: str
    host: str
    python: str


class AccuracyResult(TypedDict, total=False):
    n: int
    correct: int
    accuracy: float
    wilson_low: float
    wilson_high: float
    invalid: int
    extraction: str                 # "flexible" (default) or "strict"
    strict_accuracy: float
    flexible_accuracy: float
    records: str                    # gsm8k/<mode>.jsonl, relative to the run folder
    dataset_sha256: str


class Run(TypedDict, total=False):
    schema_version: int
    run_id: str                     # the run folder's name as bench made it (unique per run)
    suite: str
    model_profile: str
    runner_class: str
    fingerprint: Fingerprint
    command: list[str]
    started_at: str                 # ISO 8601 UTC
    finished_at: str
    complete: bool
    error: str                      # one-line cause when the run failed (complete is false)
    chunk_size: int
    page_size: int
    points: list[Point]
    accuracy: dict[str, AccuracyResult]     # by mode
    paired_accuracy: dict[str, Any]         # e.g. "on_vs_off": McNemar analysis
    injected: dict[str, str]                # SERVEGATE_INJECT_* fault injection, if enabled
    suite_source: dict[str, str]            # {"path", "sha256"} of the suite file that was run
    judge_table: dict[str, Any] | None      # that file's [judge] table as run (None: defaults)
    servegate_commit: str | None            # the servegate checkout's commit ("-dirty" if changed)


class RunFolderError(ServegateError, ValueError):
    """A run folder or its run.json is missing or malformed; the message names file and field."""


def load_run(run_dir: Path) -> Run:
    """Read and minimally validate ``run.json`` (names the file and field on any problem)."""
    path = Path(run_dir) / "run.json"
    if not path.is_file():
        raise RunFolderError(f"{path}: not found (is {run_dir} a servegate run folder?)")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise RunFolderError(f"{path}: not valid JSON ({err})") from err
    if not isinstance(data, dict):
        raise RunFolderError(f"{path}: expected a JSON object at top level")
    version = data.get("schema_version")
    if version != RUN_SCHEMA_VERSION:
        raise RunFolderError(
            f"{path}: schema_version {version!r}, expected {RUN_SCHEMA_VERSION}")
    points = data.get("points")
    if not isinstance(points, list):
        raise RunFolderError(f"{path}: 'points' must be a list")
    for index, point in enumerate(points):
        for key, kind in (("mode", str), ("concurrency", int), ("repeat", int),
                          ("metrics", dict)):
            if not isinstance(point.get(key), kind):
                raise RunFolderError(
                    f"{path}: points[{index}].{key} must be {kind.__name__}, "
                    f"got {point.get(key)!r}")
        if point["mode"] not in MODES:
            raise RunFolderError(
                f"{path}: points[{index}].mode {point['mode']!r} not one of {MODES}")
    return data  # type: ignore[return-value]
