"""servegate's device double: sglang's exact-fill gate evaluated with torch answering as another
device for the call only (why, and what sglang's device checks read: docs/serve.md, gfx95
emulated on a CPU). Stand-alone (no servegate imports): the server hook imports it, servegate
loads it by path (servegate.serve.gate), and ``python servegate_device_double.py DEVICE...``
prints a tree's gate per device as JSON."""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import os
import sys
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from types import SimpleNamespace
from typing import Any

EMULATE_ARCH_ENV = "SERVEGATE_EMULATE_ARCH"     # a device string, e.g. gfx942:sramecc+:xnack-
EMULATE_GFX95_ENV = "SERVEGATE_EMULATE_GFX95"   # the older form: "1" emulates GFX95_DEVICE
GFX95_DEVICE = "gfx950:sramecc+:xnack-"         # what an MI355X reports as gcnArchName
POLICY_MODULE = "sglang.srt.managers.schedule_policy"
GATE_NAME = "_use_exact_chunk_fill"
EXACT_FILL_ENV = "SGLANG_EXACT_CHUNK_FILL"
_HIP_VERSION = "7.0.0"
_CUDA_VERSION = "12.8"
# names in a cached function's code that mean it reads the device (transitively: a cached
# function calling one of those is cleared too)
_DEVICE_NAMES = frozenset({"gcnArchName", "get_device_properties", "get_device_capability",
                           "hip"})
_LOCK = threading.RLock()


class DeviceDoubleError(ValueError):
    """A device string the double cannot emulate, or an env var naming one."""


def emulated_device(env: Mapping[str, str]) -> str | None:
    """The device the env asks the server's double for (None: no double)."""
    arch = env.get(EMULATE_ARCH_ENV, "").strip()
    if arch:
        return arch
    return GFX95_DEVICE if env.get(EMULATE_GFX95_ENV) == "1" else None


def label(device: str) -> str:
    """How the double names a device in its log line (``gfx95`` for every gfx95x, as before)."""
    base = device.split(":", 1)[0].strip().lower()
    return "gfx95" if base.startswith("gfx95") else base


def _kind(device: str) -> str:
    base = device.split(":", 1)[0].strip().lower()
    if base.startswith("gfx"):
        return "hip"
    if base.startswith("sm_") and base[3:].isdigit():
        return "cuda"
    if base == "cpu":
        return "cpu"
    raise DeviceDoubleError(f"device {device!r}: expected a ROCm gcnArchName (gfx...), a CUDA "
                            f"sm_XY or cpu")


def _capability(device: str) -> tuple[int, int]:
    """``sm_90`` -> (9, 0); ``gfx942`` -> (9, 4), ``gfx1250`` -> (12, 5), as torch reports them."""
    base = device.split(":", 1)[0].strip().lower()
    digits = "".join(c for c in base[3:] if c.isdigit()) or "0"
    if base.startswith("sm_"):
        return int(digits[:-1] or 0), int(digits[-1])
    major = digits[:-2] if len(digits) > 3 else digits[:1]
    return int(major or 0), int(digits[len(major)] if len(digits) > len(major) else 0)


def _properties(device: str) -> SimpleNamespace:
    major, minor = _capability(device)
    props = SimpleNamespace(name=f"servegate device double ({device})", major=major,
                            minor=minor, multi_processor_count=1, total_memory=1 << 36)
    if _kind(device) == "hip":
        props.gcnArchName = device
    return props


@contextlib.contextmanager
def as_device(torch: Any, device: str) -> Iterator[None]:
    """``torch`` answers the device questions as ``device`` would, inside the block only."""
    kind = _kind(device)
    version, cuda = torch.version, torch.cuda
    saved = (version.hip, version.cuda, cuda.get_device_properties, cuda.get_device_capability)
    props = _properties(device) if kind != "cpu" else None

    def get_device_properties(index: Any = 0) -> SimpleNamespace:
        if props is None:
            raise RuntimeError("servegate device double: cpu (no GPU)")
        return props

    def get_device_capability(index: Any = 0) -> tuple[int, int]:
        props_ = get_device_properties(index)
        return int(props_.major), int(props_.minor)

    version.hip = _HIP_VERSION if kind == "hip" else None
    version.cuda = _CUDA_VERSION if kind == "cuda" else None
    cuda.get_device_properties = get_device_properties
    cuda.get_device_capability = get_device_capability
    try:
        yield
    finally:
        version.hip, version.cuda = saved[0], saved[1]
        cuda.get_device_properties, cuda.get_device_capability = saved[2], saved[3]


