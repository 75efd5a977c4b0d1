"""servegate's server-side import hook, first on the sglang server's PYTHONPATH so that it runs in
every process sglang spawns. Inert unless a ``SERVEGATE_*`` variable asks; the variables, the
lines it prints and the mode-switch protocol: docs/serve.md (Modes and the read-back, Modes inside
one server, gfx95 emulated on a CPU, Profiled blocks). Another ``sitecustomize`` further down
``sys.path`` is still imported (chained)."""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

POLICY_MODULE = "sglang.srt.managers.schedule_policy"
LINEAR_MODULE = "sglang.srt.layers.quantization.unquant"
GEMM_DELAY_ENV = "SERVEGATE_INJECT_GEMM_DELAY_MS"
GEMM_OPERAND = 256          # the injected GEMMs' square size: 256 KB a float32 operand
SCHEDULER_MODULE = "sglang.srt.managers.scheduler"
EMULATE_GFX95_ENV = "SERVEGATE_EMULATE_GFX95"
EMULATE_ARCH_ENV = "SERVEGATE_EMULATE_ARCH"
MODE_CONTROL_ENV = "SERVEGATE_MODE_CONTROL"
LAUNCH_MODE_ENV = "SERVEGATE_MODE"
INJECT_MODES_ENV = "SERVEGATE_INJECT_MODES"
EXACT_FILL_ENV = "SGLANG_EXACT_CHUNK_FILL"
MODES = ("off", "on", "forced")
POLL_S = 0.025              # the watcher's poll interval: a switch is seen within ~25 ms


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


def _emulate(module: Any) -> None:
    """The device double: the gate sglang calls is its own, evaluated as on the env's device."""
    import servegate_device_double as double  # beside this file, on the same path entry

    device = double.emulated_device(os.environ)
    if device is None:
        return
    module._use_exact_chunk_fill = double.EmulatedGate(module._use_exact_chunk_fill, device)
    _say(f"device double: {double.label(device)} emulated (gcnArchName={device})")


def _patch_policy(module: Any) -> None:
    _emulate(module)
    if os.environ.get(MODE_CONTROL_ENV):
        _install_controlled_gate(module)        # the control file decides from here on
        return
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


def _inject_modes() -> frozenset[str] | None:
    """The modes ``SERVEGATE_INJECT_MODES`` scopes the injected sleeps to (None: every mode)."""
    raw = os.environ.get(INJECT_MODES_ENV, "").strip()
    if not raw:
        return None
    modes = frozenset(m.strip() for m in raw.split(",") if m.strip())
    unknown = sorted(modes - set(MODES))
    if unknown:
        _say(f"ignoring unknown modes {unknown} in {INJECT_MODES_ENV}")
    return modes & frozenset(MODES)


def _current_mode() -> str | None:
    """Under mode control the applied mode (None before the first apply), else the launch mode."""
    if os.environ.get(MODE_CONTROL_ENV):
        return _STATE.mode
    return os.environ.get(LAUNCH_MODE_ENV) or None


def _patch_run_batch(scheduler: Any) -> None:
    prefill_s = _ms("SERVEGATE_INJECT_DELAY_MS") / 1000.0
    decode_s = _ms("SERVEGATE_INJECT_DECODE_DELAY_MS") / 1000.0
    if not (prefill_s or decode_s):
        return
    scope = _inject_modes()
    real = scheduler.run_batch

    def run_batch(self: Any, batch: Any, *args: Any, **kwargs: Any) -> Any:
        mode = getattr(batch, "forward_mode", None)
        if mode is not None and (scope is None or _current_mode() in scope):
            if prefill_s and mode.is_extend():
                time.sleep(prefill_s)
            elif decode_s and mode.is_decode():
                time.sleep(decode_s)
        return real(self, batch, *args, **kwargs)

    scheduler.run_batch = run_batch
    where = "" if scope is None else f" modes={','.join(sorted(scope)) or '(none)'}"
    _say(f"injecting delay prefill={prefill_s * 1000:g}ms decode={decode_s * 1000:g}ms{where}")
    if scope is not None and not (os.environ.get(MODE_CONTROL_ENV)
                                  or os.environ.get(LAUNCH_MODE_ENV)):
        _say(f"{INJECT_MODES_ENV} is set but the mode is unknown (no {LAUNCH_MODE_ENV}, no "
             f"{MODE_CONTROL_ENV}): no delay is injected")


