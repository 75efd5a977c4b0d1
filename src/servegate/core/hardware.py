"""The hardware a run ran on as one digest: what changes kernels and timing (pure). A reference from
other hardware measures that machine, not the build (the fields, what is left out and why:
docs/judge.md, Which baseline, on which hardware). A fingerprint without it is *hardware unknown*."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from servegate.core import stack

HARDWARE = "hardware"
# the ISA features CPU kernels dispatch on (x86 flags, Arm Features), recorded when present
ISA_FEATURES = ("avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
                "avx512_bf16", "avx512_fp16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8",
                "asimd", "asimddp", "sve", "sve2", "i8mm", "bf16")
FIELDS: tuple[tuple[str, str], ...] = (
    ("cpu_vendor", "cpu vendor"), ("cpu_family", "cpu family"),
    ("cpu_model_number", "cpu model"), ("cpu_stepping", "stepping"), ("cpu_model", "cpu"),
    ("cpu_isa", "isa"), ("cpu_count", "cores"), ("memory_gib", "memory GiB"),
    ("gpu_name", "gpu"), ("gpu_arch", "gpu arch"), ("gpu_count", "gpus"),
    ("gpu_vbios", "vbios"), ("driver", "driver"), (stack.CLOCK_LIMITS, "gpu clock limits"))
Status = Literal["same", "other", "unknown"]


def fields(fingerprint: Mapping[str, Any] | None) -> dict[str, str]:
    """The recorded hardware fields as text (the GPU name only with a GPU: the CPU tier's
    stand-in names what ``platform`` calls the CPU)."""
    fp = dict(fingerprint or {})
    fp[stack.CLOCK_LIMITS] = stack.clock_limits(fp.get(stack.GPU_CLOCKS))
    if not fp.get("gpu_count"):
        fp.pop("gpu_name", None)
    return {key: " ".join(map(str, value)) if isinstance(value, list) else str(value)
            for key, _ in FIELDS if (value := fp.get(key)) not in (None, "", [])}


def digest(fingerprint: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fields(fingerprint), sort_keys=True).encode()).hexdigest()[:12]


def of(fingerprint: Mapping[str, Any] | None) -> str | None:
    """The recorded digest; None: hardware unknown."""
    value = (fingerprint or {}).get(HARDWARE)
    return value if isinstance(value, str) and value else None


def compare(reference: Mapping[str, Any] | None, current: Mapping[str, Any] | None
            ) -> tuple[Status, str]:
    """(same | other | unknown, one phrase): ``other`` names every differing field
    (``cpu family 23 -> 25``); a field one side did not record shows as ``?``. Without a
    digest on either side only the fields both record are compared: unknown unless one of
    those differs."""
    ref, cur = fields(reference), fields(current)
    labels = dict(FIELDS)
    known = of(reference) is not None and of(current) is not None
    if known and of(reference) == of(current):
        return "same", f"hardware {of(current)}"
    keys = [key for key, _ in FIELDS if (key in ref or key in cur) and ref.get(key) != cur.get(key)
            and (known or (key in ref and key in cur))]
    if keys:
        return "other", "other hardware: " + ", ".join(
            f"{labels[key]} {_show(ref.get(key))} -> {_show(cur.get(key))}" for key in keys)
    recorded = ", ".join(f"{labels[key]} {_show(value)}" for key, value in ref.items())
    return "unknown", ("hardware unknown (recorded before servegate recorded it"
                       + (f"; it records {recorded}" if recorded else "") + ")")


def _show(value: str | None) -> str:
    return "?" if value is None else f'"{value}"' if " " in value else value
