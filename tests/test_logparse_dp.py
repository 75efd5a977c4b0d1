"""DP attention: every DP rank's scheduler logs its own prefill lines; each has chunk // attn_dp.

The inputs are REAL prefill lines from sglang 0.5.23 CPU servers (tests/data/sglang-cpu-logs, one
rank, no prefix), re-tagged the way sglang tags a DP rank's lines:

- the prefix: ``configure_scheduler_process`` (sglang/srt/managers/scheduler.py lines 6279-6291)
  builds ``" DP{dp_rank}"`` when the rank has a DP rank, then ``" TP{tp_rank}"`` when
  ``tp_size > 1`` (PP / ATTN_CP / MOE_DP / EP only when those sizes are > 1);
- the format: ``configure_logger`` (sglang/srt/utils/common.py lines 2629-2630) puts it inside
  the stamp: ``[%(asctime)s{prefix}] %(message)s``;
- only each DP group's attention-TP rank 0 logs (``is_stats_logging_rank``,
  sglang/srt/observability/metrics_collector.py lines 1361-1363), so with ``--tp 4
  --attn-dp-size 2`` the two streams are ``DP0 TP0`` and ``DP1 TP2``.

The sglang-marked tests format a real line through sglang's own ``configure_logger`` and check
the launch argv's attention-DP size against sglang's own ``ServerArgs`` resolution.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from servegate.measure import logparse
from servegate.serve.launch import dp_attention_size

STAMP = re.compile(r"^\[(?P<stamp>[^\]]+)\] (?P<message>Prefill batch.*)$")


def _measured_lines(test_data: Path, name: str) -> list[tuple[str, str]]:
    """(stamp, message) of the real log's prefill lines after its start-up warm-up (2 lines)."""
    text = (test_data / "sglang-cpu-logs" / f"{name}.log").read_text()
    found = [(m["stamp"], m["message"]) for line in text.splitlines()
             if (m := STAMP.match(line))]
    assert len(found) > 10, f"{name}: expected real prefill lines"
    return found[2:]


def _tag(stamp: str, message: str, dp: int, tp: int) -> str:
    """sglang's form for a DP rank's line (--tp > 1): ``[stamp DP<dp> TP<tp>] message``."""
    return f"[{stamp} DP{dp} TP{tp}] {message}"


def _two_ranks(test_data: Path) -> tuple[str, list[str], list[str]]:
    """Rank 0 (DP0 TP0) serves the forced log's batches, rank 1 (DP1 TP2) the off log's,
    interleaved line by line as two schedulers writing to one server log do."""
    forced = _measured_lines(test_data, "srv64x")
    off = _measured_lines(test_data, "srv64")
    lines: list[str] = []
    for i in range(max(len(forced), len(off))):
        if i < len(forced):
            lines.append(_tag(*forced[i], dp=0, tp=0))
        if i < len(off):
            lines.append(_tag(*off[i], dp=1, tp=2))
    return "\n".join(lines) + "\n", [m for _s, m in forced], [m for _s, m in off]


def _tokens(messages: list[str]) -> list[int]:
    return [b.new_tokens for b in logparse.parse_prefill_lines("\n".join(messages))]


def test_each_dp_rank_is_its_own_stream(test_data: Path) -> None:
    text, forced, off = _two_ranks(test_data)
    batches = logparse.parse_prefill_lines(text)
    assert {b.dp_rank for b in batches} == {0, 1}
    assert [b.new_tokens for b in batches if b.dp_rank == 0] == _tokens(forced)
    assert [b.new_tokens for b in batches if b.dp_rank == 1] == _tokens(off)


def test_alignment_per_rank_against_chunk_over_dp(test_data: Path) -> None:
    """--chunked-prefill-size 512 with 2 attention-DP ranks: each rank's chunk is 256 (the real
    logs' chunk), so the forced rank aligns in full and the off rank does not."""
    text, forced, off = _two_ranks(test_data)
    stats = logparse.alignment(logparse.parse_prefill_lines(text), 512, dp_attention_size=2)
    assert stats["chunk_size"] == 256 and stats["configured_chunk_size"] == 512
    assert stats["dp_attention_size"] == 2
    rank0, rank1 = stats["per_rank"]["0"], stats["per_rank"]["1"]
    one0 = logparse.alignment(logparse.parse_prefill_lines("\n".join(forced)), 256)
    one1 = logparse.alignment(logparse.parse_prefill_lines("\n".join(off)), 256)
    assert rank0["aligned_fraction"] == one0["aligned_fraction"] == 1.0
    assert rank1["aligned_fraction"] == one1["aligned_fraction"] < 1.0
    assert rank1["min_saturated_tokens"] == one1["min_saturated_tokens"] < 256
    assert stats["saturated_batches"] == one0["saturated_batches"] + one1["saturated_batches"]
    aligned = one0["saturated_batches"] + round(one1["aligned_fraction"] * one1["saturated_batches"])
    assert stats["aligned_fraction"] == pytest.approx(aligned / stats["saturated_batches"])
    # prefill_tokens: rank 0's own sequence, then rank 1's (never the timing-dependent interleave)
    assert stats["prefill_tokens"] == _tokens(forced) + _tokens(off)


