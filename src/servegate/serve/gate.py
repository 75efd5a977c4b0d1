"""Is exact fill's gate open on a runner class? Read from the sglang tree under test.

Why: which devices the gate accepts is the code under test's decision, so a class's ``on`` cell
is a claim cell (the gate opens) or a no-op cell (it stays closed) by what the tree's own gate
answers on the class's device, emulated by servegate's device double
(``hooks/exactfill/servegate_device_double.py``)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
from dataclasses import dataclass
from functools import cache
from types import ModuleType
from typing import Any

from servegate.core import runner_classes
from servegate.core.errors import ServegateError
from servegate.serve.launch import EXACTFILL_HOOK_DIR
from servegate.serve.trees import SglangTree

DOUBLE_FILE = EXACTFILL_HOOK_DIR / "servegate_device_double.py"
_TIMEOUT_S = 600
# hook variables a gate probe must not inherit (they would patch the gate it reads)
_HOOK_ENV = ("SERVEGATE_FORCE_EXACT_FILL", "SERVEGATE_REPORT_EXACT_FILL", "SERVEGATE_EMULATE_GFX95",
             "SERVEGATE_EMULATE_ARCH", "SERVEGATE_MODE_CONTROL", "SERVEGATE_INJECT_DELAY_MS",
             "SERVEGATE_INJECT_DECODE_DELAY_MS", "SGLANG_EXACT_CHUNK_FILL")


class GateError(ServegateError, RuntimeError):
    """The tree's gate could not be evaluated; the message names the tree and the device."""


@dataclass(frozen=True)
class GateReading:
    """One tree's gate on one runner entry's device."""

    runner: str             # the class (or architecture) asked about
    device_arch: str        # what the device double emulated
    gate_open: bool
    has_gate: bool          # the tree defines _use_exact_chunk_fill (sglang >= 0.5.20)

    def record(self) -> dict[str, Any]:
        return {"runner": self.runner, "device_arch": self.device_arch,
                "gate_open": self.gate_open, "has_gate": self.has_gate}


@cache
def device_double() -> ModuleType:
    """The device double module, loaded from the hook folder (it imports nothing of servegate)."""
    spec = importlib.util.spec_from_file_location("servegate_device_double", DOUBLE_FILE)
    if spec is None or spec.loader is None:
        raise GateError(f"{DOUBLE_FILE}: cannot load servegate's device double")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_loaded(policy: ModuleType, runner: str) -> GateReading:
    """The gate of an imported ``schedule_policy`` on ``runner``'s device, as mode ``on`` sets
    the env (restored afterwards)."""
    device = runner_classes.device_arch(runner)
    gate = getattr(policy, "_use_exact_chunk_fill", None)
    if gate is None:
        return GateReading(runner, device, False, has_gate=False)
    name = device_double().EXACT_FILL_ENV
    previous = os.environ.get(name)
    os.environ[name] = "1"
    try:
        return GateReading(runner, device, device_double().evaluate(gate, device), has_gate=True)
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def read_tree(python: str, tree: SglangTree | None, runners: list[str]) -> dict[str, GateReading]:
    """Each runner's gate in ``tree`` (None: the sglang ``python`` imports), evaluated in a child
    of ``python`` with the tree first on its import path (what the servers will import)."""
    devices = {runner: runner_classes.device_arch(runner) for runner in runners}
    env = {k: v for k, v in os.environ.items() if k not in _HOOK_ENV}
    if tree is not None:
        env["PYTHONPATH"] = tree.pythonpath(env=env)
    where = f"{tree.flag} {tree.path}" if tree is not None else f"the sglang of {python}"
    try:
        proc = subprocess.run([python, str(DOUBLE_FILE), *sorted(set(devices.values()))],
                              capture_output=True, text=True, env=env, timeout=_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise GateError(f"{where}: evaluating the exact-fill gate: {err}") from err
    if proc.returncode != 0:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        raise GateError(f"{where}: evaluating the exact-fill gate on "
                        f"{', '.join(sorted(set(devices.values())))} failed (exit "
                        f"{proc.returncode}): {tail}")
    try:
        found = json.loads(proc.stdout.strip().splitlines()[-1])
        gates = found["gates"]
        return {runner: GateReading(runner, device, bool(gates[device]), bool(found["has_gate"]))
                for runner, device in devices.items()}
    except (ValueError, KeyError, IndexError, TypeError) as err:
        raise GateError(f"{where}: the gate probe printed no gate per device "
                        f"({proc.stdout[-300:]!r})") from err


def on_cell(gate_open: bool) -> str:
    """What an ``on`` cell must show: ``claim`` (the gate opens) or ``no-op`` (it stays closed)."""
    return "claim" if gate_open else "no-op"
