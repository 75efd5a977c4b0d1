"""Server-log read-back on REAL sglang 0.5.23 CPU logs (tests/data/sglang-cpu-logs, see its README)."""

from __future__ import annotations

from pathlib import Path

import pytest

from servegate.measure import logparse
from servegate.measure.exactfill import ExactFillMismatch, check_effective


def _log(test_data: Path, name: str) -> str:
    return (test_data / "sglang-cpu-logs" / f"{name}.log").read_text()


@pytest.mark.parametrize(("name", "first"), [
    ("srv16", [6, 1, 5, 256, 256, 256, 232, 5, 5, 5, 232, 232]),
    ("srv16x", [6, 1, 256, 256, 88, 256, 256, 256, 232, 256, 256, 256]),
    ("srv64", [6, 1, 200, 200, 200, 256, 256, 256, 232, 200, 200, 200]),
    ("srv64x", [6, 1, 256, 256, 88, 256, 256, 256, 232, 256, 256, 256]),
])
def test_prefill_new_tokens_match_the_documented_sequence(test_data: Path, name: str,
                                                          first: list[int]) -> None:
    batches = logparse.parse_prefill_lines(_log(test_data, name))
    assert [b.new_tokens for b in batches[:12]] == first


def test_off_page64_has_saturated_batches_below_chunk(test_data: Path) -> None:
    # Skip the warm-up (6) and /health (1) prefills, as the flush marker does for real runs.
    batches = logparse.parse_prefill_lines(_log(test_data, "srv64"))[2:]
    stats = logparse.alignment(batches, 256)
    assert stats["saturated_batches"] > 0
    assert stats["aligned_fraction"] < 1.0
    assert stats["min_saturated_tokens"] == 200
    assert stats["prefill_tokens"][:3] == [200, 200, 200]


@pytest.mark.parametrize("name", ["srv16x", "srv64x"])
def test_forced_logs_all_saturated_batches_at_chunk(test_data: Path, name: str) -> None:
    text = _log(test_data, name)
    stats = logparse.alignment(logparse.parse_prefill_lines(text)[2:], 256)
    assert stats["saturated_batches"] >= 10
    assert stats["aligned_fraction"] == 1.0
    assert stats["min_saturated_tokens"] == 256
    assert len(logparse.forced_hook_pids(text)) >= 2     # launcher + spawned scheduler


def test_queue_alone_is_not_saturation(test_data: Path) -> None:
    # srv64x has a 38-token batch with a just-arrived queued request and 0 pending tokens.
    batches = logparse.parse_prefill_lines(_log(test_data, "srv64x"))
    odd = [b for b in batches if b.new_tokens == 38 and b.queue_req > 0]
    assert odd and not any(b.saturated for b in odd)


def test_off_logs_carry_no_forcing_hook(test_data: Path) -> None:
    assert logparse.forced_hook_pids(_log(test_data, "srv64")) == set()


def test_measured_slice_starts_after_the_flush(test_data: Path, tmp_path: Path) -> None:
    log = test_data / "sglang-cpu-logs" / "srv64x.log"
    text = logparse.measured_text(log, 0)
    assert logparse.FLUSHED not in text
    batches = logparse.parse_prefill_lines(text)
    assert batches and all(b.new_tokens != 6 for b in batches[:1])
    no_flush = tmp_path / "server.log"
    no_flush.write_text(_log(test_data, "srv64").split(logparse.FLUSHED)[0])
    with pytest.raises(logparse.LogParseError, match=r"server\.log: no 'Cache flushed"):
        logparse.measured_text(no_flush, 0)


def test_byte_offset_excludes_earlier_batches(test_data: Path) -> None:
    log = test_data / "sglang-cpu-logs" / "srv64.log"
    raw = log.read_bytes()
    offset = raw.index(b"#new-token: 232")          # start the point just before a batch
    offset = raw.rindex(b"\n", 0, offset) + 1
    batches = logparse.parse_prefill_lines(logparse.read_slice(log, offset))
    assert batches[0].new_tokens == 232
    assert len(batches) < len(logparse.parse_prefill_lines(raw.decode()))


def test_gpu_label_and_iteration_tag_parse() -> None:
    line = ("[2026-11-30 11:00:34 TP0] Prefill batch [1234], #new-seq: 3, #new-token: 32768, "
            "#cached-token: 0, token usage: 0.21, #running-req: 12, #queue-req: 40, "
            "#pending-token: 300000, cuda graph: False, input throughput (token/s): 1.0")
    (batch,) = logparse.parse_prefill_lines(line)
    assert (batch.new_seq, batch.new_tokens, batch.queue_req) == (3, 32768, 40)
    assert batch.saturated


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
