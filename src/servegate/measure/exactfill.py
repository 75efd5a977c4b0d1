"""Was exact fill really in effect? Read back from the server instead of trusting the mode: the
hook's lines, the device double's line, the measured prefill batches and the mode switch's
acknowledgements (docs/serve.md, Modes and the read-back); any disagreement with what the mode
and runner class imply is an error, never a silent pass."""

from __future__ import annotations

from servegate.core import runner_classes
from servegate.core.errors import ServegateError
from servegate.core.results import Alignment
from servegate.measure.logparse import (
    device_doubles,
    forced_hook_pids,
    gate_pids,
    gate_values,
    mode_acks,
)
from servegate.serve.modeswitch import Ack


class ExactFillMismatch(ServegateError, RuntimeError):
    """What the server did differs from what the mode asked for."""


def expected_effective(mode: str, runner_class: str, gate_open: bool | None = None) -> bool:
    """forced: always; on: where the tree's gate is open on the runner class (``gate_open``, read
    from the tree by servegate.serve.gate; None: released sglang's, the registry's ``gated``)."""
    if gate_open is None:
        gate_open = runner_classes.get(runner_class).gated
    return mode == "forced" or (mode == "on" and gate_open)


def device_double(runner_class: str, server_log_text: str) -> str | None:
    """What the device double emulated in this server (``None`` when it did not run); raises
    ExactFillMismatch when that contradicts the runner class."""
    doubles = device_doubles(server_log_text)
    emulated = runner_classes.get(runner_class).emulated
    if not emulated:
        if doubles:
            raise ExactFillMismatch(f"runner {runner_class} is a real device, but the server ran "
                                    f"servegate's device double in pids {sorted(doubles)} "
                                    f"(SERVEGATE_EMULATE_ARCH or SERVEGATE_EMULATE_GFX95 set?)")
        return None
    if not doubles:
        raise ExactFillMismatch(f"runner {runner_class} is emulated, but the server log has no "
                                f"'servegate-hook: device double' line (the profile section must "
                                f"set SERVEGATE_EMULATE_ARCH or SERVEGATE_EMULATE_GFX95=1)")
    # the processes that evaluated the gate: its report lines, or under the mode switch the
    # schedulers that acknowledged a mode (they evaluate the real gate at every switch)
    deciding = gate_pids(server_log_text) | {ack.pid for ack in mode_acks(server_log_text)}
    missing = sorted(deciding - set(doubles))
    if missing:
        raise ExactFillMismatch(f"runner {runner_class}: the gate was evaluated in pids {missing} "
                                f"without the device double")
    kinds = sorted(set(doubles.values()))
    if len(kinds) > 1:
        raise ExactFillMismatch(f"runner {runner_class}: processes emulated different devices "
                                f"{kinds}")
    return f"{kinds[0]} in pids {sorted(doubles)}"


def _require_aligned(mode: str, effective: bool, alignment: Alignment) -> None:
    """With exact fill on, every saturated prefill batch must be exactly the chunk."""
    if effective and alignment["saturated_batches"] and alignment["aligned_fraction"] < 1.0:
        raise ExactFillMismatch(
            f"mode {mode}: exact fill is on, but only {alignment['aligned_fraction']:.0%} of "
            f"{alignment['saturated_batches']} saturated prefill batches are exactly "
            f"{alignment['chunk_size']} tokens (smallest {alignment['min_saturated_tokens']})")


def check_effective(mode: str, runner_class: str, server_log_text: str,
                    alignment: Alignment, gate_open: bool | None = None) -> bool:
    """Return whether exact fill was effective; raise ExactFillMismatch on any contradiction
    (``gate_open``: the tree's gate on this class, as :func:`expected_effective` takes it)."""
    device_double(runner_class, server_log_text)
    forced_pids = forced_hook_pids(server_log_text)
    gates = gate_values(server_log_text)
    expected = expected_effective(mode, runner_class, gate_open)
    if mode == "forced":
        if not forced_pids:
            raise ExactFillMismatch("mode forced, but the server log has no "
                                    "'servegate-hook: exact chunk fill forced' line (hook not "
                                    "on the server's PYTHONPATH, or sglang lacks the gate)")
        effective = True
    else:
        if forced_pids:
            raise ExactFillMismatch(f"mode {mode}, but the forcing hook ran in pids "
                                    f"{sorted(forced_pids)}")
        if not gates:
            raise ExactFillMismatch(f"mode {mode}: the server never reported its exact-fill "
                                    f"gate (no 'servegate-hook: exact chunk fill gate=' line; "
                                    f"does this sglang have _use_exact_chunk_fill?)")
        if len(gates) > 1:
            raise ExactFillMismatch(f"mode {mode}: server processes disagree on the gate")
        effective = next(iter(gates))
        if effective != expected:
            raise ExactFillMismatch(
                f"mode {mode} on runner {runner_class}: exact fill expected "
                f"{'effective' if expected else 'inactive'}, but the server's gate is "
                f"{effective}")
    _require_aligned(mode, effective, alignment)
    return effective


def _block_state(mode: str, acks: list[Ack]) -> bool:
    """The gate every scheduler applied for this block (each pid's latest acknowledgement);
    raises when a pid runs another mode, the pids are at different seqs, or gates differ."""
    if not acks:
        raise ExactFillMismatch(f"mode {mode}: no scheduler acknowledged the block's mode "
                                f"switch (no 'servegate-hook: mode ack' line)")
    latest: dict[int, Ack] = {}
    for ack in acks:
        # (">" would pick alike: one acknowledgement per pid and seq; mutmut reads the pragma
        # on the statement's first line)
        if ack.pid not in latest or ack.seq >= latest[ack.pid].seq:  # pragma: no mutate (> alike)
            latest[ack.pid] = ack
    wrong = sorted(pid for pid, a in latest.items() if a.mode != mode)
    if wrong:
        raise ExactFillMismatch(f"mode {mode}: scheduler pids {wrong} acknowledged "
                                f"{sorted({latest[p].mode for p in wrong})}")
    seqs = {a.seq for a in latest.values()}
    if len(seqs) > 1:
        raise ExactFillMismatch(f"mode {mode}: scheduler processes are at different switches "
                                f"(seqs {sorted(seqs)})")
    gates = {pid: a.gate for pid, a in sorted(latest.items())}
    if len(set(gates.values())) > 1:
        raise ExactFillMismatch(f"mode {mode}: scheduler processes disagree on the gate "
                                f"({gates})")
    return next(iter(gates.values()))


def check_block_effective(mode: str, runner_class: str, acks: list[Ack],
                          alignment: Alignment, gate_open: bool | None = None) -> bool:
    """One block of a mode-switched server: whether exact fill was effective, read back from the
    schedulers' acknowledgements; raises ExactFillMismatch when a gate contradicts the mode and
    runner class (on: effective only where the tree's gate is open on the class; forced:
    always; off: never), when the pids disagree, or when exact fill was on but a saturated batch was not
    exactly the chunk."""
    effective = _block_state(mode, acks)
    expected = expected_effective(mode, runner_class, gate_open)
    if effective != expected:
        raise ExactFillMismatch(
            f"mode {mode} on runner {runner_class}: exact fill expected "
            f"{'effective' if expected else 'inactive'}, but the schedulers acknowledged "
            f"gate={effective}")
    _require_aligned(mode, effective, alignment)
    return effective
