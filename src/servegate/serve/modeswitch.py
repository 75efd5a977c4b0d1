"""Every exact-fill mode inside one sglang server: servegate's side of the mode-switch protocol
(why, and the protocol: docs/serve.md, Modes inside one server; the server half is the exact-fill
hook). :meth:`ModeControl.switch` waits until every scheduler registered at seq 0 acknowledged
the new seq: TP/PP/DP ranks must flip together, or they would batch the same requests apart."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from servegate.core.atomic import write_text
from servegate.core.errors import ServegateError
from servegate.serve.process import _alive

CONTROL_ENV = "SERVEGATE_MODE_CONTROL"
ACK_INFIX = ".ack."
MODES = ("off", "on", "forced")
POLL_S = 0.02
SETTLE_S = 0.5          # register(expected=None): the set of acknowledging pids is stable this long


class ModeSwitchError(ServegateError, RuntimeError):
    """A mode switch was not acknowledged as asked (names the seq, the mode and the pids)."""


@dataclass(frozen=True)
class Ack:
    """One scheduler process's acknowledgement: it runs ``mode`` from ``seq`` on, gate ``gate``."""

    seq: int
    mode: str
    gate: bool
    pid: int


def _pid_alive(pid: int) -> bool:
    """The process exists (a zombie counts as dead: serve.process's own probe)."""
    return _alive(pid)


def _describe(acks: dict[int, Ack]) -> str:
    if not acks:
        return "none"
    return ", ".join(f"pid {a.pid} seq={a.seq} mode={a.mode} gate={a.gate}"
                     for a in sorted(acks.values(), key=lambda a: a.pid))


