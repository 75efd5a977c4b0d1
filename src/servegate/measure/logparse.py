"""Read the server log back: prefill batches (chunk alignment) and the exact-fill hook lines
(which lines count, saturation, data parallelism: docs/serve.md, Modes and the read-back)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from servegate.core.errors import ServegateError
from servegate.core.results import Alignment, RankAlignment
from servegate.serve.modeswitch import Ack

# The optional stamp carries the DP rank (" DP<n>"; not MOE_DP<n>) when the scheduler has one.
PREFILL = re.compile(r"(?:\[[^\]\n]*? DP(?P<dp>\d+)(?: [^\]\n]*)?\] )?"
                     r"Prefill batch(?: \[\d+\])?, #new-seq: (?P<seq>\d+), "
                     r"#new-token: (?P<new>\d+), #cached-token: (?P<cached>\d+), .*?"
                     r"#queue-req: (?P<queue>\d+), #pending-token: (?P<pending>\d+),")
FLUSHED = "Cache flushed successfully!"
# servegate's own hook line, and the earlier hand-made hook format seen in the recorded logs
# (tests/data/sglang-cpu-logs).
FORCED_HOOK = re.compile(r"servegate-hook: exact chunk fill forced in pid (\d+)"
                         r"|\[sitecustomize\] pid (\d+): forced \S*_use_exact_chunk_fill")
GATE_HOOK = re.compile(r"servegate-hook: exact chunk fill gate=(True|False) in pid (\d+)")
# The device double (runner classes marked emulated in servegate.core.runner_classes), from the hook.
DEVICE_DOUBLE = re.compile(r"servegate-hook: device double: (?P<what>\w+ emulated "
                           r"\(gcnArchName=[^)\s]+\)) in pid (?P<pid>\d+)")
# A scheduler's acknowledgement of a mode switch (servegate.serve.modeswitch, one server).
MODE_ACK = re.compile(r"servegate-hook: mode ack seq=(?P<seq>\d+) mode=(?P<mode>\w+) "
                      r"gate=(?P<gate>True|False) in pid (?P<pid>\d+)")


class LogParseError(ServegateError, ValueError):
    """The server log does not contain what the measurement needs (names file and reason)."""


@dataclass(frozen=True)
class PrefillBatch:
    new_seq: int
    new_tokens: int
    cached_tokens: int
    queue_req: int
    pending_tokens: int
    dp_rank: int | None = None      # from the line's " DP<n>" tag; None: no DP rank in the stamp

    @property
    def saturated(self) -> bool:
        return self.pending_tokens > 0


def parse_prefill_lines(text: str) -> list[PrefillBatch]:
    batches = []
    for match in PREFILL.finditer(text):
        dp = match["dp"]
        batches.append(PrefillBatch(int(match["seq"]), int(match["new"]), int(match["cached"]),
                                    int(match["queue"]), int(match["pending"]),
                                    int(dp) if dp is not None else None))
    return batches


def read_slice(path: Path, start: int = 0, end: int | None = None) -> str:
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read() if end is None else handle.read(max(0, end - start))
    return data.decode("utf-8", errors="replace")  # pragma: no mutate (utf-8 however spelled)


def measured_text(path: Path, start: int, end: int | None = None,
                  require_flush: bool = True) -> str:
    """The part of the log that belongs to the measured requests of one point."""
    text = read_slice(path, start, end)
    cut = text.rfind(FLUSHED)
    if cut < 0:
        if require_flush:
            raise LogParseError(f"{path}: no {FLUSHED!r} line after byte {start}; cannot "
                                f"separate the client's warm-up from measured batches")
        return text
    return text[cut + len(FLUSHED):]


def _rank_stats(batches: list[PrefillBatch], chunk_size: int) -> RankAlignment:
    saturated = [b.new_tokens for b in batches if b.saturated]
    aligned = sum(1 for tokens in saturated if tokens == chunk_size)
    return RankAlignment(
        saturated_batches=len(saturated),
        aligned_fraction=(aligned / len(saturated)) if saturated else 0.0,
        min_saturated_tokens=min(saturated) if saturated else 0,
        prefill_tokens=[b.new_tokens for b in batches])


def alignment(batches: list[PrefillBatch], chunk_size: int,
              dp_attention_size: int = 1) -> Alignment:
    """Saturated batches against the chunk each scheduler has: ``chunk_size`` (the configured
    ``--chunked-prefill-size``) divided by ``dp_attention_size`` with attention DP. DP-tagged
    lines are grouped per rank (``per_rank``), totals summing the ranks and ``prefill_tokens``
    rank 0's then rank 1's, ... in log order (the cross-rank interleaving is timing, not kept)."""
    if dp_attention_size < 1 or chunk_size % dp_attention_size:
        raise LogParseError(f"chunk size {chunk_size} cannot be divided among "
                            f"{dp_attention_size} attention-DP ranks")
    rank_chunk = chunk_size // dp_attention_size
    tagged = {b.dp_rank for b in batches if b.dp_rank is not None}
    if tagged and len(tagged) != len({b.dp_rank for b in batches}):
        raise LogParseError("prefill lines mix DP-tagged and untagged streams")
    if dp_attention_size > 1:
        if batches and not tagged:
            raise LogParseError(f"attention DP size {dp_attention_size}, but no prefill line "
                                f"carries a DP rank tag (a custom SGLANG_LOGGING_CONFIG_PATH?)")
        beyond = sorted(r for r in tagged if r >= dp_attention_size)
        if beyond:
            raise LogParseError(f"prefill lines from DP ranks {beyond}, but the attention DP "
                                f"size is {dp_attention_size}")
    if not tagged:
        one = _rank_stats(batches, rank_chunk)
        return Alignment(chunk_size=rank_chunk, saturated_batches=one["saturated_batches"],
                         aligned_fraction=one["aligned_fraction"],
                         min_saturated_tokens=one["min_saturated_tokens"],
                         prefill_tokens=one["prefill_tokens"])
    per_rank = {r: _rank_stats([b for b in batches if b.dp_rank == r], rank_chunk)
                for r in sorted(tagged)}
    saturated = sum(s["saturated_batches"] for s in per_rank.values())
    aligned = sum(round(s["aligned_fraction"] * s["saturated_batches"])
                  for s in per_rank.values())
    mins = [s["min_saturated_tokens"] for s in per_rank.values() if s["saturated_batches"]]
    return Alignment(
        chunk_size=rank_chunk,
        saturated_batches=saturated,
        aligned_fraction=(aligned / saturated) if saturated else 0.0,
        min_saturated_tokens=min(mins) if mins else 0,
        prefill_tokens=[t for s in per_rank.values() for t in s["prefill_tokens"]],
        configured_chunk_size=chunk_size,
        dp_attention_size=dp_attention_size,
        per_rank={str(r): s for r, s in per_rank.items()},
    )


def forced_hook_pids(text: str) -> set[int]:
    return {int(a or b) for a, b in FORCED_HOOK.findall(text)}


def gate_values(text: str) -> set[bool]:
    return {value == "True" for value, _pid in GATE_HOOK.findall(text)}


def gate_pids(text: str) -> set[int]:
    return {int(pid) for _value, pid in GATE_HOOK.findall(text)}


def device_doubles(text: str) -> dict[int, str]:
    """pid -> what the device double emulated there (e.g. ``gfx95 emulated (gcnArchName=...)``)."""
    return {int(m["pid"]): m["what"] for m in DEVICE_DOUBLE.finditer(text)}


def mode_acks(text: str) -> list[Ack]:
    """The mode-switch acknowledgements in a server-log slice, in log order: a block's slice
    (from before its switch to after its requests) shows which pids applied which mode."""
    return [Ack(seq=int(m["seq"]), mode=m["mode"], gate=m["gate"] == "True", pid=int(m["pid"]))
            for m in MODE_ACK.finditer(text)]


BATCH_LINE = re.compile(r"\] (?:Prefill|Decode) batch\b")


def batch_lines(text: str) -> int:
    """How many prefill or decode batches a log slice reports: 0 means the server was idle
    (a live pair's other server while a block runs on this one)."""
    return sum(1 for line in text.splitlines() if BATCH_LINE.search(line))