def _patch_linear(module: Any) -> None:
    """GEMM time added to the first linear layer's call (once per forward), in the scoped
    modes only."""
    delay_s = _ms(GEMM_DELAY_ENV) / 1000.0
    method = getattr(module, "UnquantizedLinearMethod", None)
    if not delay_s or method is None:
        return
    scope = _inject_modes()
    real = method.apply
    operands: list[Any] = []            # a, b, out: made once, reused by every call
    first: list[Any] = []               # the first layer ever run: once in every forward

    def apply(self: Any, layer: Any, x: Any, bias: Any = None) -> Any:
        out = real(self, layer, x, bias)
        if not first:
            first.append(layer)
        if first[0] is layer and (scope is None or _current_mode() in scope):
            import torch

            if not operands:
                size = (GEMM_OPERAND, GEMM_OPERAND)
                operands.extend([torch.rand(size), torch.rand(size), torch.empty(size)])
            a, b, c = operands
            deadline = time.perf_counter() + delay_s
            with torch.no_grad():
                while time.perf_counter() < deadline:
                    torch.mm(a, b, out=c)
        return out

    method.apply = apply
    where = "" if scope is None else f" modes={','.join(sorted(scope)) or '(none)'}"
    _say(f"injecting {delay_s * 1000:g}ms of GEMM per forward (first linear layer){where}")


def _patch_scheduler(module: Any) -> None:
    scheduler = module.Scheduler
    if os.environ.get(MODE_CONTROL_ENV):
        _patch_scheduler_init(scheduler)
    _patch_run_batch(scheduler)


# ---------------------------------------------------------------- mode control (one server)
# The sglang 0.5.23 lines this relies on (the gate's lru_cache and module-global lookup,
# EnvBool read at every call, the scheduler's idle state): docs/serve.md, In the server.


class _ModeState:
    """The mode this process applied (None until the first apply) and sglang's real gate."""

    def __init__(self) -> None:
        self.seq: int | None = None
        self.mode: str | None = None
        self.gate = False
        self.real_gate: Callable[[], bool] | None = None
        self.watching = False
        self.last_note = ""


_STATE = _ModeState()


def _controlled_gate() -> bool:
    """What every PrefillAdder reads under mode control: the applied mode's gate (before the
    first apply, sglang's own gate under the launch env)."""
    if _STATE.mode is None:
        return bool(_STATE.real_gate()) if _STATE.real_gate is not None else False
    return _STATE.gate


def _install_controlled_gate(module: Any) -> None:
    """Replace ``schedule_policy._use_exact_chunk_fill`` once, keeping the real one to evaluate."""
    if module._use_exact_chunk_fill is not _controlled_gate:
        _STATE.real_gate = module._use_exact_chunk_fill
        module._use_exact_chunk_fill = _controlled_gate


def _evaluate(mode: str) -> bool:
    """The gate for ``mode``: the env var sglang reads at each call, the real gate's lru_cache
    cleared and the real gate evaluated (``on`` is True only on gfx95 or the device double);
    ``forced`` opens it whatever the device."""
    os.environ[EXACT_FILL_ENV] = "0" if mode == "off" else "1"
    real = _STATE.real_gate
    if real is None:
        raise RuntimeError(f"{POLICY_MODULE}._use_exact_chunk_fill not found")
    clear = getattr(real, "cache_clear", None)
    if clear is not None:
        clear()
    value = bool(real())
    return True if mode == "forced" else value


