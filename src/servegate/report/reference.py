"""What the reference is: how the baseline's machine and software differ from the run's
(``provenance.fingerprint`` vs run.json ``fingerprint``). Said once when they differ: a ratio
against another machine or sglang measures that too. Pure functions: no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from servegate.core import stack

# (fingerprint key, label), machine first, then the software stack. A key missing on either
# side is not compared: an older baseline that did not record it says nothing either way.
MACHINE_FIELDS: tuple[tuple[str, str], ...] = (
    ("host", "host"),
    ("cpu_model", "cpu"),
    ("cpu_count", "cores"),
    ("gpu_name", "gpu"),
    ("gpu_count", "gpus"),
    ("driver", "driver"),
)
SOFTWARE_FIELDS: tuple[tuple[str, str], ...] = (
    ("rocm", "rocm"),
    ("cuda", "cuda"),
    ("torch", "torch"),
    ("sglang", "sglang"),
    ("sglang_commit", "sglang commit"),
    ("image", "image"),
    # the kernel stack under sglang (servegate.core.stack): versions, commits, the image digest
    *((key, label) for key, label in stack.TEXT_COMPONENTS
      if key not in {"rocm", "cuda", "torch", "image"}),
)
FIELDS = MACHINE_FIELDS + SOFTWARE_FIELDS
_MACHINE_KEYS = frozenset(key for key, _ in MACHINE_FIELDS)
_TEXT_KEYS = frozenset(key for key, _ in FIELDS)


def _present(value: Any) -> bool:
    return value is not None and value != ""


def fingerprint_diff(reference: Mapping[str, Any] | None,
                     current: Mapping[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """``(key, reference value, current value)`` for every compared field recorded on both
    sides with different values, in :data:`FIELDS` order; then the structured components
    (servegate.core.stack: each tuned GEMM config file by its variable, the GPU clock caps) as
    their short views."""
    reference, current = reference or {}, current or {}
    diff = [(key, reference[key], current[key]) for key, _ in FIELDS
            if _present(reference.get(key)) and _present(current.get(key))
            and str(reference[key]) != str(current[key])]
    structured = stack.changed(stack.components(reference), stack.components(current))
    return diff + [(key, old, new) for key, old, new in structured if key not in _TEXT_KEYS]


def _show(value: Any) -> str:
    text = str(value)
    return f'"{text}"' if " " in text else text


def describe_diff(diff: list[tuple[str, Any, Any]]) -> str | None:
    """``baseline from another machine: host a -> b, cpu "X" -> "Y", sglang 1 -> 2`` (None
    when nothing differs)."""
    if not diff:
        return None
    labels = {key: stack.label(key) for key, _, _ in diff} | dict(FIELDS)
    where = ("another machine" if any(key in _MACHINE_KEYS for key, _, _ in diff)
             else "the same machine, other software")
    parts = ", ".join(f"{labels[key]} {_show(old)} -> {_show(new)}" for key, old, new in diff)
    return f"baseline from {where}: {parts}"


def reference_text(baseline: Mapping[str, Any] | None,
                   run: Mapping[str, Any] | None) -> str | None:
    """The stored baseline's fingerprint against the run's, as one phrase (None when the
    baseline records no fingerprint, e.g. a rolling ``history:N`` baseline, or nothing
    differs)."""
    provenance = (baseline or {}).get("provenance") or {}
    reference = provenance.get("fingerprint")
    current = (run or {}).get("fingerprint")
    if not isinstance(reference, Mapping) or not isinstance(current, Mapping):
        return None
    return describe_diff(fingerprint_diff(reference, current))
