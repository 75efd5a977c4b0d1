"""The mode switch's server half in real interpreters: sglang's real ``schedule_policy`` and
``scheduler`` imported through the exact-fill hook, driven by servegate's ``ModeControl``.

The one stand-in (named so): ``IdleScheduler``, an object with the real ``Scheduler``'s idle
attributes (``waiting_queue``, ``running_batch`` as a real ``ScheduleBatch``, ``chunked_req``,
``last_batch``); a real ``Scheduler`` needs a loaded model, which the e2e test
(``test_mode_switch_e2e.py``) has. Everything the gate is made of is real: the lru_cached
``_use_exact_chunk_fill``, ``SGLANG_EXACT_CHUNK_FILL`` read by sglang's ``EnvBool``, and a real
``PrefillAdder`` (built on the admission suite's real KV pool and radix cache) whose
``exact_chunk_fill`` shows what the next batch would get.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from repo_files import REPO_ROOT

from servegate.measure.logparse import mode_acks
from servegate.serve.launch import EXACTFILL_HOOK_DIR
from servegate.serve.modeswitch import Ack, ModeControl, ModeSwitchError

SRC = REPO_ROOT / "src"

CHILD = """
import inspect, os, sys, time, types
import sglang.srt.managers.schedule_policy as sp
from sglang.srt.managers.schedule_batch import ScheduleBatch
from sglang.srt.managers.scheduler import Scheduler
import sitecustomize as hook

class IdleScheduler:
    def __init__(self):
        self.waiting_queue = []
        self.running_batch = ScheduleBatch(reqs=[], batch_is_full=False)
        self.chunked_req = None
        self.last_batch = None

def adder():
    if not WITH_ADDER:
        return None
    running = sg.batch.ScheduleBatch(reqs=[], batch_is_full=False)
    return sg.policy.PrefillAdder(64, pools.tree, pools.allocator, running, 0.7, 16384,
                                  256).exact_chunk_fill

class Mode:
    def __init__(self, extend): self.extend = extend
    def is_extend(self): return self.extend
    def is_decode(self): return not self.extend

def run_prefill():
    started = time.monotonic()
    try:
        Scheduler.run_batch(None, types.SimpleNamespace(forward_mode=Mode(True)))
    except Exception:
        pass
    return round(time.monotonic() - started, 3)

WITH_ADDER = os.environ.get("TEST_WITH_ADDER") == "1"
if WITH_ADDER:
    from servegate.admission.replay import CPU_SERVER_ARGS, Pools, load_sglang
    from servegate.admission.scenario import Scenario
    sg = load_sglang()
    sg.get_context().override_server_args(page_size=64, device="cpu", chunked_prefill_size=256,
                                          **CPU_SERVER_ARGS).install()
    pools = Pools(sg, Scenario(page_size=64, chunk_size=256, prompts=()), 256, 1)

scheduler = IdleScheduler()
hook._start_mode_control(scheduler)
real = hook._STATE.real_gate
print("ready", sp._use_exact_chunk_fill is hook._controlled_gate,
      hasattr(real, "cache_clear"), inspect.unwrap(real).__code__.co_filename.rsplit("/", 1)[-1],
      flush=True)
for line in sys.stdin:
    command = line.strip()
    if command == "probe":
        print("gate", sp._use_exact_chunk_fill(), "adder", adder(), "env",
              os.environ.get("SGLANG_EXACT_CHUNK_FILL"), "device", sp.is_gfx95_supported(),
              flush=True)
    elif command == "busy":
        scheduler.waiting_queue.append(object())
        print("ok", flush=True)
    elif command == "idle":
        scheduler.waiting_queue.clear()
        print("ok", flush=True)
    elif command == "run":
        print("slept", run_prefill(), flush=True)