def _read_control(path: str) -> tuple[int, str] | None:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        return int(data["seq"]), str(data["mode"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _idle(scheduler: Any) -> bool:
    """No waiting request, an empty running batch, no chunked request, no batch in flight, and
    sglang's own ``is_fully_idle()`` where the scheduler has it: then no PrefillAdder is being
    built and the next one sees the new mode."""
    idle = (len(scheduler.waiting_queue) == 0 and scheduler.running_batch.is_empty()
            and scheduler.chunked_req is None)
    last = getattr(scheduler, "last_batch", None)
    idle = idle and (last is None or last.is_empty())
    fully = getattr(scheduler, "is_fully_idle", None)
    return bool(idle and (fully is None or fully()))


def _write_atomic(path: str, text: str) -> None:
    directory, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _ack(path: str, seq: int, mode: str, gate: bool) -> None:
    """The log line first, then the file: once servegate sees the file, the line is logged."""
    pid = os.getpid()
    _say(f"mode ack seq={seq} mode={mode} gate={gate}")
    _write_atomic(f"{path}.ack.{pid}",
                  json.dumps({"seq": seq, "mode": mode, "gate": gate, "pid": pid}))


def _apply(path: str, seq: int, mode: str) -> None:
    _install_controlled_gate(importlib.import_module(POLICY_MODULE))
    gate = _evaluate(mode)
    _STATE.gate = gate              # gate before mode: _controlled_gate reads mode first
    _STATE.mode = mode
    _STATE.seq = seq
    _ack(path, seq, mode, gate)


def _note(message: str) -> None:
    """Print a watcher problem once (not every poll)."""
    if message != _STATE.last_note:
        _STATE.last_note = message
        _say(message)


def _step(scheduler: Any, path: str) -> None:
    wanted = _read_control(path)
    if wanted is None or wanted[0] == _STATE.seq:
        return
    seq, mode = wanted
    if mode not in MODES:
        _note(f"mode control: ignoring seq={seq}: unknown mode {mode!r}")
        return
    if _idle(scheduler):
        _apply(path, seq, mode)


def _watch(scheduler: Any, path: str) -> None:
    while True:
        time.sleep(POLL_S)
        try:
            _step(scheduler, path)
        except Exception as err:        # keep watching; servegate's timeout names this pid
            _note(f"mode control error: {type(err).__name__}: {err}")


def _start_mode_control(scheduler: Any) -> None:
    """Apply and acknowledge the control file's mode (seq 0 at launch) before the event loop
    starts, then watch it from a daemon thread (an idle scheduler builds no PrefillAdder, so
    nothing else would notice a change)."""
    path = os.environ.get(MODE_CONTROL_ENV)
    if not path or _STATE.watching:
        return
    _STATE.watching = True
    try:
        _step(scheduler, path)
    except Exception as err:
        _note(f"mode control error: {type(err).__name__}: {err}")
    if _STATE.seq is None:
        _note(f"mode control: nothing applied yet from {path}; watching")
    threading.Thread(target=_watch, args=(scheduler, path), name="servegate-mode-control",
                     daemon=True).start()


def _patch_scheduler_init(scheduler: Any) -> None:
    real_init = scheduler.__init__

    @functools.wraps(real_init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        _start_mode_control(self)

    scheduler.__init__ = __init__


PATCHES: dict[str, Callable[[Any], None]] = {
    POLICY_MODULE: _patch_policy,
    SCHEDULER_MODULE: _patch_scheduler,
    LINEAR_MODULE: _patch_linear,
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
        EMULATE_ARCH_ENV,
        "SERVEGATE_INJECT_DELAY_MS", "SERVEGATE_INJECT_DECODE_DELAY_MS", GEMM_DELAY_ENV,
        MODE_CONTROL_ENV))


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
