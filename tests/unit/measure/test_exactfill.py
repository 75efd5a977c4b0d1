"""``check_block_effective``: one block of a mode-switched server, judged from the schedulers'
acknowledgements and the block's prefill batches (real CPU server logs, ``tests/data``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servegate.core.results import Alignment
from servegate.measure import logparse
from servegate.measure.exactfill import (
    ExactFillMismatch,
    check_block_effective,
    check_effective,
    device_double,
)
from servegate.serve.modeswitch import Ack


def _alignment(test_data: Path, name: str) -> Alignment:
    text = (test_data / "sglang-cpu-logs" / f"{name}.log").read_text()
    return logparse.alignment(logparse.parse_prefill_lines(text)[2:], 256)


@pytest.fixture
def aligned(test_data: Path) -> Alignment:
    """Forced server: every saturated batch at 256."""
    return _alignment(test_data, "srv64x")


@pytest.fixture
def not_aligned(test_data: Path) -> Alignment:
    """Off server: saturated batches of 236 among the 256s."""
    return _alignment(test_data, "srv64")


def _acks(mode: str, gate: bool, seq: int = 1, pids: tuple[int, ...] = (11, 12)) -> list[Ack]:
    return [Ack(seq, mode, gate, pid) for pid in pids]


def test_the_fixtures_are_what_they_say(aligned: Alignment, not_aligned: Alignment) -> None:
    assert aligned["saturated_batches"] and aligned["aligned_fraction"] == 1.0
    assert not_aligned["saturated_batches"] and not_aligned["aligned_fraction"] < 1.0


@pytest.mark.parametrize(("mode", "runner", "gate"), [
    ("off", "cpu", False), ("on", "cpu", False), ("forced", "cpu", True),
    ("off", "mi355x", False), ("on", "mi355x", True), ("on", "cpu-gfx95", True),
    ("on", "mi325x", False), ("on", "h100", False), ("forced", "mi300x", True)])
def test_gate_as_the_mode_and_runner_class_imply(mode: str, runner: str, gate: bool,
                                                 aligned: Alignment) -> None:
    assert check_block_effective(mode, runner, _acks(mode, gate), aligned) is gate


@pytest.mark.parametrize(("mode", "runner", "gate", "expected"), [
    ("off", "cpu", True, "inactive"), ("on", "cpu", True, "inactive"),
    ("on", "mi355x", False, "effective"), ("forced", "cpu", False, "effective")])
def test_a_contradicting_gate_is_a_mismatch(mode: str, runner: str, gate: bool, expected: str,
                                            aligned: Alignment) -> None:
    with pytest.raises(ExactFillMismatch, match=f"mode {mode} on runner {runner}: exact fill "
                                                f"expected {expected}, but the schedulers "
                                                f"acknowledged gate={gate}"):
        check_block_effective(mode, runner, _acks(mode, gate), aligned)


def test_effective_needs_every_saturated_batch_at_the_chunk(not_aligned: Alignment) -> None:
    assert check_block_effective("off", "cpu", _acks("off", False), not_aligned) is False
    with pytest.raises(ExactFillMismatch, match=r"^mode forced: exact fill is on, but only "):
        check_block_effective("forced", "cpu", _acks("forced", True), not_aligned)


def test_pids_must_agree(aligned: Alignment) -> None:
    split = [Ack(1, "on", True, 11), Ack(1, "on", False, 12)]
    with pytest.raises(ExactFillMismatch, match=r"disagree on the gate \(\{11: True, 12: False\}"):
        check_block_effective("on", "mi355x", split, aligned)
    with pytest.raises(ExactFillMismatch, match=r"pids \[12\] acknowledged \['off'\]"):
        check_block_effective("forced", "cpu", [Ack(1, "forced", True, 11),
                                                Ack(1, "off", False, 12)], aligned)
    with pytest.raises(ExactFillMismatch, match=r"different switches \(seqs \[1, 2\]\)"):
        check_block_effective("forced", "cpu", [Ack(1, "forced", True, 11),
                                                Ack(2, "forced", True, 12)], aligned)
    with pytest.raises(ExactFillMismatch, match="no scheduler acknowledged"):
        check_block_effective("off", "cpu", [], aligned)


def test_each_pids_latest_ack_is_the_blocks(aligned: Alignment) -> None:
    """A slice from the server's start holds seq 0 too: the latest per pid counts."""
    acks = [*_acks("off", False, seq=0), *_acks("forced", True, seq=1)]
    assert check_block_effective("forced", "cpu", acks, aligned) is True
    with pytest.raises(ExactFillMismatch, match="acknowledged"):
        check_block_effective("off", "cpu", acks, aligned)


