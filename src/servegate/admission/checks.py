"""The properties exact chunk fill must keep, checked on real replay traces.

Failures break the suite (exit 1); findings are behaviour users should know about but that is
by design (sub-page chunks in forced mode, truncation alignment capping the fill).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from servegate.admission.replay import Round, Trace


@dataclass
class CheckResult:
    failures: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)

    def extend(self, other: CheckResult) -> None:
        self.failures += other.failures
        self.findings += other.findings


# The invariant the exact-fill branch exists for, named in its failure lines (issue 40: a
# branch that admits chunk - 1 tokens is caught by this name, without a server).
EXACT_FILL_FILLS_CHUNK = "exact-fill-fills-chunk"


def _ceil_page(tokens: int, page: int) -> int:
    return -(-tokens // page) * page


def _where(trace: Trace, rnd: Round | None = None) -> str:
    where = f"{trace.scenario.scenario_id} [{trace.mode}]"
    return f"{where} round {rnd.index}" if rnd is not None else where


def _alignment_free(trace: Trace) -> bool:
    """Forced fill can only reach the chunk size when nothing else caps the round."""
    sc = trace.scenario
    return sc.truncation_align_size is None and sc.rem_input_tokens >= sc.chunk_size


def check_trace(trace: Trace) -> CheckResult:
    """Properties of one replay on its own."""
    out = CheckResult()
    sc = trace.scenario
    for rnd in trace.rounds:
        if rnd.batch_tokens > sc.chunk_size:
            out.failures.append(
                f"{_where(trace, rnd)}: batch {rnd.batch_tokens} tokens exceeds chunk size "
                f"{sc.chunk_size}")
        for adm in rnd.admissions:
            if adm.extend_len <= 0:
                out.failures.append(f"{_where(trace, rnd)}: zero-length chunk for {adm.rid}")
            expected = _ceil_page(adm.extend_len, sc.page_size) + sc.page_size
            if adm.kv_reserved != expected:
                out.failures.append(
                    f"{_where(trace, rnd)}: KV budget for {adm.rid} grew by {adm.kv_reserved}, "
                    f"expected ceil_page({adm.extend_len}) + page = {expected}")
            if trace.mode == "forced" and adm.chunked and adm.extend_len < sc.page_size:
                out.findings.append(
                    f"{_where(trace, rnd)}: forced mode admitted a sub-page chunk of "
                    f"{adm.extend_len} tokens (page {sc.page_size}) for {adm.rid}")
        # Exact fill effective (forced here; `on` on gfx95): a saturated round fills the chunk.
        if trace.effective and rnd.saturated and rnd.stop != "kv":
            if _alignment_free(trace) and rnd.batch_tokens != sc.chunk_size:
                out.failures.append(
                    f"{_where(trace, rnd)}: {EXACT_FILL_FILLS_CHUNK}: saturated {trace.mode} batch "
                    f"is {rnd.batch_tokens} tokens, expected exactly the chunk size {sc.chunk_size}")
            elif not _alignment_free(trace) and rnd.batch_tokens < sc.chunk_size:
                cap = (f"truncation_align_size {sc.truncation_align_size}"
                       if sc.truncation_align_size else f"max_prefill_tokens {sc.rem_input_tokens}")
                out.findings.append(
                    f"{_where(trace, rnd)}: {cap} capped the {trace.mode} fill at "
                    f"{rnd.batch_tokens} of {sc.chunk_size} tokens")
    if trace.mode == "forced" and not trace.effective:
        out.failures.append(f"{_where(trace)}: forced mode but PrefillAdder.exact_chunk_fill is off")
    if trace.mode == "off" and trace.effective:
        out.failures.append(f"{_where(trace)}: off mode but PrefillAdder.exact_chunk_fill is on")
    if trace.free_after + trace.evictable_after != trace.pool_tokens:
        out.failures.append(
            f"{_where(trace)}: KV slots leaked: free {trace.free_after} + evictable "
            f"{trace.evictable_after} != pool {trace.pool_tokens}")
    if trace.rows_free_after != trace.rows_total:
        out.failures.append(
            f"{_where(trace)}: request rows leaked: {trace.rows_free_after} of "
            f"{trace.rows_total} free")
    return out


def _signature(trace: Trace) -> list[tuple[object, ...]]:
    """Everything admission decided, admission by admission and counter by counter."""
    return [
        (tuple((a.prefix_len, a.extend_len, a.kv_reserved, a.chunked) for a in r.admissions),
         r.batch_tokens, r.saturated, r.rem_chunk_tokens, r.rem_input_tokens, r.stop)
        for r in trace.rounds
    ]


def first_difference(a: Trace, b: Trace) -> str | None:
    """Where two traces of one scenario first differ, in words; None when identical."""
    sa, sb = _signature(a), _signature(b)
    # equivalent (strict=): False is zip's default; unequal lengths are reported below
    for index, (ra, rb) in enumerate(zip(sa, sb, strict=False)):  # pragma: no mutate
        if ra != rb:
            return (f"round {index}: {a.mode} extend {list(x[1] for x in ra[0])} "
                    f"(rem_chunk {ra[3]}, rem_input {ra[4]}) vs {b.mode} extend "
                    f"{list(x[1] for x in rb[0])} (rem_chunk {rb[3]}, rem_input {rb[4]})")
    if len(sa) != len(sb):
        return f"{a.mode} has {len(sa)} rounds, {b.mode} has {len(sb)}"
    return None


def check_modes(traces: dict[str, Trace], gfx95: bool = False) -> CheckResult:
    """Cross-mode properties of one scenario: on == off off gfx95; page 1 off == forced."""
    out = CheckResult()
    off, on, forced = traces.get("off"), traces.get("on"), traces.get("forced")
    if off is not None and on is not None and not gfx95:
        if on.effective:
            out.failures.append(f"{_where(on)}: exact fill effective without gfx95 (gate leaked)")
        diff = first_difference(off, on)
        if diff:
            out.failures.append(f"{_where(on)}: not a no-op off gfx95: {diff}")
    if off is not None and forced is not None and off.scenario.page_size == 1:
        diff = first_difference(off, forced)
        if diff:
            out.failures.append(f"{_where(forced)}: page size 1 must make forced == off: {diff}")
    return out
