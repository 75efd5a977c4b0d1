"""servegate's server-side import hook (this folder is put first on the sglang server's PYTHONPATH).

Python imports ``sitecustomize`` at start-up in every process, including the scheduler that sglang
spawns, so env vars set by servegate reach all of them. Everything here is inert unless asked:

- ``SERVEGATE_REPORT_EXACT_FILL=1``: when sglang first evaluates its exact-chunk-fill gate, print
  ``servegate-hook: exact chunk fill gate=<True|False> in pid N`` (servegate reads it back).
- ``SERVEGATE_FORCE_EXACT_FILL=1``: after ``sglang.srt.managers.schedule_policy`` loads, replace
  ``_use_exact_chunk_fill`` with a function returning True (to exercise exact fill where the real
  gfx95 gate is off) and print ``servegate-hook: exact chunk fill forced in pid N``.
- ``SERVEGATE_EMULATE_GFX95=1`` (runner class ``cpu-gfx95`` only; servegate's one **device
  double**): after ``schedule_policy`` loads, the name ``is_gfx95_supported`` in that module (the
  device check ``_use_exact_chunk_fill`` calls: ``return envs.SGLANG_EXACT_CHUNK_FILL.get() and
  is_gfx95_supported()``, srt/managers/schedule_policy.py lines 94-103) is replaced by sglang's own
  test (srt/utils/common.py lines 1239-1248: ``any(gfx in gcnArchName for gfx in ["gfx95"])``)
  applied to an emulated device whose ``gcnArchName`` is MI355X's. ``_use_exact_chunk_fill`` and
  ``SGLANG_EXACT_CHUNK_FILL`` stay real: ``off`` (env 0) keeps the gate closed, ``on`` opens it.
  Nothing else in sglang sees the emulated device (the CPU engine keeps its CPU paths). Prints
  ``servegate-hook: device double: gfx95 emulated (gcnArchName=...) in pid N`` (read back).
- ``SERVEGATE_INJECT_DELAY_MS=<ms>`` / ``SERVEGATE_INJECT_DECODE_DELAY_MS=<ms>``: sleep that long
  in ``Scheduler.run_batch`` per prefill / decode batch: a controlled slowdown that lets the judge
  prove it detects regressions.

Any other ``sitecustomize`` further down ``sys.path`` is still imported afterwards (chained).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import time
from collections.abc import Callable
from typing import Any

POLICY_MODULE = "sglang.srt.managers.schedule_policy"
SCHEDULER_MODULE = "sglang.srt.managers.scheduler"
EMULATE_GFX95_ENV = "SERVEGATE_EMULATE_GFX95"
# What torch.cuda.get_device_properties(0).gcnArchName reports on an MI355X.
EMULATED_GFX95_ARCH = "gfx950:sramecc+:xnack-"


def _say(message: str) -> None:
    print(f"servegate-hook: {message} in pid {os.getpid()}", file=sys.stderr, flush=True)


def _ms(name: str) -> float:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return 0.0
    try:
        return max(0.0, float(raw))
    except ValueError:
        _say(f"ignoring {name}={raw!r} (not a number)")
        return 0.0


def _emulate_gfx95(module: Any) -> None:
    """The device double: ``is_gfx95_supported`` as schedule_policy sees it, on an emulated
    gfx95 device (sglang's own arch test, srt/utils/common.py lines 1239-1248)."""
    arch = EMULATED_GFX95_ARCH

    def is_gfx95_supported() -> bool:
        return any(gfx in arch for gfx in ["gfx95"])

    module.is_gfx95_supported = is_gfx95_supported
    _say(f"device double: gfx95 emulated (gcnArchName={arch})")


def _patch_policy(module: Any) -> None:
    if os.environ.get(EMULATE_GFX95_ENV) == "1":
        _emulate_gfx95(module)
    if os.environ.get("SERVEGATE_FORCE_EXACT_FILL") == "1":
        def _forced() -> bool:
            return True

        module._use_exact_chunk_fill = _forced
        _say("exact chunk fill forced")
        return
    if os.environ.get("SERVEGATE_REPORT_EXACT_FILL") == "1":
        real = module._use_exact_chunk_fill
        reported: list[bool] = []

        def _reporting() -> bool:
            value = bool(real())
            if not reported:
                reported.append(value)
                _say(f"exact chunk fill gate={value}")
            return value

        module._use_exact_chunk_fill = _reporting


def _patch_scheduler(module: Any) -> None:
    prefill_s = _ms("SERVEGATE_INJECT_DELAY_MS") / 1000.0
    decode_s = _ms("SERVEGATE_INJECT_DECODE_DELAY_MS") / 1000.0
    if not (prefill_s or decode_s):
        return
    scheduler = module.Scheduler
    real = scheduler.run_batch

    def run_batch(self: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
        mode = getattr(batch, "forward_mode", None)
        if mode is not None:
            if prefill_s and mode.is_extend():
                time.sleep(prefill_s)
            elif decode_s and mode.is_decode():
                time.sleep(decode_s)
        return real(self, batch, *args, **kwargs)

    scheduler.run_batch = run_batch
    _say(f"injecting delay prefill={prefill_s * 1000:g}ms decode={decode_s * 1000:g}ms")


PATCHES: dict[str, Callable[[Any], None]] = {
    POLICY_MODULE: _patch_policy,
    SCHEDULER_MODULE: _patch_scheduler,
}


class _PatchingLoader(importlib.abc.Loader):
    """Delegates to the real loader, then applies servegate's patch to the fresh module."""

    def __init__(self, real: importlib.abc.Loader, patch: Callable[[Any], None]) -> None:
        self._real = real
        self._patch = patch

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self._real.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._real.exec_module(module)
        self._patch(module)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        patch = PATCHES.get(fullname)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader, patch)
                return spec
        return None


def _wanted() -> bool:
    return any(os.environ.get(name) for name in (
        "SERVEGATE_FORCE_EXACT_FILL", "SERVEGATE_REPORT_EXACT_FILL", EMULATE_GFX95_ENV,
        "SERVEGATE_INJECT_DELAY_MS", "SERVEGATE_INJECT_DECODE_DELAY_MS"))


def _chain() -> None:
    """Import the next ``sitecustomize`` on sys.path (the one we shadow), if there is one."""
    here = os.path.dirname(os.path.abspath(__file__))
    saved_path, saved_mod = list(sys.path), sys.modules.pop("sitecustomize", None)
    try:
        sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
        importlib.import_module("sitecustomize")
    except ImportError:
        pass
    finally:
        sys.path[:] = saved_path
        if saved_mod is not None:
            sys.modules["sitecustomize"] = saved_mod


if _wanted():
    sys.meta_path.insert(0, _PostImportFinder())
_chain()
