"""Sizing an injected prefill slowdown for the real-server tests on the `cpu` load.

A block of that load is one wave of two 300-token prompts at c2 through a 256-token chunk
(suites/cpu.toml): the first request's first token follows 2 prefill batches, the second's 3, so
a delay of ``d`` per prefill batch (``SERVEGATE_INJECT_DELAY_MS``) adds 2.5 ``d`` to the block's
mean TTFT. The baseline's ``off`` mean TTFT turns a relative slowdown into that delay. A decode
delay ``d`` per decode batch (``SERVEGATE_INJECT_DECODE_DELAY_MS``) adds ``d`` to every
inter-token gap, so the baseline's ``off`` median TPOT does the same for a decode slowdown."""

from __future__ import annotations

import json

from repo_files import REPO_ROOT

PREFILL_BATCHES_PER_FIRST_TOKEN = 2.5
CPU_BASELINE = REPO_ROOT / "baselines" / "cpu" / "smollm2-135m" / "cpu.json"


def prefill_delay_ms(slowdown: float, reference_ttft_ms: float | None = None) -> float:
    """The delay per prefill batch that slows the `cpu` load's mean TTFT by ``slowdown``: from
    ``reference_ttft_ms`` (a mean TTFT measured on this load, e.g. by an earlier run of the same
    test module) or else the committed bf16 CPU baseline's ``off`` mean TTFT."""
    if reference_ttft_ms is None:
        baseline = json.loads(CPU_BASELINE.read_text())
        reference_ttft_ms = next(p["metrics"]["mean_ttft_ms"]["value"]
                                 for p in baseline["points"] if p["mode"] == "off")
    return slowdown * reference_ttft_ms / PREFILL_BATCHES_PER_FIRST_TOKEN


def decode_delay_ms(slowdown: float) -> float:
    """The delay per decode batch that slows the `cpu` load's median TPOT by ``slowdown``."""
    baseline = json.loads(CPU_BASELINE.read_text())
    tpot = next(p["metrics"]["median_tpot_ms"]["value"] for p in baseline["points"]
                if p["mode"] == "off")
    return slowdown * tpot
