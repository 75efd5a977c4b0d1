"""Preflight output: the JSON contract (one object) and a rich table for people."""

from __future__ import annotations

from typing import Any

from servegate.preflight.cells import Cell, ModeSummary
from servegate.serve.gate import on_cell


def contract(sglang_version: str, cells: list[Cell], seconds: float) -> dict[str, Any]:
    """``{"sglang_version", "cells": [...]}``; other tools rely on these keys."""
    return {"sglang_version": sglang_version, "cells": [c.contract() for c in cells],
            "failed": sum(c.fails for c in cells), "seconds": round(seconds, 1)}


def _pair(cell: Cell, key: str) -> str:
    """``off/exact`` values of one statistic, e.g. ``0%/100%``."""
    values = []
    for name in ("off", "exact"):
        summary: ModeSummary | None = cell.modes.get(name)
        value = None if summary is None else getattr(summary, key)
        if value is None:
            values.append("-")
        elif key == "aligned_fraction":
            values.append(f"{value:.0%}")
        else:
            values.append(str(value))
    return "/".join(values)


def print_table(sglang_version: str, cells: list[Cell], seconds: float) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"servegate preflight (sglang {sglang_version}, {seconds:.1f} s)")
    for column in ("suite", "runner", "status", "gate: on cell", "chunk/max prefill/page/dp",
                   "saturated off/exact", "at chunk off/exact", "smallest off/exact"):
        table.add_column(column)
    for cell in cells:
        budget = cell.budget
        sizes = ("-" if budget is None else
                 f"{budget.chunk_size}/{budget.max_prefill_tokens}/{budget.page_size}/"
                 f"{budget.dp_size}")
        style = "red" if cell.fails else ("yellow" if cell.status != "ok" else "green")
        status = cell.status + ("" if cell.gating else " (not gating)")
        gate = f"{'open' if cell.gate.gate_open else 'closed'}: {on_cell(cell.gate.gate_open)}"
        table.add_row(cell.suite, cell.runner, f"[{style}]{status}[/{style}]", gate, sizes,
                      _pair(cell, "saturated_batches"), _pair(cell, "aligned_fraction"),
                      _pair(cell, "min_saturated_tokens"))
    console = Console()
    console = Console(width=max(console.width, 110))   # CI logs: no truncated columns
    console.print(table)
    for cell in cells:
        pair = cell.live_pair
        if pair:
            split = pair["devices"]
            where = (f" (base {split['base']}, head {split['head']} in the first start)"
                     if split else "")
            console.print(f"{cell.suite} x {cell.runner}: head vs base: {pair['note']}{where}",
                          markup=False, highlight=False)
        for proof in cell.reshaped:
            if proof.holds:
                rounds = ", ".join(f"{name} {m.rounds} ({m.saturated} saturated)"
                                   for name, m in proof.modes.items())
                console.print(f"{cell.suite} x {cell.runner}: shaped c{proof.concurrency} "
                              f"({proof.output_len} output tokens) admits the full load's "
                              f"({proof.full_output_len}) prefill rounds: {rounds}",
                              markup=False, highlight=False)
        for reason in cell.reasons:
            console.print(f"{cell.suite} x {cell.runner}: {cell.status}: {reason}",
                          markup=False, highlight=False)
