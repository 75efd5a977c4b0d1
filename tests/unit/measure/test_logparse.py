"""servegate.measure.logparse: the exact-fill read-back and the measured slice (issue 15).

The hook lines fed to the parser here are printed by servegate's own hook (its code run in a
fresh interpreter, on a stand-in for sglang's schedule_policy module), so the hook and the parser
cannot drift apart unnoticed. The expected prefill batches are read out of the log by plain
string splitting, independently of the parser's regular expression.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sglang_outputs import client_record, dp_rank_line, measured_prefill_lines

from servegate.core.results import Alignment
from servegate.measure import logparse
from servegate.measure.exactfill import check_effective
from servegate.serve.launch import EXACTFILL_HOOK_DIR
from servegate.serve.modeswitch import Ack

# Run the hook's own patch on a stand-in for sglang's schedule_policy module, then call the
# gate the way sglang's PrefillAdder does (twice: the hook reports once per process).
# A stand-in torch (a CPU build) for the device double, which answers torch's device questions.
HOOK_PROBE = (
    "import sys, types, sitecustomize as hook\n"
    "sys.modules['torch'] = types.SimpleNamespace(version=types.SimpleNamespace(hip=None, "
    "cuda=None), cuda=types.SimpleNamespace(get_device_properties=None, "
    "get_device_capability=None))\n"
    "policy = types.SimpleNamespace(_use_exact_chunk_fill=lambda: {gate})\n"
    "hook._patch_policy(policy)\n"
    "print(policy._use_exact_chunk_fill(), policy._use_exact_chunk_fill())\n")


def _hook_stderr(env: dict[str, str], gate: bool = False) -> tuple[str, int, str]:
    """What servegate's hook prints (stderr), the pid it ran in, and its stdout."""
    full = {k: v for k, v in os.environ.items()
            if not k.startswith("SERVEGATE_") and k != "PYTHONPATH"}
    full.update(env, PYTHONPATH=str(EXACTFILL_HOOK_DIR))
    proc = subprocess.Popen([sys.executable, "-c", HOOK_PROBE.format(gate=gate)], env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return err, proc.pid, out


def _log(test_data: Path, name: str) -> str:
    return (test_data / "sglang-cpu-logs" / f"{name}.log").read_text()


def _without_old_hook_lines(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if "[sitecustomize]" not in line) + "\n"


def _aligned(saturated: int = 4, fraction: float = 1.0) -> Alignment:
    return Alignment(chunk_size=256, saturated_batches=saturated, aligned_fraction=fraction,
                     min_saturated_tokens=256 if fraction == 1.0 else 200,
                     prefill_tokens=[256] * saturated)


def test_the_forcing_hooks_own_line_is_what_the_parser_finds(test_data: Path) -> None:
    err, pid, out = _hook_stderr({"SERVEGATE_FORCE_EXACT_FILL": "1"})
    assert out.split() == ["True", "True"]
    assert logparse.forced_hook_pids(err) == {pid}
    # A forced run whose log carries only the hook's real line (no older hand-made format).
    log = _without_old_hook_lines(_log(test_data, "srv64x")) + err
    assert logparse.forced_hook_pids(_without_old_hook_lines(_log(test_data, "srv64x"))) == set()
    assert check_effective("forced", "cpu", log, _aligned()) is True


@pytest.mark.parametrize("gate", [True, False])
def test_the_reporting_hooks_own_line_is_what_the_parser_finds(gate: bool) -> None:
    err, pid, out = _hook_stderr({"SERVEGATE_REPORT_EXACT_FILL": "1"}, gate=gate)
    assert out.split() == [str(gate), str(gate)]
    assert err.count("servegate-hook:") == 1            # reported once per process
    assert logparse.gate_values(err) == {gate}
    assert logparse.gate_pids(err) == {pid}
    assert logparse.forced_hook_pids(err) == set()


def test_the_device_doubles_own_line_is_what_the_parser_finds() -> None:
    err, pid, _ = _hook_stderr({"SERVEGATE_EMULATE_GFX95": "1"})
    doubles = logparse.device_doubles(err)
    assert list(doubles) == [pid]
    assert doubles[pid].startswith("gfx95 emulated (gcnArchName=gfx95")
    err, pid, _ = _hook_stderr({"SERVEGATE_EMULATE_ARCH": "gfx942:sramecc+:xnack-"})
    assert logparse.device_doubles(err) == {pid: "gfx942 emulated (gcnArchName=gfx942:sramecc+:xnack-)"}


def _independent_batches_after_last_flush(text: str) -> list[tuple[int, int]]:
    """(new tokens, pending tokens) of every prefill line after the last flush, by splitting."""
    lines = text.splitlines()
    last = max(i for i, line in enumerate(lines) if "Cache flushed successfully!" in line)
    out = []
    for line in lines[last + 1:]:
        if "Prefill batch" in line:
            new = int(line.split("#new-token: ")[1].split(",")[0])
            pending = int(line.split("#pending-token: ")[1].split(",")[0])
            out.append((new, pending))
    return out


@pytest.mark.parametrize("name", ["srv16", "srv16x", "srv64", "srv64x"])
def test_measured_slice_is_every_batch_after_the_last_flush(test_data: Path, name: str) -> None:
    """Not only the first batch: the whole measured slice is exactly the prefill lines after
    the last flush marker (earlier flushes and their batches excluded)."""
    log = test_data / "sglang-cpu-logs" / f"{name}.log"
    expected = _independent_batches_after_last_flush(log.read_text())
    assert len(expected) >= 5
    assert len(expected) < len(logparse.parse_prefill_lines(log.read_text())) - 2
    text = logparse.measured_text(log, 0)
    got = [(b.new_tokens, b.pending_tokens) for b in logparse.parse_prefill_lines(text)]
    assert got == expected


def test_measured_slice_honours_the_end_offset(test_data: Path, tmp_path: Path) -> None:
    log = test_data / "sglang-cpu-logs" / "srv64x.log"
    raw = log.read_bytes()
    end = raw.rindex(b"Prefill batch")                  # stop before the last prefill line
    text = logparse.measured_text(log, 0, end)
    expected = _independent_batches_after_last_flush(raw.decode())[:-1]
    assert [(b.new_tokens, b.pending_tokens)
            for b in logparse.parse_prefill_lines(text)] == expected
    assert logparse.read_slice(log, 10, 5) == ""         # an end before the start: nothing
    no_flush = tmp_path / "server.log"
    no_flush.write_text("Prefill batch, #new-seq: 1, #new-token: 9, #cached-token: 0, "
                        "#queue-req: 0, #pending-token: 0,\n")
    assert logparse.measured_text(no_flush, 0, require_flush=False) == no_flush.read_text()


def test_saturated_means_pending_tokens_left_over() -> None:
    assert logparse.PrefillBatch(1, 10, 0, 0, 1).saturated
    assert not logparse.PrefillBatch(1, 10, 0, 5, 0).saturated


def test_alignment_counts_only_saturated_batches() -> None:
    def batch(new: int, pending: int) -> logparse.PrefillBatch:
        return logparse.PrefillBatch(1, new, 0, 0, pending)

    stats = logparse.alignment([batch(256, 5), batch(200, 5), batch(256, 5), batch(256, 5),
                                batch(30, 0)], 256)
    assert stats == {"chunk_size": 256, "saturated_batches": 4, "aligned_fraction": 0.75,
                     "min_saturated_tokens": 200, "prefill_tokens": [256, 200, 256, 256, 30]}
    none = logparse.alignment([batch(30, 0)], 256)
    assert (none["saturated_batches"], none["aligned_fraction"],
            none["min_saturated_tokens"]) == (0, 0.0, 0)


def _prefill(new: int, pending: int, cached: int = 0, dp: int | None = None) -> str:
    stamp = f"[2026-11-30 11:05:16 DP{dp} TP0] " if dp is not None else "[2026-11-30 11:05:16] "
    return (f"{stamp}Prefill batch, #new-seq: 1, #new-token: {new}, #cached-token: {cached}, "
            f"token usage: 0.10, #running-req: 0, #queue-req: 0, #pending-token: {pending}, "
            f"cpu graph: False\n")


def test_every_field_of_a_prefill_line_is_read() -> None:
    (batch,) = logparse.parse_prefill_lines(_prefill(200, 7, cached=64, dp=3))
    assert batch == logparse.PrefillBatch(1, 200, 64, 0, 7, 3)


def test_a_flush_marker_at_the_very_start_of_the_slice(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(_prefill(6, 0) + "Cache flushed successfully!\n" + _prefill(256, 9))
    start = log.read_bytes().index(b"Cache flushed")
    text = logparse.measured_text(log, start)
    assert [b.new_tokens for b in logparse.parse_prefill_lines(text)] == [256]


def test_undecodable_bytes_in_the_log_are_replaced(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"\xff\xfe garbage\n" + _prefill(256, 9).encode())
    text = logparse.read_slice(log)
    assert text.startswith("\ufffd\ufffd garbage")
    assert [b.new_tokens for b in logparse.parse_prefill_lines(text)] == [256]


def test_attention_dp_chunk_is_an_integer_share_per_rank() -> None:
    lines = (_prefill(128, 5, dp=0) + _prefill(100, 5, dp=0) + _prefill(128, 5, dp=1)
             + _prefill(40, 0, dp=1))
    stats = logparse.alignment(logparse.parse_prefill_lines(lines), 256, 2)
    assert '"chunk_size": 128,' in json.dumps(stats)              # 256 // 2, not 128.0
    assert stats["configured_chunk_size"] == 256 and stats["dp_attention_size"] == 2
    assert (stats["saturated_batches"], stats["aligned_fraction"],
            stats["min_saturated_tokens"]) == (3, 2 / 3, 100)
    assert stats["prefill_tokens"] == [128, 100, 128, 40]
    assert stats["per_rank"]["1"]["min_saturated_tokens"] == 128


def test_dp_ranks_without_saturated_batches() -> None:
    lines = _prefill(40, 0, dp=0) + _prefill(30, 0, dp=1)
    stats = logparse.alignment(logparse.parse_prefill_lines(lines), 256, 2)
    assert (stats["saturated_batches"], stats["aligned_fraction"],
            stats["min_saturated_tokens"]) == (0, 0.0, 0)
    one_idle = _prefill(128, 5, dp=0) + _prefill(30, 0, dp=1)
    stats = logparse.alignment(logparse.parse_prefill_lines(one_idle), 256, 2)
    assert (stats["min_saturated_tokens"], stats["aligned_fraction"]) == (128, 1.0)


def test_mixed_tagged_and_untagged_lines_are_an_error() -> None:
    lines = _prefill(128, 5, dp=0) + _prefill(128, 5)
    with pytest.raises(logparse.LogParseError) as info:
        logparse.alignment(logparse.parse_prefill_lines(lines), 256, 2)
    assert str(info.value) == "prefill lines mix DP-tagged and untagged streams"


# The load client's process handling (a stand-in child: a short python program).

def _client(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_undecodable_client_output_is_still_read(tmp_path: Path) -> None:
    from servegate.measure.client import parse_client_jsonl

    path = tmp_path / "c.jsonl"
    path.write_bytes(b"\xff\xfe warm-up noise\n" + json.dumps(client_record()).encode() + b"\n")
    metrics, _ = parse_client_jsonl(path)
    assert metrics["completed"] == 3


# Server-log read-back on REAL sglang 0.5.23 CPU logs (tests/data/sglang-cpu-logs, see its README).


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


# DP attention: every DP rank's scheduler logs its own prefill lines; each has chunk // attn_dp.
#
# The inputs are REAL prefill lines from sglang 0.5.23 CPU servers (tests/data/sglang-cpu-logs, one
# rank, no prefix), re-tagged the way sglang tags a DP rank's lines:
#
# - the prefix: ``configure_scheduler_process`` (sglang/srt/managers/scheduler.py lines 6279-6291)
#   builds ``" DP{dp_rank}"`` when the rank has a DP rank, then ``" TP{tp_rank}"`` when
#   ``tp_size > 1`` (PP / ATTN_CP / MOE_DP / EP only when those sizes are > 1);
# - the format: ``configure_logger`` (sglang/srt/utils/common.py lines 2629-2630) puts it inside
#   the stamp: ``[%(asctime)s{prefix}] %(message)s``;
# - only each DP group's attention-TP rank 0 logs (``is_stats_logging_rank``,
#   sglang/srt/observability/metrics_collector.py lines 1361-1363), so with ``--tp 4
#   --attn-dp-size 2`` the two streams are ``DP0 TP0`` and ``DP1 TP2``.
#
# The sglang-marked tests format a real line through sglang's own ``configure_logger`` and check
# the launch argv's attention-DP size against sglang's own ``ServerArgs`` resolution.


def _two_ranks(test_data: Path) -> tuple[str, list[str], list[str]]:
    """Rank 0 (DP0 TP0) serves the forced log's batches, rank 1 (DP1 TP2) the off log's,
    interleaved line by line as two schedulers writing to one server log do."""
    forced = measured_prefill_lines(test_data, "srv64x")
    off = measured_prefill_lines(test_data, "srv64")
    lines: list[str] = []
    for i in range(max(len(forced), len(off))):
        if i < len(forced):
            lines.append(dp_rank_line(*forced[i], dp=0, tp=0))
        if i < len(off):
            lines.append(dp_rank_line(*off[i], dp=1, tp=2))
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
    (stamp, message), *_ = measured_prefill_lines(test_data, "srv64x")
    line = f"[{stamp} DP3 PP1 ATTN_CP0 MOE_DP5 TP6 EP6] {message}"
    (batch,) = logparse.parse_prefill_lines(line)
    assert batch.dp_rank == 3
    (no_dp,) = logparse.parse_prefill_lines(f"[{stamp} MOE_DP5 TP6] {message}")
    assert no_dp.dp_rank is None


# ``logparse.mode_acks``: the mode-switch acknowledgements in a server-log slice, as the hook
# prints them (``servegate-hook: mode ack seq=N mode=M gate=<bool> in pid P``).
#
# Named ``test_logparse_acks``: ``tests/test_logparse.py`` has the basename ``test_logparse`` and
# ``tests/unit`` is an ``__init__.py``-free layout (pytest imports test modules by basename).


ACKS = """\
[2026-12-01 10:00:01] Scheduler started
servegate-hook: mode ack seq=0 mode=off gate=False in pid 4101
servegate-hook: mode ack seq=0 mode=off gate=False in pid 4102
[2026-12-01 10:00:03 TP0] Prefill batch, #new-seq: 1, #new-token: 256, ...
servegate-hook: mode ack seq=1 mode=forced gate=True in pid 4102
servegate-hook: mode ack seq=1 mode=forced gate=True in pid 4101
servegate-hook: mode ack seq=2 mode=on gate=maybe in pid 4101
servegate-hook: exact chunk fill gate=True in pid 4101
"""


def test_acks_in_log_order_with_their_gate() -> None:
    assert logparse.mode_acks(ACKS) == [
        Ack(0, "off", False, 4101), Ack(0, "off", False, 4102),
        Ack(1, "forced", True, 4102), Ack(1, "forced", True, 4101)]   # gate=maybe is no ack


def test_no_ack_in_a_log_without_mode_control(test_data: Path) -> None:
    text = (test_data / "sglang-cpu-logs" / "srv64x.log").read_text()
    assert logparse.mode_acks(text) == [] and logparse.mode_acks("") == []


def test_a_block_slice_holds_only_its_switch() -> None:
    cut = ACKS.index("servegate-hook: mode ack seq=1")
    assert {a.seq for a in logparse.mode_acks(ACKS[cut:])} == {1}


def test_a_batch_over_the_chunk_is_saturated_but_not_aligned() -> None:
    """Exact fill promises batches of exactly the chunk: one token over (a ledger that lets a
    batch past the budget) must not count as aligned, alone or per DP rank."""
    over = logparse.PrefillBatch(1, 257, 0, 0, 5)
    at = logparse.PrefillBatch(1, 256, 0, 0, 5)
    stats = logparse.alignment([at, over, at, at], 256)
    assert (stats["saturated_batches"], stats["aligned_fraction"]) == (4, 0.75)
    ranked = [logparse.PrefillBatch(1, 128, 0, 0, 5, dp_rank=0),
              logparse.PrefillBatch(1, 129, 0, 0, 5, dp_rank=1)]
    per_rank = logparse.alignment(ranked, 256, dp_attention_size=2)
    assert (per_rank["chunk_size"], per_rank["saturated_batches"],
            per_rank["aligned_fraction"]) == (128, 2, 0.5)