def test_undivided_chunk_would_misjudge_every_rank(test_data: Path) -> None:
    """Judged against the configured 512 (what the parser did before), no batch aligns."""
    text, _forced, _off = _two_ranks(test_data)
    stats = logparse.alignment(logparse.parse_prefill_lines(text), 512)   # plain replicas
    assert stats["chunk_size"] == 512 and stats["aligned_fraction"] == 0.0
    assert set(stats["per_rank"]) == {"0", "1"}


def test_dp_layout_contradictions_are_errors(test_data: Path) -> None:
    text, forced, _off = _two_ranks(test_data)
    batches = logparse.parse_prefill_lines(text)
    with pytest.raises(logparse.LogParseError, match="no prefill line carries a DP rank tag"):
        logparse.alignment(logparse.parse_prefill_lines("\n".join(forced)), 512, 2)
    with pytest.raises(logparse.LogParseError, match=r"DP ranks \[2\], but the attention DP "
                                                     r"size is 2"):
        logparse.alignment([*batches, *logparse.parse_prefill_lines(
            f"[2026-11-30 11:06:02 DP2 TP4] {forced[0]}")], 768, dp_attention_size=2)
    mixed = text + forced[0] + "\n"
    with pytest.raises(logparse.LogParseError, match="mix DP-tagged and untagged"):
        logparse.alignment(logparse.parse_prefill_lines(mixed), 512, 2)
    with pytest.raises(logparse.LogParseError, match="cannot be divided"):
        logparse.alignment(batches, 500, 3)


def test_other_prefix_parts_and_moe_dp_are_not_the_dp_rank(test_data: Path) -> None:
    (stamp, message), *_ = _measured_lines(test_data, "srv64x")
    line = f"[{stamp} DP3 PP1 ATTN_CP0 MOE_DP5 TP6 EP6] {message}"
    (batch,) = logparse.parse_prefill_lines(line)
    assert batch.dp_rank == 3
    (no_dp,) = logparse.parse_prefill_lines(f"[{stamp} MOE_DP5 TP6] {message}")
    assert no_dp.dp_rank is None


@pytest.mark.parametrize(("args", "expected"), [
    ([], 1),
    (["--tp", "4", "--dp-size", "2"], 1),                             # replicas: whole chunk
    (["--tp", "4", "--dp-size", "2", "--enable-dp-attention"], 2),   # deprecated spelling
    (["--tp", "4", "--attn-dp-size", "2"], 2),
    (["--tp", "8", "--attention-data-parallel-size=4"], 4),
])
def test_attention_dp_size_from_the_launch_args(args: list[str], expected: int) -> None:
    assert dp_attention_size(args) == expected


@pytest.mark.sglang
def test_sglang_configure_logger_writes_the_form_parsed(test_data: Path) -> None:
    """A real line formatted by sglang's own configure_logger with the prefix its scheduler
    builds for DP rank 1 / TP rank 2 parses as rank 1."""
    (_stamp, message), *_ = _measured_lines(test_data, "srv64x")
    code = ("import logging, sys, types\n"
            "from sglang.srt.utils.common import configure_logger\n"
            "configure_logger(types.SimpleNamespace(log_level='info'), prefix=' DP1 TP2')\n"
            "logging.getLogger('sglang.srt.managers.scheduler').info(sys.argv[1])\n")
    out = subprocess.run([sys.executable, "-c", code, message], capture_output=True, text=True,
                         timeout=300, check=True)
    line = next(ln for ln in out.stderr.splitlines() if "Prefill batch" in ln)
    assert re.match(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d DP1 TP2\] Prefill batch", line), line
    (batch,) = logparse.parse_prefill_lines(line)
    assert batch.dp_rank == 1
    assert batch.new_tokens == logparse.parse_prefill_lines(message)[0].new_tokens


@pytest.mark.sglang
@pytest.mark.parametrize("args", [
    ["--tp", "4", "--dp-size", "2", "--enable-dp-attention"],
    ["--tp", "4", "--attn-dp-size", "2"],
    ["--tp", "4", "--dp-size", "2"],
    ["--tp", "8", "--attention-data-parallel-size=4"],
])
def test_launch_dp_size_matches_sglangs_resolution(args: list[str]) -> None:
    """bench's per-rank chunk (launch.dp_attention_size) equals what sglang's own ServerArgs
    resolves (read by preflight's budget, the parallel_hook division)."""
    import argparse

    from sglang.srt.server_args import ServerArgs

    from servegate.preflight.budget import resolve_budget

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    server_args = ServerArgs.from_cli_args(parser.parse_args(
        ["--model-path", "x", "--chunked-prefill-size", "1024", *args]))
    budget = resolve_budget(server_args)
    assert budget.chunk_size == 1024 // dp_attention_size(args)
