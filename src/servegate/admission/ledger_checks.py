"""Ledger invariants: what must hold of sglang's prefill ledger in a ledger scenario, by name.

Each invariant is checked on every mode it applies to and reported holding or not (a failure
line starts ``scenario [mode]: name:`` like the matrix's, so ``admission ab`` reads it). Findings
are behaviour users should know, reported by name with their numbers (the tile budget refusing
the exact-fill chunk), never a silent pass.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from servegate.admission.checks import first_difference
from servegate.admission.replay import Admission, Trace


@dataclass
class Invariant:
    name: str
    holds: bool = True
    details: list[str] = field(default_factory=list)

    def fail(self, where: str, detail: str) -> None:
        self.holds = False
        self.details.append(f"{where}: {self.name}: {detail}")


@dataclass
class Finding:
    name: str
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class LedgerReport:
    scenario: str
    kind: str
    modes: list[str]
    invariants: dict[str, Invariant] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def check(self, name: str) -> Invariant:
        return self.invariants.setdefault(name, Invariant(name))

    @property
    def failures(self) -> list[str]:
        return [d for inv in self.invariants.values() for d in inv.details]

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "kind": self.kind, "modes": self.modes,
                "invariants": [{"name": i.name, "holds": i.holds, "failures": i.details}
                               for i in self.invariants.values()],
                "findings": [{"name": f.name, "detail": f.detail, **f.data} for f in self.findings]}


def _ceil(tokens: int, page: int) -> int:
    return -(-tokens // page) * page


def _where(trace: Trace, index: int | None = None) -> str:
    where = f"{trace.scenario.scenario_id} [{trace.mode}]"
    return where if index is None else f"{where} round {index}"


def _continuation(adm: Admission) -> bool:
    """Ledger scenarios share no prefixes, so a cached prefix means an earlier chunk."""
    return adm.prefix_len > 0


def check_ledger(traces: dict[str, Trace]) -> LedgerReport:
    """Every invariant of one ledger scenario across its modes, and its findings."""
    first = next(iter(traces.values()))
    spec = first.scenario.ledger
    assert spec is not None
    report = LedgerReport(first.scenario.scenario_id, spec.kind, list(traces))
    for trace in traces.values():
        _common(report, trace)
        {"tile-budget": _tile, "swa": _swa, "mamba": _mamba, "dllm": _dllm}[spec.kind](report, trace)
    if "off" in traces and "forced" in traces:
        _forced_vs_off(report, traces["off"], traces["forced"])
        if spec.kind in ("mamba", "dllm") and not traces["forced"].effective:
            diff = first_difference(traces["off"], traces["forced"])
            if diff:
                report.check("excluded-forced-equals-off").fail(_where(traces["forced"]), diff)
            else:
                report.check("excluded-forced-equals-off")
    return report


def _common(report: LedgerReport, trace: Trace) -> None:
    sc = trace.scenario
    kv = report.check("kv-page-ceiled")
    cost = int(trace.ledger.get("mamba_slot_cost", 0))
    for rnd in trace.rounds:
        if sc.ledger is not None and sc.ledger.kind != "dllm" and rnd.batch_tokens > sc.chunk_size:
            report.check("batch-within-chunk").fail(
                _where(trace, rnd.index), f"{rnd.batch_tokens} tokens > chunk {sc.chunk_size}")
        for adm in rnd.admissions:
            gap = adm.ledger.get("mamba_slots", 0) * cost
            expected = _ceil(adm.extend_len, sc.page_size) + sc.page_size + gap
            if adm.kv_reserved != expected:
                kv.fail(_where(trace, rnd.index),
                        f"{adm.rid} grew the KV offset by {adm.kv_reserved}, expected "
                        f"ceil_page({adm.extend_len}) + page {sc.page_size}"
                        + (f" + mamba gap {gap}" if gap else "") + f" = {expected}")
    report.check("batch-within-chunk")
    leaks = report.check("slots-and-rows-return")
    if trace.free_after + trace.evictable_after != trace.pool_tokens:
        leaks.fail(_where(trace), f"free {trace.free_after} + evictable {trace.evictable_after} "
                                  f"!= pool {trace.pool_tokens}")
    if trace.rows_free_after != trace.rows_total:
        leaks.fail(_where(trace), f"{trace.rows_free_after} of {trace.rows_total} rows free")
    for note in trace.notes:
        leaks.fail(_where(trace), note)


def _forced_vs_off(report: LedgerReport, off: Trace, forced: Trace) -> None:
    """Forced never admits fewer tokens than off in a round (while their histories agree)
    unless a named budget refused it; a refusal is a finding with its numbers."""
    inv = report.check("forced-not-below-off-unless-named-budget")
    for a, b in zip(off.rounds, forced.rounds, strict=False):
        if b.batch_tokens < a.batch_tokens:
            refusals = b.ledger.get("tile_refusals", [])
            if not refusals:
                inv.fail(_where(forced, b.index), f"forced admits {b.batch_tokens} tokens, off "
                                                  f"{a.batch_tokens}, and no named budget refused")
            for refusal in refusals:
                report.findings.append(_tile_finding(off, forced, a.extend_lens, b.extend_lens,
                                                     b.index, refusal))
        if [x.extend_len for x in a.admissions] != [x.extend_len for x in b.admissions]:
            return      # later rounds start from different states: no longer comparable


def _tile_finding(off: Trace, forced: Trace, off_lens: list[int], forced_lens: list[int],
                  index: int, refusal: dict[str, Any]) -> Finding:
    sc = forced.scenario
    detail = (f"{sc.scenario_id} round {index}: {refusal['mode']} tile budget "
              f"{refusal['budget']} refused forced's {refusal['candidate']}-token chunk "
              f"({refusal['tiles']} tiles > {refusal['budget']}) with no smaller page-aligned "
              f"retry: forced admits {sum(forced_lens)} ({' + '.join(map(str, forced_lens))}), "
              f"off admits {sum(off_lens)} ({' + '.join(map(str, off_lens))})")
    return Finding("tile-budget-refusal", detail, {
        "round": index, "refused_len": refusal["candidate"], "tiles": refusal["tiles"],
        "budget": refusal["budget"], "tile_mode": refusal["mode"],
        "forced_tokens": sum(forced_lens), "off_tokens": sum(off_lens),
        "forced_extend_lens": forced_lens, "off_extend_lens": off_lens})


def _tile(report: LedgerReport, trace: Trace) -> None:
    spec = trace.scenario.ledger
    assert spec is not None and spec.tile_budget is not None
    refused = [r for rnd in trace.rounds for r in rnd.ledger.get("tile_refusals", [])]
    binds = report.check("tile-budget-binds-when-forced")
    if trace.mode == "forced" and not refused:
        binds.fail(_where(trace), f"budget {spec.tile_budget} refused nothing: the scenario no "
                                  f"longer exercises the tile budget")
    # A round's first request is never checked (sglang admits it whatever its tiles).
    over = [rnd for rnd in trace.rounds
            if len(rnd.admissions) > 1 and rnd.ledger.get("tiles", 0) > spec.tile_budget]
    if over and trace.ledger.get("tile_admitted_attr_missing"):
        rnd = over[0]
        report.findings.append(Finding(
            "tile-budget-ignores-admitted",
            f"{_where(trace, rnd.index)}: the round's {spec.tile_budget_mode} tiles are "
            f"{rnd.ledger['tiles']} > budget {spec.tile_budget} ({' + '.join(map(str, rnd.extend_lens))} "
            f"tokens): _admitted_extend_lens reads Req.extend_input_len, which this sglang's Req "
            f"does not have, so admitted requests count 0 tiles",
            {"round": rnd.index, "mode": trace.mode, "tiles": rnd.ledger["tiles"],
             "budget": spec.tile_budget, "extend_lens": rnd.extend_lens}))


def _swa(report: LedgerReport, trace: Trace) -> None:
    spec = trace.scenario.ledger
    assert spec is not None
    chunk = trace.scenario.chunk_size
    admissions = [(rnd.index, a) for rnd in trace.rounds for a in rnd.admissions]
    within = report.check("swa-capped-chunk-taken-at-cap")
    for index, adm in admissions:
        limit = adm.ledger.get("chunk_tokens_limit")
        capped = adm.chunked and limit is not None and limit < chunk
        if capped and (adm.extend_len > limit or (trace.mode == "forced" and adm.extend_len != limit)):
            within.fail(_where(trace, index), f"{adm.rid} cut at {adm.extend_len} under an "
                                              f"SWA chunk_tokens_limit of {limit}")
    if not any(_continuation(a) for _, a in admissions):
        report.check("continuations-replayed").fail(_where(trace), "no chunked continuation")
    report.check("continuations-replayed")
    if spec.swa_ring:
        ring = report.check("swa-continuation-charged-to-ring-once")
        cost = trace.ledger.get("swa_ring_cost", 0)
        for index, adm in admissions:
            expected = 0 if _continuation(adm) else cost
            if adm.ledger.get("swa_reserved") != expected:
                ring.fail(_where(trace, index), f"{adm.rid} charged {adm.ledger.get('swa_reserved')} "
                                                f"to the SWA ring, expected {expected}")
    elif not any(a.ledger.get("chunk_tokens_limit", chunk) < chunk for _, a in admissions):
        report.check("swa-cap-below-chunk").fail(
            _where(trace), "chunk_tokens_limit never went below the chunk: the SWA pool does not bind")
    else:
        report.check("swa-cap-below-chunk")


def _mamba(report: LedgerReport, trace: Trace) -> None:
    gap = report.check("mamba-gap-reserve-per-new-state")
    for rnd in trace.rounds:
        for adm in rnd.admissions:
            expected = 0 if _continuation(adm) else 1
            if adm.ledger.get("mamba_slots") != expected:
                gap.fail(_where(trace, rnd.index), f"{adm.rid} debited {adm.ledger.get('mamba_slots')} "
                                                   f"mamba slots, expected {expected}")
    if trace.mode == "forced":
        sharing = bool(trace.ledger.get("prefix_sharing"))
        if trace.effective == sharing:
            report.check("mamba-prefix-sharing-excludes-exact-fill").fail(
                _where(trace), f"exact fill effective {trace.effective} with prefix sharing {sharing}")
    report.check("mamba-prefix-sharing-excludes-exact-fill")


def _dllm(report: LedgerReport, trace: Trace) -> None:
    page = trace.scenario.page_size
    budget = report.check("dllm-budget-page-ceiled")
    for rnd in trace.rounds:
        for adm in rnd.admissions:
            if adm.ledger.get("dllm_charge") != _ceil(adm.extend_len, page):
                budget.fail(_where(trace, rnd.index),
                            f"{adm.rid} took {adm.ledger.get('dllm_charge')} off rem_dllm_tokens, "
                            f"expected ceil_page({adm.extend_len}) = {_ceil(adm.extend_len, page)}")
    excluded = report.check("dllm-excludes-exact-fill")
    if trace.mode == "forced" and trace.effective:
        excluded.fail(_where(trace), "forced exact fill stayed on with a DllmConfig")