# The exact-fill read-back across a run's server processes (issue 15).
#
# The hook lines fed to the parser here are printed by servegate's own hook (its code run in a
# fresh interpreter, on a stand-in for sglang's schedule_policy module), so the hook and the parser
# cannot drift apart unnoticed. The expected prefill batches are read out of the log by plain
# string splitting, independently of the parser's regular expression.


def _aligned(saturated: int = 4, fraction: float = 1.0) -> Alignment:
    return Alignment(chunk_size=256, saturated_batches=saturated, aligned_fraction=fraction,
                     min_saturated_tokens=256 if fraction == 1.0 else 200,
                     prefill_tokens=[256] * saturated)


def test_server_processes_reporting_different_gate_values_fail() -> None:
    log = ("servegate-hook: exact chunk fill gate=False in pid 11\n"
           "servegate-hook: exact chunk fill gate=True in pid 12\n")
    for mode, runner in (("off", "cpu"), ("on", "cpu"), ("on", "mi355x"), ("on", "mi300x")):
        with pytest.raises(ExactFillMismatch, match="server processes disagree on the gate"):
            check_effective(mode, runner, log, _aligned(0, 0.0))


def test_processes_agreeing_on_the_gate_pass() -> None:
    log = ("servegate-hook: exact chunk fill gate=True in pid 11\n"
           "servegate-hook: exact chunk fill gate=True in pid 12\n")
    assert check_effective("on", "mi355x", log, _aligned()) is True
    off = log.replace("True", "False")
    assert check_effective("on", "mi300x", off, _aligned(3, 0.5)) is False   # not judged: off


def test_gate_on_where_it_must_be_off_fails() -> None:
    on = "servegate-hook: exact chunk fill gate=True in pid 11\n"
    with pytest.raises(ExactFillMismatch, match="mode off on runner cpu: exact fill expected "
                                                "inactive, but the server's gate is True"):
        check_effective("off", "cpu", on, _aligned())
    with pytest.raises(ExactFillMismatch, match="expected inactive"):
        check_effective("on", "mi300x", on, _aligned())


def test_effective_without_saturated_batches_is_not_misaligned() -> None:
    on = "servegate-hook: exact chunk fill gate=True in pid 11\n"
    assert check_effective("on", "mi355x", on, _aligned(0, 0.0)) is True
    with pytest.raises(ExactFillMismatch, match=r"^mode on: exact fill is on, but only 50% of 3 "
                                                r"saturated prefill batches are exactly 256 "
                                                r"tokens \(smallest 200\)$"):
        check_effective("on", "mi355x", on, _aligned(3, 0.5))


def test_forced_always_expects_exact_fill() -> None:
    from servegate.measure.exactfill import expected_effective

    assert all(expected_effective("forced", r) for r in ("cpu", "mi300x", "h200", "mi355x"))
    assert [expected_effective("on", r) for r in ("cpu", "mi300x", "mi355x", "cpu-gfx95")] == \
        [False, False, True, True]
    assert not any(expected_effective("off", r) for r in ("cpu", "mi355x"))


def test_forced_without_the_hook_line_says_why() -> None:
    with pytest.raises(ExactFillMismatch) as info:
        check_effective("forced", "cpu", "nothing here\n", _aligned())
    assert str(info.value) == ("mode forced, but the server log has no 'servegate-hook: exact "
                               "chunk fill forced' line (hook not on the server's PYTHONPATH, "
                               "or sglang lacks the gate)")


def test_processes_emulating_different_devices_fail() -> None:
    from servegate.measure.exactfill import device_double

    log = ("servegate-hook: device double: gfx95 emulated (gcnArchName=gfx950:sramecc+) in pid 1\n"
           "servegate-hook: device double: gfx95 emulated (gcnArchName=gfx942) in pid 2\n")
    with pytest.raises(ExactFillMismatch, match="processes emulated different devices"):
        device_double("cpu-gfx95", log)
    same = log.replace("gfx942", "gfx950:sramecc+")
    assert device_double("cpu-gfx95", same) == \
        "gfx95 emulated (gcnArchName=gfx950:sramecc+) in pids [1, 2]"


# Runner class ``cpu-gfx95``: a CPU server whose exact-fill device check sees gfx95.
#
# The one double is servegate's, at sglang's device check (``SERVEGATE_EMULATE_GFX95``, in the
# exact-fill hook); these tests pin what surrounds it: chosen only by name, the profile section
# that sets it, an inherited value never reaching another class's server, the read-back that ties
# every gate report to the double (and forbids the double on real devices), and bench judging the
# suite's in-run claims without a stored baseline. The real-server path is
# ``tests/test_bench_e2e.py::test_cpu_gfx95_suite_end_to_end``; the hook in a real sglang process
# is in ``tests/real_sglang/scheduler/test_hooks.py``.


