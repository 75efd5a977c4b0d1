"""The evidence, built once: one table of block values per (arm, mode, concurrency, metric).

A block is one client run (a run.json point), its value the client's summary over its requests;
every check reads this table, with each block's ``start`` and ``block`` index kept (points from
before blocks count as one block per start)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from servegate.core.metrics import finite_number
from servegate.core.results import point_slot

Key = tuple[str, str, int, str]          # (arm, mode, concurrency, metric)
Slot = tuple[int, int]                   # (start, block)


class MissingEvidence(ValueError):
    """The table has no usable blocks for what a check asks; the message says what is missing."""


@dataclass
class Evidence:
    """Block values by (arm, mode, concurrency, metric) -> {(start, block): value}."""

    label: str
    in_server: bool = False              # every mode inside the same server starts
    cells: dict[Key, dict[Slot, float]] = field(default_factory=dict)
    # a halves design: start -> the half it served on (run.json design.start_halves)
    halves: dict[int, int] = field(default_factory=dict)

    def halves_of(self, slots: Iterable[Slot]) -> list[int] | None:
        """Each start's half in :func:`as_matrix`'s start order (None: not a halves run)."""
        return [self.halves[s] for s in sorted({s for s, _ in slots})] if self.halves else None

    def add(self, arm: str, mode: str, concurrency: int, metric: str, start: int, block: int,
            value: float) -> None:
        self.cells.setdefault((arm, mode, concurrency, metric), {})[(start, block)] = value

    def concurrencies(self, arm: str, mode: str, metric: str | None = None) -> list[int]:
        return sorted({c for (a, m, c, name) in self.cells
                       if a == arm and m == mode and (metric is None or name == metric)})

    def modes(self, arm: str = "") -> list[str]:
        return sorted({m for (a, m, _c, _n) in self.cells if a == arm})

    def slots(self, arm: str, mode: str, concurrency: int, metric: str) -> dict[Slot, float]:
        return self.cells.get((arm, mode, concurrency, metric), {})

    def logs(self, arm: str, mode: str, concurrencies: list[int], metric: str,
             only: set[Slot] | None = None) -> dict[Slot, float]:
        """Log value per slot, averaged over ``concurrencies`` (slots present in all of them):
        the geometric mean across concurrencies, block by block, so the correlation between
        concurrencies measured in one block round stays in the block-to-block spread."""
        per_conc = [self.slots(arm, mode, c, metric) for c in concurrencies]
        if not per_conc or not all(per_conc):
            missing = [c for c, s in zip(concurrencies, per_conc, strict=True) if not s]
            raise MissingEvidence(f"{metric}: no blocks for {_name(arm, mode)} at "
                                  f"concurrency {missing or concurrencies}")
        common = set.intersection(*(set(s) for s in per_conc))
        if only is not None:
            common &= only
        out = {}
        for slot in common:
            values = [s[slot] for s in per_conc]
            if all(v > 0 for v in values):
                out[slot] = float(np.mean(np.log(values)))
        if not out:
            raise MissingEvidence(f"{metric}: no positive block values common to "
                                  f"{_name(arm, mode)} at concurrency {concurrencies}")
        return out


def _name(arm: str, mode: str) -> str:
    return f"{arm}-{mode}" if arm else mode


def as_matrix(values: dict[Slot, float]) -> np.ndarray:
    """``(1, starts, blocks)``: starts in order, each start's first B blocks, B the smallest
    count any start has (a complete run is balanced; an unbalanced one loses its extra blocks)."""
    by_start: dict[int, list[tuple[int, float]]] = defaultdict(list)
    for (start, block), value in values.items():
        by_start[start].append((block, value))
    blocks = min(len(v) for v in by_start.values())
    rows = [[value for _, value in sorted(by_start[start])[:blocks]]
            for start in sorted(by_start)]
    return np.asarray(rows, float)[None, :, :]


def paired_matrices(current: dict[Slot, float], reference: dict[Slot, float]
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Both sides on the slots they share (same start, same block round), as matrices."""
    common = set(current) & set(reference)
    if not common:
        raise MissingEvidence("no block measured in the same start and round for both modes")
    return (as_matrix({s: current[s] for s in common}),
            as_matrix({s: reference[s] for s in common}))


def evidence_from_run(run: dict[str, Any], label: str = "run") -> Evidence:
    design = run.get("design") or {}
    evidence = Evidence(label, in_server=bool(design.get("in_server")),
                        halves=dict(enumerate(design.get("start_halves") or ())))
    for point in run.get("points", []):
        start, block = point_slot(point)
        for metric, value in (point.get("metrics") or {}).items():
            if finite_number(value):
                evidence.add(str(point.get("arm", "")), point["mode"], int(point["concurrency"]),
                             metric, start, block, float(value))
    return evidence


def evidence_from_baseline(baseline: dict[str, Any]) -> Evidence:
    """A stored baseline's block values: each metric's ``blocks`` with the ``starts`` they ran
    in (schema 3; older files are upgraded on read), block indexes counted within each start."""
    design = baseline.get("design") or {}
    evidence = Evidence("baseline", in_server=bool(design.get("in_server")),
                        halves=dict(enumerate(design.get("start_halves") or ())))
    for point in baseline.get("points", []):
        for metric, entry in (point.get("metrics") or {}).items():
            seen: dict[int, int] = defaultdict(int)
            for start, value in zip(entry["starts"], entry["blocks"], strict=True):
                block = seen[int(start)]
                seen[int(start)] += 1
                if finite_number(value):
                    evidence.add("", point["mode"], int(point["concurrency"]), metric,
                                 int(start), block, float(value))
    return evidence