class ModeControl:
    """The control file and its acknowledgements for one server (a fresh path per server)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._seq: int | None = None
        self._mode: str | None = None
        self._pids: tuple[int, ...] = ()

    def env(self) -> dict[str, str]:
        """What the server's environment needs (``build_launch(extra_env=...)``)."""
        return {CONTROL_ENV: str(self.path)}

    @property
    def seq(self) -> int:
        if self._seq is None:
            raise ModeSwitchError(f"{self.path}: no mode written yet (write(mode, 0) first)")
        return self._seq

    @property
    def mode(self) -> str:
        if self._mode is None:
            raise ModeSwitchError(f"{self.path}: no mode written yet (write(mode, 0) first)")
        return self._mode

    @property
    def pids(self) -> tuple[int, ...]:
        """The scheduler processes (registered from their seq-0 acknowledgements), sorted."""
        return self._pids

    def write(self, mode: str, seq: int) -> None:
        """Replace the control file atomically. Seq 0 (before the launch) also removes a previous
        server's acknowledgements, so none of them can be taken for this server's."""
        if mode not in MODES:
            raise ModeSwitchError(f"unknown exact-fill mode {mode!r} (expected {MODES})")
        if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
            raise ModeSwitchError(f"mode control seq must be an integer >= 0, not {seq!r}")
        if seq == 0:
            for stale in self._ack_files():
                stale.unlink(missing_ok=True)
        write_text(self.path, json.dumps({"seq": seq, "mode": mode}) + "\n")
        self._seq, self._mode = seq, mode

    def _ack_files(self) -> list[Path]:
        return sorted(self.path.parent.glob(f"{self.path.name}{ACK_INFIX}*"))

    def acks(self) -> dict[int, Ack]:
        """pid -> that process's latest acknowledgement, from the ack files."""
        found: dict[int, Ack] = {}
        for file in self._ack_files():
            ack = _read_ack(file)
            if ack is not None:
                found[ack.pid] = ack
        return found

    def register(self, expected: int | None, timeout_s: float) -> dict[int, Ack]:
        """After the server is ready: the pids that acknowledged seq 0 are its schedulers.

        ``expected`` (tp * pp * dp schedulers) must match exactly when given; without it the set
        must stay unchanged for ``SETTLE_S``."""
        if self.seq != 0:
            raise ModeSwitchError(f"{self.path}: register() belongs before the first switch "
                                  f"(now at seq {self.seq})")
        deadline = time.monotonic() + timeout_s
        mode = self.mode
        stable_since, previous = time.monotonic(), frozenset()
        while True:
            acks = {pid: a for pid, a in self.acks().items() if a.seq == 0}
            wrong = {pid: a for pid, a in acks.items() if a.mode != mode}
            if wrong:
                raise ModeSwitchError(f"seq 0 is mode {mode}, but {_describe(wrong)}")
            if expected is not None and len(acks) > expected:
                raise ModeSwitchError(f"expected {expected} scheduler processes, but "
                                      f"{len(acks)} acknowledged seq 0: {_describe(acks)}")
            now = time.monotonic()
            if frozenset(acks) != previous:
                stable_since, previous = now, frozenset(acks)
            done = (len(acks) == expected if expected is not None
                    else bool(acks) and now - stable_since >= SETTLE_S)
            if done:
                self._pids = tuple(sorted(acks))
                return acks
            if now > deadline:
                wanted = f"{expected} scheduler processes" if expected is not None else \
                    "a scheduler process"
                raise ModeSwitchError(
                    f"{self.path}: expected {wanted} to acknowledge seq 0 (mode {mode}) within "
                    f"{timeout_s:g} s; acknowledged: {_describe(acks)} (is "
                    f"{CONTROL_ENV} in the server's env and the exact-fill hook on its "
                    f"PYTHONPATH?)")
            time.sleep(POLL_S)

    def switch(self, mode: str, timeout_s: float = 60.0) -> dict[int, Ack]:
        """Write seq + 1 with ``mode`` and wait until every registered pid acknowledged it."""
        if not self._pids:
            raise ModeSwitchError(f"{self.path}: no scheduler processes registered "
                                  f"(register() after the server is ready)")
        seq = self.seq + 1
        self.write(mode, seq)
        deadline = time.monotonic() + timeout_s
        while True:
            acks = self.acks()
            current = self._acks_of(acks, seq, mode)
            missing = [pid for pid in self._pids if pid not in current]
            if not missing:
                return current
            gone = [pid for pid in missing if not _pid_alive(pid)]
            if gone:
                raise ModeSwitchError(f"seq {seq} (mode {mode}): scheduler pids {gone} exited "
                                      f"before acknowledging")
            if time.monotonic() > deadline:
                raise ModeSwitchError(
                    f"seq {seq} (mode {mode}) not acknowledged within {timeout_s:g} s by "
                    f"scheduler pids {missing} (of {list(self._pids)}); their last "
                    f"acknowledgements: {_describe({p: acks[p] for p in missing if p in acks})} "
                    f"(a scheduler applies a switch only once it is idle: no waiting or "
                    f"running request)")
            time.sleep(POLL_S)

    def _acks_of(self, acks: dict[int, Ack], seq: int, mode: str) -> dict[int, Ack]:
        """The acknowledgements of ``seq`` so far; raises on a contradiction (another mode, or
        a process that did not register: a restarted scheduler)."""
        current = {pid: a for pid, a in acks.items() if a.seq == seq}
        wrong = {pid: a for pid, a in current.items() if a.mode != mode}
        if wrong:
            raise ModeSwitchError(f"seq {seq} is mode {mode}, but {_describe(wrong)}")
        strangers = {pid: a for pid, a in current.items() if pid not in self._pids}
        if strangers:
            raise ModeSwitchError(f"seq {seq} (mode {mode}) acknowledged by unregistered "
                                  f"processes ({_describe(strangers)}; registered "
                                  f"{list(self._pids)}): did a scheduler restart?")
        return current


def _read_ack(file: Path) -> Ack | None:
    """One ack file (written atomically by the hook); None if it vanished meanwhile."""
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise ModeSwitchError(f"{file}: unreadable acknowledgement: {err}") from None
    ack = _ack_from(data)
    if ack is None:
        raise ModeSwitchError(f"{file}: malformed acknowledgement {data!r}")
    suffix = file.name.rsplit(ACK_INFIX, 1)[-1]
    if suffix != str(ack.pid):
        raise ModeSwitchError(f"{file}: acknowledgement names pid {ack.pid}")
    return ack


def _ack_from(data: object) -> Ack | None:
    """Strict: ints are ints and the gate is a JSON boolean (``bool("False")`` would be True)."""
    if not isinstance(data, dict):
        return None
    seq, mode, gate, pid = data.get("seq"), data.get("mode"), data.get("gate"), data.get("pid")
    if (isinstance(seq, int) and not isinstance(seq, bool) and isinstance(pid, int)
            and not isinstance(pid, bool) and isinstance(mode, str) and isinstance(gate, bool)):
        return Ack(seq=seq, mode=mode, gate=gate, pid=pid)
    return None
