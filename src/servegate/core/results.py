"""The run folder contract shared by bench (writer), accuracy, judge and report (readers).

A run folder (``results/<suite>-<runner>-<UTC stamp>/``, docs/serve.md) holds ``run.json`` (this
schema, written atomically), ``client/``, ``server/``, ``gsm8k/``, ``summary.md`` and compare's
reports. Keys other tools rely on (issue 3): ``points``, ``complete`` (true only when every
planned point finished) and the provenance keys below."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, TypeAdapter, ValidationError
from typing_extensions import NotRequired, Required, TypedDict

from servegate.core import runner_classes
from servegate.core.errors import ServegateError
from servegate.core.versioned import Schema, SchemaVersionError

# 2: runner_class is a registered GPU model (servegate.core.runner_classes), no longer an architecture.
RUN_SCHEMA_VERSION = 2
MODES: tuple[str, ...] = ("off", "on", "forced")
Mode = Literal["off", "on", "forced"]


class RankAlignment(TypedDict):
    """One DP rank's prefill batches (its scheduler's own log lines)."""

    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]

    saturated_batches: int
    aligned_fraction: float
    min_saturated_tokens: int
    prefill_tokens: list[int]


class Alignment(TypedDict):
    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]

    chunk_size: int                 # per scheduler: --chunked-prefill-size // attention-DP size
    saturated_batches: int          # prefill batches that were limited by the chunk budget
    aligned_fraction: float         # saturated batches exactly at chunk_size / saturated_batches
    min_saturated_tokens: int       # smallest saturated batch (0 when there is none)
    prefill_tokens: list[int]       # every prefill batch's #new-token, health/warm-up excluded
    # Only when the server log's prefill lines carry DP ranks (servegate.measure.logparse):
    configured_chunk_size: NotRequired[int]     # --chunked-prefill-size as launched
    dp_attention_size: NotRequired[int]         # 1 for plain DP replicas (whole chunk each)
    per_rank: NotRequired[dict[str, RankAlignment]]   # "0", "1", ...: each rank's own stats


class Requests(TypedDict, total=False):
    """Per-request samples from the client's --output-details (same order as sent): one list per
    quantity registered in :mod:`servegate.core.metrics` (these three ship), plus the lengths sent."""

    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]

    ttft_ms: list[float]
    tpot_ms: list[float]            # (latency - ttft) / (output_len - 1); 1-token outputs dropped
    e2e_latency_ms: list[float]
    input_lens: list[int]
    output_lens: list[int]


class Point(TypedDict):
    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    mode: Mode
    concurrency: int
    repeat: int                     # 0-based repeat index (a server restart per repeat)
    order: NotRequired[int]         # position in the interleaved execution order
    metrics: dict[str, float]       # the client's summary keys, e.g. median_ttft_ms, mean_tpot_ms
    requests: NotRequired[Requests]
    alignment: NotRequired[Alignment]
    exact_fill_effective: NotRequired[bool]   # read back from the server (hook line / batches)
    # emulated classes only: the device double's log line, e.g. "gfx95 emulated (...) in pids [123]"
    device_double: NotRequired[str]
    files: NotRequired[dict[str, str]]        # relative paths: client_jsonl, server_log, ...
    arm: NotRequired[Literal["base", "head"]]  # head-vs-base runs: which sglang tree
    # in-server design: the server start and its block round (repeat = start * blocks + block)
    start: NotRequired[int]
    block: NotRequired[int]
    # the mode switch acknowledged before this block: {"seq", "gates": {pid: gate}}
    mode_ack: NotRequired[dict[str, Any]]
    # what else used the machine during the block (psutil; GPU processes where a tool exists)
    machine: NotRequired[dict[str, Any]]
    wall_s: NotRequired[float]                # the block's client wall time
    # live pair: batches the other server ran during this block, per server label (0: idle)
    idle_check: NotRequired[dict[str, int]]
    # halves design: batches the other half's server ran during this block (busy by design)
    other_half: NotRequired[dict[str, int]]


class Fingerprint(TypedDict, total=False):
    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]

    runner_class: str               # a registered class: cpu | mi355x | mi300x | mi325x | h200 ...
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
    device_double: str              # emulated runner classes only (servegate.core.runner_classes)
    cpu_model: str                  # /proc/cpuinfo "model name" (the reference's machine)
    cpu_count: int
    # hardware identity (servegate.core.hardware; absent in older runs): /proc/cpuinfo's fields
    cpu_vendor: str
    cpu_family: str
    cpu_model_number: str
    cpu_stepping: str
    cpu_isa: list[str]              # the kernels' ISA features present (hardware.ISA_FEATURES)
    memory_gib: int                 # MemTotal, GiB
    gpu_vbios: str                  # per GPU when they differ ("a/b/...")
    hardware: str                   # sha256[:12] of the hardware fields
    # the kernel stack (servegate.serve.kernel_stack; compared through servegate.core.stack)
    aiter: str
    aiter_commit: str
    hipblaslt: str
    hipblaslt_commit: str
    triton: str
    triton_commit: str
    tilelang: str
    tilelang_commit: str
    image_digest: str
    gemm_configs: dict[str, str]    # AITER_CONFIG_GEMM_* / HIPBLASLT_TUNING_FILE -> sha256
    gpu_clocks: dict[str, Any]      # {"tool", per-GPU "sclk_mhz", "sclk_max_mhz", ...} at start


class AccuracyResult(TypedDict, total=False):
    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]

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


class Timings(TypedDict, total=False):
    """What the run's GPU time went to (issue 29: plans price suites from these). Every entry has
    ``seconds``; the lists grow as the run goes, so a failed run keeps what it measured."""

    __pydantic_config__ = ConfigDict(extra="allow")  # type: ignore[misc]

    server_starts: list[dict[str, Any]]  # {"label", "seconds", "attempt"[, "failed": true]}
    warmups: list[dict[str, Any]]   # {"arm", "mode", "start", "concurrency", "seconds"}
    blocks: list[dict[str, Any]]    # {"arm", "mode", "start", "block", "concurrency", "seconds"}
    switches: list[dict[str, Any]]  # {"arm", "mode", "seconds"}: in-place switch + acks
    gsm8k: list[dict[str, Any]]     # {"arm", "mode", "questions", "seconds"}
    profiles: list[dict[str, Any]]  # {"arm", "mode", "start", "seconds"}: profiled blocks only
    serving_seconds: float          # warmups + blocks + switches + gsm8k
    total_seconds: float            # bench's wall, run start to complete (or to the failure)


class Run(TypedDict, total=False):
    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    schema_version: Required[int]
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
    page_size: int | None
    points: Required[list[Point]]
    accuracy: dict[str, AccuracyResult]     # by mode
    paired_accuracy: dict[str, Any]         # e.g. "on_vs_off": McNemar analysis
    injected: dict[str, str]                # SERVEGATE_INJECT_* fault injection, if enabled
    suite_source: dict[str, str]            # {"path", "sha256"} of the suite file that was run
    # the suite's [load] as run: {"dataset", "input_len", "output_len", "concurrency",
    # "num_prompts", "range_ratio", "shaped_output_len"} (absent in older runs)
    load: dict[str, Any]
    judge_table: dict[str, Any] | None      # that file's [judge] table as run (None: defaults)
    servegate_commit: str | None            # the servegate checkout's commit ("-dirty" if changed)
    sglang_src: dict[str, Any]              # --sglang-src: {path, version, commit, dirty, ...}
    ab: dict[str, dict[str, Any]]           # head vs base: {"base": tree, "head": tree}
    # the design: {"in_server", "starts", "blocks", "unit", "order", "starts_s", ...}
    design: dict[str, Any]
    timings: Timings                        # measured seconds (absent in older runs)
    # a design with looks: {"looks", "levels", "taken", "stopped_at_blocks", ...} (bench_looks)
    sequential: dict[str, Any]
    # the tested tree's exact-fill gate on runner_class (servegate.serve.gate, before any server
    # starts): True makes `on` a claim, False a no-op; absent: the registry's `gated` stands
    gate_open: bool
    gate: dict[str, Any]    # {"runner", "device_arch", "gate_open", "has_gate", "arms": {...}}
    # profiled blocks (bench --profile; servegate.attribution.record): never timing evidence
    profile: dict[str, Any]


class RunFolderError(ServegateError, ValueError):
    """A run folder or its run.json is missing or malformed; the message names file and field."""


def unusable_reasons(run: Run) -> list[str]:
    """Why a run cannot be a reference (a stored baseline or a history night); empty: it can."""
    reasons = []
    if run.get("complete") is not True:
        reasons.append("run is incomplete (run.json complete is not true)")
    if run.get("injected"):
        reasons.append(f"run had servegate fault injection enabled: {run['injected']}")
    if run.get("error"):
        reasons.append(f"run failed: {run['error']}")
    if not run.get("points"):
        reasons.append("run has no points")
    return reasons


def _run_v1_to_v2(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """v1 named the architecture (gfx95, gfx942, nvidia, rocm-other); v2 names the GPU model."""
    runner = data.get("runner_class")
    if runner not in (None, "cpu"):
        fingerprint = data.get("fingerprint") or {}
        try:
            model = runner_classes.from_schema_1(str(runner), fingerprint).name
        except runner_classes.UnknownRunner as err:
            raise SchemaVersionError(f"{path}: runner_class {runner!r} (schema 1) cannot be "
                                     f"named as a GPU model: {err}") from err
        data["runner_class"] = model
        data["fingerprint"] = {**fingerprint, "runner_class": model}
    return data


RUN_SCHEMA = Schema("run.json", "schema_version", RUN_SCHEMA_VERSION, {1: _run_v1_to_v2})
_RUN = TypeAdapter(Run)


def _field(loc: tuple[int | str, ...]) -> str:
    """pydantic's error location as the path a reader types: points[3].metrics.mean_ttft_ms."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def validate_run(data: Any, path: Path) -> Run:
    """Upgrade an older document in memory, then check every field's type."""
    upgraded, _ = RUN_SCHEMA.upgrade(data, path)
    try:
        return _RUN.validate_python(upgraded)
    except ValidationError as err:
        first = err.errors()[0]
        raise RunFolderError(f"{path}: {_field(first['loc'])}: {first['msg']} (got "
                             f"{first.get('input')!r:.80})") from None


def load_run(run_dir: Path) -> Run:
    """Read, upgrade and validate ``run.json`` (names the file and the field on any problem)."""
    path = Path(run_dir) / "run.json"
    if not path.is_file():
        raise RunFolderError(f"{path}: not found (is {run_dir} a servegate run folder?)")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise RunFolderError(f"{path}: not valid JSON ({err})") from err
    try:
        return validate_run(data, path)
    except SchemaVersionError as err:
        raise RunFolderError(str(err)) from err


def point_slot(point: Mapping[str, Any]) -> tuple[int, int]:
    """(start, block) of a run.json point; runs from before blocks: one block per start (the
    repeat's own server start)."""
    repeat = int(point.get("repeat", 0))
    return int(point.get("start", repeat)), int(point.get("block", 0))
