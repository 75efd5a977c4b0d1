"""The no-op at the server level: ``on``'s prefill batches must not be aligned at the chunk more
often than ``off``'s where exact fill is gated off (exact fill leaking would align them all).

Arrival timing changes a batch's make-up at concurrency > 1, so the batch sequences and their
size distributions are compared too, but only reported; the admission-level identity is
``servegate preflight``'s and ``servegate admission``'s job.
"""

from __future__ import annotations

from typing import Any

from scipy import stats as sps

from servegate.core.results import point_slot
from servegate.judge.checks import Check


def _first_difference(a: list[int], b: list[int]) -> str:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"batch {i}: off={x} on={y}"
    return f"lengths differ: off has {len(a)} batches, on has {len(b)}"


def aligned_counts(points: list[dict[str, Any]]) -> tuple[int, int]:
    """(saturated prefill batches exactly at the chunk, saturated batches) over ``points``."""
    aligned = saturated = 0
    for point in points:
        alignment = point.get("alignment") or {}
        n = int(alignment.get("saturated_batches") or 0)
        saturated += n
        aligned += round(float(alignment.get("aligned_fraction") or 0.0) * n)
    return aligned, saturated


def aligned_beyond_off(check: Check, on: list[dict[str, Any]], off: list[dict[str, Any]],
                       confidence: float) -> Check:
    """Decide the no-op's prefill test on ``check``: ``on``'s saturated batches aligned at the
    chunk more often than ``off``'s (one-sided Fisher exact test at ``1 - confidence``) is a
    regression; no saturated batch on either side is inconclusive. Sets ``p_value``."""
    (a_on, n_on), (a_off, n_off) = aligned_counts(on), aligned_counts(off)
    info = sequence_note(off, on)
    if n_on == 0 or n_off == 0:
        check.verdict = "inconclusive"
        check.reason = f"no saturated prefill batches to compare (on {n_on}, off {n_off}); {info}"
        check.p_value = 1.0
        return check
    check.current_value, check.reference_value = a_on / n_on, a_off / n_off
    p_value = float(sps.fisher_exact([[a_on, n_on - a_on], [a_off, n_off - a_off]],
                                     alternative="greater").pvalue)
    check.p_value = p_value
    summary = (f"aligned on {a_on}/{n_on} vs off {a_off}/{n_off} saturated batches "
               f"(one-sided Fisher p={p_value:.3g}, alpha {1 - confidence:.3g})")
    if p_value < 1 - confidence:
        check.verdict = "regression"
        check.reason = f"{summary}: on aligns more than off - exact fill leaked?; {info}"
    else:
        check.reason = f"{summary}; {info}"
    return check


def sequence_note(off: list[dict[str, Any]], on: list[dict[str, Any]]) -> str:
    """Reported only: identical batch sequences per block (same concurrency, start and block
    round), and a KS test of the batch sizes."""
    def by_slot(points: list[dict[str, Any]]) -> dict[tuple[int, int, int], dict[str, Any]]:
        return {(int(p["concurrency"]), *point_slot(p)): p for p in points}

    off_by, on_by = by_slot(off), by_slot(on)
    same, compared, first = 0, 0, ""
    sizes_off: list[int] = []
    sizes_on: list[int] = []
    for slot in sorted(set(off_by) & set(on_by)):
        a = (off_by[slot].get("alignment") or {}).get("prefill_tokens")
        b = (on_by[slot].get("alignment") or {}).get("prefill_tokens")
        if not isinstance(a, list) or not isinstance(b, list):
            continue
        compared += 1
        sizes_off += a
        sizes_on += b
        if a == b:
            same += 1
        elif not first:
            conc, start, block = slot
            first = f" (c{conc} start {start} block {block}: {_first_difference(a, b)})"
    if compared == 0:
        return "no prefill-batch sequences recorded"
    note = f"batch sequences identical in {same}/{compared} block(s){first}"
    if sizes_off and sizes_on and sizes_off != sizes_on:
        note += f"; size distributions KS p={float(sps.ks_2samp(sizes_on, sizes_off).pvalue):.3g}"
    return note
