"""The software and kernel stack of a fingerprint as comparable components (pure, no I/O).

A TTFT step can come from sglang or anything under it (aiter, hipBLASLt, triton, a tuned GEMM
file, the image, a clock cap); one flat ``{component: value}`` view lets the ``reference:`` line
and the history's change points compare the same things the same way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# (fingerprint key, label) of the plain text components, in report order
TEXT_COMPONENTS: tuple[tuple[str, str], ...] = (
    ("rocm", "rocm"),
    ("cuda", "cuda"),
    ("torch", "torch"),
    ("aiter", "aiter"),
    ("aiter_commit", "aiter commit"),
    ("hipblaslt", "hipblaslt"),
    ("hipblaslt_commit", "hipblaslt commit"),
    ("triton", "triton"),
    ("triton_commit", "triton commit"),
    ("tilelang", "tilelang"),
    ("tilelang_commit", "tilelang commit"),
    ("image", "image"),
    ("image_digest", "image digest"),
)
# fingerprint keys of the structured components
GEMM_CONFIGS = "gemm_configs"       # {env var: sha256 of the file it names, or "missing"}
GPU_CLOCKS = "gpu_clocks"           # {"tool", per-GPU lists "<clock>_mhz" / "<clock>_max_mhz"}
GEMM_CONFIG_PREFIX = "gemm_config:"
CLOCK_LIMITS = "gpu_clock_limits"
SHORT_HASH = 12                     # hex digits shown of a config file's sha256
_LABELS = dict(TEXT_COMPONENTS) | {CLOCK_LIMITS: "gpu clock limits", "sglang": "sglang",
                                    "sglang_commit": "sglang commit"}


def _present(value: Any) -> bool:
    return value is not None and value != ""


def uniform(values: Any) -> str | None:
    """One value for all GPUs (``"2400"``), the list when they differ, None when unrecorded."""
    if not isinstance(values, list) or not values:
        return None
    shown = [str(v) for v in values]
    return shown[0] if len(set(shown)) == 1 else "/".join(shown)


def clock_limits(clocks: Any) -> str | None:
    """``"sclk max 2400 MHz, mclk max 1900 MHz"``: the caps only. The clocks at start are
    recorded too, but an idle GPU's current clock wanders run to run (deep sleep), so only a
    changed cap is a difference worth naming."""
    if not isinstance(clocks, Mapping):
        return None
    parts = []
    for name in ("sclk", "mclk"):
        shown = uniform(clocks.get(f"{name}_max_mhz"))
        if shown is not None:
            parts.append(f"{name} max {shown} MHz")
    return ", ".join(parts) or None


def _short_hash(value: Any) -> str:
    text = str(value)
    return f"sha256:{text[:SHORT_HASH]}" if len(text) == 64 else text


def components(fingerprint: Mapping[str, Any] | None) -> dict[str, str]:
    """Every recorded component as ``{key: value}`` (sglang excluded: its version and commit
    have their own fields everywhere). A component the fingerprint does not record is absent."""
    fp = fingerprint or {}
    out = {key: str(fp[key]) for key, _ in TEXT_COMPONENTS if _present(fp.get(key))}
    configs = fp.get(GEMM_CONFIGS)
    if isinstance(configs, Mapping):
        for var in sorted(configs):
            if _present(configs[var]):
                out[f"{GEMM_CONFIG_PREFIX}{var}"] = _short_hash(configs[var])
    limits = clock_limits(fp.get(GPU_CLOCKS))
    if limits:
        out[CLOCK_LIMITS] = limits
    return out


def label(key: str) -> str:
    """``aiter commit``, ``gemm config AITER_CONFIG_GEMM_A8W8``; an unknown key as itself."""
    if key.startswith(GEMM_CONFIG_PREFIX):
        return f"gemm config {key.removeprefix(GEMM_CONFIG_PREFIX)}"
    return _LABELS.get(key, key)


def changed(before: Mapping[str, str], after: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """``(key, before, after)`` of every component recorded on both sides with another value,
    in ``before``'s order (a component one side did not record says nothing: an older record
    simply did not look)."""
    return [(key, value, after[key]) for key, value in before.items()
            if key in after and after[key] != value]
