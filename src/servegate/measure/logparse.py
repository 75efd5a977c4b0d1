"""Read the server log back: prefill batches (chunk alignment) and the exact-fill hook lines.

Which prefill lines belong to a point: only those written after the point started (a byte
offset into the server log taken before the client ran) AND after the last
``Cache flushed successfully!`` in that slice. The client runs its warm-up requests, then
flushes the cache (``--flush-cache``), then the measured requests; so the readiness probe's
1-token /health generation, sglang's own start-up warm-up and the client's warm-up all fall
before the marker and are excluded without guessing from their sizes.

A prefill batch is *saturated* (limited by the budget rather than by a lack of work) when prefill
work was left over after it was formed: ``#pending-token > 0``, which sglang computes as the
tokens of the waiting requests plus the unprefilled rest of the chunked request. ``#queue-req``
alone is not used: the real logs show batches with a queued request but 0 pending tokens (a
request that had just arrived, e.g. srv64x.log ``#new-token: 38, #queue-req: 1,
#pending-token: 0``), which the chunk budget did not cut. Exact fill's promise is that every
saturated batch is exactly ``--chunked-prefill-size`` tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from servegate.errors import ServegateError
from servegate.results import Alignment

PREFILL = re.compile(r"Prefill batch(?: \[\d+\])?, #new-seq: (?P<seq>\d+), "
                     r"#new-token: (?P<new>\d+), #cached-token: (?P<cached>\d+), .*?"
                     r"#queue-req: (?P<queue>\d+), #pending-token: (?P<pending>\d+),")
FLUSHED = "Cache flushed successfully!"
# servegate's own hook line, and the earlier hand-made hook format seen in the shared logs.
FORCED_HOOK = re.compile(r"servegate-hook: exact chunk fill forced in pid (\d+)"
                         r"|\[sitecustomize\] pid (\d+): forced \S*_use_exact_chunk_fill")
GATE_HOOK = re.compile(r"servegate-hook: exact chunk fill gate=(True|False) in pid (\d+)")


class LogParseError(ServegateError, ValueError):
    """The server log does not contain what the measurement needs (names file and reason)."""


@dataclass(frozen=True)
class PrefillBatch:
    new_seq: int
    new_tokens: int
    cached_tokens: int
    queue_req: int
    pending_tokens: int

    @property
    def saturated(self) -> bool:
        return self.pending_tokens > 0


def parse_prefill_lines(text: str) -> list[PrefillBatch]:
    batches = []
    for match in PREFILL.finditer(text):
        batches.append(PrefillBatch(int(match["seq"]), int(match["new"]), int(match["cached"]),
                                    int(match["queue"]), int(match["pending"])))
    return batches


def read_slice(path: Path, start: int = 0, end: int | None = None) -> str:
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read() if end is None else handle.read(max(0, end - start))
    return data.decode("utf-8", errors="replace")


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


def alignment(batches: list[PrefillBatch], chunk_size: int) -> Alignment:
    saturated = [b.new_tokens for b in batches if b.saturated]
    aligned = sum(1 for tokens in saturated if tokens == chunk_size)
    return Alignment(
        chunk_size=chunk_size,
        saturated_batches=len(saturated),
        aligned_fraction=(aligned / len(saturated)) if saturated else 0.0,
        min_saturated_tokens=min(saturated) if saturated else 0,
        prefill_tokens=[b.new_tokens for b in batches],
    )


def forced_hook_pids(text: str) -> set[int]:
    return {int(a or b) for a, b in FORCED_HOOK.findall(text)}


def gate_values(text: str) -> set[bool]:
    return {value == "True" for value, _pid in GATE_HOOK.findall(text)}
