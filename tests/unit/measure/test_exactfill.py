"""``check_block_effective``: one block of a mode-switched server, judged from the schedulers'
acknowledgements and the block's prefill batches (real CPU server logs, ``tests/data``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servegate.measure import logparse
from servegate.measure.exactfill import ExactFillMismatch, check_block_effective
from servegate.results import Alignment
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
    with pytest.raises(ExactFillMismatch, match="saturated prefill batches are exactly 256"):
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