"""


class Child:
    """The interpreter under test, answering one line per command on stdout."""

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.log = tmp_path / "server.log"
        full = {**os.environ, **env,
                "PYTHONPATH": os.pathsep.join([str(EXACTFILL_HOOK_DIR), str(SRC)])}
        for name in list(full):
            if name.startswith("SERVEGATE_") and name not in env:
                full.pop(name)
        self._stderr = open(self.log, "w")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD], env=full, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr)

    def read(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"child exited: {self.proc.poll()}\n{self.log.read_text()[-3000:]}"
        return line.strip()

    def ask(self, command: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.read()

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._stderr.close()


Start = Callable[[dict[str, str]], Child]


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Start]:
    children: list[Child] = []

    def _start(env: dict[str, str]) -> Child:
        child = Child(tmp_path, env)
        children.append(child)
        return child

    yield _start
    for child in children:
        child.stop()


@pytest.mark.sglang
def test_gate_follows_the_control_file(tmp_path: Path, start: Start) -> None:
    """off -> forced -> on -> off in one process: the env var sglang reads, the real gate (its
    lru_cache cleared) and a real PrefillAdder follow each switch; each is acknowledged once."""
    control = ModeControl(tmp_path / "control.json")
    control.write("off", 0)
    # what build_launch sets for a first mode: SERVEGATE_REPORT_EXACT_FILL is superseded
    child = start({**control.env(), "SERVEGATE_REPORT_EXACT_FILL": "1", "SERVEGATE_MODE": "off",
                   "SGLANG_EXACT_CHUNK_FILL": "0", "TEST_WITH_ADDER": "1"})
    assert child.read() == "ready True True schedule_policy.py"
    pid = child.proc.pid
    assert control.register(expected=1, timeout_s=60) == {pid: Ack(0, "off", False, pid)}
    assert control.pids == (pid,)
    assert child.ask("probe") == "gate False adder False env 0 device False"
    expected = [("forced", True, "1"), ("on", False, "1"), ("off", False, "0")]
    for seq, (mode, gate, env) in enumerate(expected, start=1):
        started = time.monotonic()
        assert control.switch(mode, timeout_s=30) == {pid: Ack(seq, mode, gate, pid)}
        assert time.monotonic() - started < 2.0         # polled every ~25 ms
        assert control.seq == seq and control.mode == mode
        assert child.ask("probe") == f"gate {gate} adder {gate} env {env} device False"
    log = child.log.read_text()
    assert mode_acks(log) == [Ack(0, "off", False, pid), Ack(1, "forced", True, pid),
                              Ack(2, "on", False, pid), Ack(3, "off", False, pid)]
    assert f"servegate-hook: mode ack seq=1 mode=forced gate=True in pid {pid}\n" in log
    assert "exact chunk fill gate=" not in log and "exact chunk fill forced" not in log


@pytest.mark.sglang
def test_device_double_idle_rule_and_scoped_injection(tmp_path: Path, start: Start) -> None:
    """With the gfx95 device double `on` opens the real gate; a switch waits while the scheduler
    has a waiting request; SERVEGATE_INJECT_MODES=forced sleeps only in forced."""
    control = ModeControl(tmp_path / "control.json")
    control.write("off", 0)
    child = start({**control.env(), "SERVEGATE_EMULATE_GFX95": "1",
                   "SERVEGATE_INJECT_DELAY_MS": "300", "SERVEGATE_INJECT_MODES": "forced"})
    assert child.read().startswith("ready True True")
    pid = child.proc.pid
    control.register(expected=None, timeout_s=60)
    assert control.pids == (pid,)
    assert float(child.ask("run").split()[1]) < 0.3            # off: no delay
    assert control.switch("on")[pid].gate is True               # the real gate, emulated device
    # the gate saw the emulated device; schedule_policy's own device check still sees the CPU
    assert child.ask("probe") == "gate True adder None env 1 device False"

    assert child.ask("busy") == "ok"
    with pytest.raises(ModeSwitchError) as info:
        control.switch("forced", timeout_s=1.0)
    message = str(info.value)
    assert f"seq 2 (mode forced) not acknowledged within 1 s by scheduler pids [{pid}]" in message
    assert "seq=1 mode=on" in message                            # where it still is
    assert child.ask("probe").startswith("gate True")            # still on's gate
    assert child.ask("idle") == "ok"
    deadline = time.monotonic() + 10
    while control.acks()[pid].seq != 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert control.acks()[pid] == Ack(2, "forced", True, pid)   # applied once idle
    assert float(child.ask("run").split()[1]) >= 0.3            # forced: the injected delay
    assert control.switch("off")[pid] == Ack(3, "off", False, pid)
    log = child.log.read_text()
    assert "servegate-hook: device double: gfx95 emulated (gcnArchName=gfx950:sramecc+:xnack-)" \
        f" in pid {pid}" in log
    assert "injecting delay prefill=300ms decode=0ms modes=forced in pid" in log
    assert [a.mode for a in mode_acks(log)] == ["off", "on", "forced", "off"]