def _device_caches() -> list[Any]:
    """sglang's lru-cached functions that read the device, directly or through another one."""
    cached: dict[int, Any] = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("sglang") or module is None:
            continue
        for value in list(vars(module).values()):
            # only real lru_cache wrappers (sglang has lazy module attributes that a getattr
            # would import) around plain functions
            if isinstance(value, functools._lru_cache_wrapper) and isinstance(
                    getattr(value.__wrapped__, "__code__", None), types.CodeType):
                cached[id(value)] = value
    picked: dict[int, Any] = {}
    names = set(_DEVICE_NAMES)
    grew = True
    while grew:
        grew = False
        for key, fn in cached.items():
            if key not in picked and names & set(fn.__wrapped__.__code__.co_names):
                picked[key] = fn
                names.add(fn.__wrapped__.__name__)
                grew = True
    return list(picked.values())


def _clear(gate: Callable[[], Any]) -> None:
    for fn in _device_caches():
        fn.cache_clear()
    clear = getattr(gate, "cache_clear", None)
    if clear is not None:
        clear()


def evaluate(gate: Callable[[], Any], device: str, torch: Any = None) -> bool:
    """``gate()`` as on ``device`` (the env as it is now), no emulated answer kept afterwards."""
    _kind(device)
    module = torch if torch is not None else importlib.import_module("torch")
    with _LOCK:
        _clear(gate)
        try:
            with as_device(module, device):
                return bool(gate())
        finally:
            _clear(gate)


class EmulatedGate:
    """``_use_exact_chunk_fill`` as on ``device``: sglang's gate evaluated under the double once,
    then cached like sglang's own lru_cache; ``cache_clear`` makes the next call re-evaluate
    (the mode switch sets the env var and clears it)."""

    def __init__(self, real: Callable[[], Any], device: str) -> None:
        _kind(device)
        self.__wrapped__ = real
        self.device = device
        self._value: bool | None = None

    def __call__(self) -> bool:
        if self._value is None:
            self._value = evaluate(self.__wrapped__, self.device)
        return self._value

    def cache_clear(self) -> None:
        self._value = None


def gate_on(devices: list[str]) -> dict[str, Any]:
    """The tree on the import path: its gate per device with ``SGLANG_EXACT_CHUNK_FILL=1`` (what
    mode ``on`` sets). A tree without the gate (before 0.5.20) has it closed everywhere."""
    import sglang

    policy = importlib.import_module(POLICY_MODULE)
    gate = getattr(policy, GATE_NAME, None)
    found = {"sglang_version": getattr(sglang, "__version__", "unknown"),
             "package_dir": str(next(iter(sglang.__path__))), "has_gate": gate is not None}
    if gate is None:
        return {**found, "gates": dict.fromkeys(devices, False)}
    previous = os.environ.get(EXACT_FILL_ENV)
    os.environ[EXACT_FILL_ENV] = "1"
    try:
        return {**found, "gates": {d: evaluate(gate, d) for d in devices}}
    finally:
        if previous is None:
            os.environ.pop(EXACT_FILL_ENV, None)
        else:
            os.environ[EXACT_FILL_ENV] = previous


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: servegate_device_double.py DEVICE [DEVICE ...]", file=sys.stderr)
        return 2
    try:
        for device in argv:
            _kind(device)
    except DeviceDoubleError as err:
        print(f"servegate device double: {err}", file=sys.stderr)
        return 2
    print(json.dumps(gate_on(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
