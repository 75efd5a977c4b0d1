"""The admission suite's table: how close each mode's saturated batches come to the chunk size."""

from __future__ import annotations

from dataclasses import dataclass

from servegate.admission.ledger_checks import LedgerReport
from servegate.admission.replay import Trace


@dataclass(frozen=True)
class ModeStats:
    admissions: int
    saturated: int
    at_chunk: int
    smallest_saturated: int | None
    shortfall: int              # sum over saturated rounds of chunk_size - batch_tokens


def mode_stats(trace: Trace) -> ModeStats:
    chunk = trace.scenario.chunk_size
    saturated = [r for r in trace.rounds if r.saturated]
    return ModeStats(
        admissions=sum(len(r.admissions) for r in trace.rounds),
        saturated=len(saturated),
        at_chunk=sum(r.batch_tokens == chunk for r in saturated),
        smallest_saturated=min((r.batch_tokens for r in saturated), default=None),
        shortfall=sum(chunk - r.batch_tokens for r in saturated),
    )


HEADER = ["scenario", "admissions off/forced", "saturated at chunk off", "saturated at chunk forced",
          "smallest saturated off/forced", "shortfall off/forced"]


def rows(traces: list[Trace]) -> list[list[str]]:
    by_scenario: dict[str, dict[str, Trace]] = {}
    for trace in traces:
        by_scenario.setdefault(trace.scenario.scenario_id, {})[trace.mode] = trace
    out = []
    for sid in sorted(by_scenario):
        modes = by_scenario[sid]
        off = mode_stats(modes["off"]) if "off" in modes else None
        forced = mode_stats(modes["forced"]) if "forced" in modes else None

        def pair(attr: str, off: ModeStats | None = off, forced: ModeStats | None = forced) -> str:
            values = [getattr(s, attr) if s else None for s in (off, forced)]
            return " / ".join("-" if v is None else str(v) for v in values)

        def ratio(stats: ModeStats | None) -> str:
            return f"{stats.at_chunk}/{stats.saturated}" if stats else "-"

        out.append([sid, pair("admissions"), ratio(off), ratio(forced),
                    pair("smallest_saturated"), pair("shortfall")])
    return out


def markdown(traces: list[Trace], failures: list[str], findings: list[str], diffs: list[str],
             header: str) -> str:
    lines = [f"# Admission suite\n\n{header}\n",
             f"- scenarios: {len({t.scenario.scenario_id for t in traces})}, replays: {len(traces)}",
             f"- failures: {len(failures)}, golden-trace differences: {len(diffs)}, "
             f"findings: {len(findings)}\n",
             "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(row) + " |" for row in rows(traces)]
    for title, items in (("Failures", failures), ("Golden-trace differences", diffs),
                         ("Findings (by design, for users)", findings)):
        if items:
            lines += ["", f"## {title}", ""] + [f"- {item}" for item in items]
    return "\n".join(lines) + "\n"


def print_table(traces: list[Trace]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Admission: saturated prefill batches vs chunk size")
    for column in HEADER:
        table.add_column(column, no_wrap=column == "scenario")
    for row in rows(traces):
        table.add_row(*row)
    Console(width=200).print(table)


def ledger_lines(reports: list[LedgerReport], not_built: list[dict[str, str]]) -> list[str]:
    """Each ledger scenario's invariants (holds / FAILS) and findings by name; what was not built."""
    lines = []
    for rep in reports:
        lines.append(f"- {rep.scenario} ({rep.kind}; {', '.join(rep.modes)})")
        for inv in rep.invariants.values():
            lines.append(f"  - {inv.name}: {'holds' if inv.holds else 'FAILS'}")
        lines += [f"  - FINDING {f.name}: {f.detail}" for f in rep.findings]
    for item in not_built:
        what = item.get("what") or item.get("scenario")
        lines.append(f"- not built on this CPU sglang: {item['kind']}: {what}: {item['why']}")
    return lines