DOUBLE = "servegate-hook: device double: gfx95 emulated (gcnArchName=gfx950:sramecc+:xnack-)"


def _log(test_data: Path, name: str) -> str:
    return (test_data / "sglang-cpu-logs" / f"{name}.log").read_text()


def test_read_back_ties_the_gate_to_the_double(test_data: Path) -> None:
    forced = _log(test_data, "srv64x")                          # real batches, all at 256
    off = _log(test_data, "srv64")
    aligned = logparse.alignment(logparse.parse_prefill_lines(forced)[2:], 256)
    not_aligned = logparse.alignment(logparse.parse_prefill_lines(off)[2:], 256)
    # the forced log carries the forcing hook's line; strip it for the real-gate modes
    real = forced.replace("servegate-hook: exact chunk fill forced", "servegate-hook: (removed)")
    real = "\n".join(line for line in real.splitlines() if "sitecustomize" not in line)
    on = f"{real}\n{DOUBLE} in pid 41\nservegate-hook: exact chunk fill gate=True in pid 41\n"
    assert check_effective("on", "cpu-gfx95", on, aligned) is True
    assert device_double("cpu-gfx95", on) == \
        "gfx95 emulated (gcnArchName=gfx950:sramecc+:xnack-) in pids [41]"
    gate_off = f"{off}\n{DOUBLE} in pid 7\nservegate-hook: exact chunk fill gate=False in pid 7\n"
    assert check_effective("off", "cpu-gfx95", gate_off, not_aligned) is False
    with pytest.raises(ExactFillMismatch, match="saturated prefill batches are exactly 256"):
        check_effective("on", "cpu-gfx95", gate_off.replace("gate=False", "gate=True"),
                        not_aligned)
    with pytest.raises(ExactFillMismatch, match="no 'servegate-hook: device double' line"):
        check_effective("on", "cpu-gfx95",
                        f"{real}\nservegate-hook: exact chunk fill gate=True in pid 41\n", aligned)
    with pytest.raises(ExactFillMismatch, match=r"evaluated in pids \[42\] without the device"):
        check_effective("on", "cpu-gfx95", on + "servegate-hook: exact chunk fill gate=True in "
                                                "pid 42\n", aligned)
    for real_device in ("mi355x", "cpu"):
        with pytest.raises(ExactFillMismatch, match="is a real device, but the server ran"):
            check_effective("on", real_device, on, aligned)


# Server-log read-back on REAL sglang 0.5.23 CPU logs (tests/data/sglang-cpu-logs, see its README).


def test_exact_fill_read_back(test_data: Path) -> None:
    forced = _log(test_data, "srv64x")
    off = _log(test_data, "srv64")
    stats_forced = logparse.alignment(logparse.parse_prefill_lines(forced)[2:], 256)
    stats_off = logparse.alignment(logparse.parse_prefill_lines(off)[2:], 256)
    assert check_effective("forced", "cpu", forced, stats_forced) is True
    with pytest.raises(ExactFillMismatch, match="no 'servegate-hook: exact chunk fill forced'"):
        check_effective("forced", "mi300x", off, stats_off)
    gate_off = off + "\nservegate-hook: exact chunk fill gate=False in pid 7\n"
    assert check_effective("off", "cpu", gate_off, stats_off) is False
    assert check_effective("on", "mi300x", gate_off, stats_off) is False
    with pytest.raises(ExactFillMismatch, match="mode on on runner mi355x: exact fill expected "
                                                "effective"):
        check_effective("on", "mi355x", gate_off, stats_off)
    gate_on = off + "\nservegate-hook: exact chunk fill gate=True in pid 7\n"
    with pytest.raises(ExactFillMismatch, match="saturated prefill batches are exactly 256"):
        check_effective("on", "mi355x", gate_on, stats_off)
    with pytest.raises(ExactFillMismatch, match="forcing hook ran"):
        check_effective("off", "cpu", forced, stats_forced)
    with pytest.raises(ExactFillMismatch, match="never reported"):
        check_effective("off", "cpu", off, stats_off)


def test_a_saturated_batch_over_the_chunk_fails_a_forced_block() -> None:
    from servegate.measure import logparse

    over = logparse.alignment([logparse.PrefillBatch(1, 256, 0, 0, 5),
                               logparse.PrefillBatch(1, 257, 0, 0, 5)], 256)
    assert check_block_effective("off", "cpu", _acks("off", False), over) is False
    with pytest.raises(ExactFillMismatch, match=r"only 50% of 2 saturated prefill batches are "
                                                r"exactly 256 tokens"):
        check_block_effective("forced", "cpu", _acks("forced", True), over)
