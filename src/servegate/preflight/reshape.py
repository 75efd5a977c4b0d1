"""Proof that a shaped point measures what the full load would: each shaped concurrency replayed per
mode through sglang's real ``PrefillAdder`` with its shaped outputs and the full load's; a
difference in any round fails the cell (``misshaped``) naming the first round that differs (why:
docs/guide/before-gpu.md, Points shaped to their question)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from servegate.preflight.arrivals import PREFLIGHT_MODES, PointReplay


@dataclass(frozen=True)
class ModeProof:
    """One mode's comparison of a shaped point with its full load."""

    rounds: int                      # prefill rounds of the shaped replay
    full_rounds: int                 # ... and of the full load's
    saturated: int                   # saturated rounds (shaped)
    first_difference: int | None     # index of the first round that differs (None: identical)

    @property
    def holds(self) -> bool:
        return self.first_difference is None and self.rounds == self.full_rounds


@dataclass(frozen=True)
class ReshapeProof:
    concurrency: int
    output_len: int                  # the shaped point's output length
    full_output_len: int             # the full load's ([load].output_len)
    modes: dict[str, ModeProof]

    @property
    def holds(self) -> bool:
        return all(m.holds for m in self.modes.values())

    def contract(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "output_len": self.output_len,
                "full_output_len": self.full_output_len, "holds": self.holds,
                "modes": {name: {"rounds": m.rounds, "full_rounds": m.full_rounds,
                                 "saturated": m.saturated,
                                 "first_difference": m.first_difference, "holds": m.holds}
                          for name, m in self.modes.items()}}

    def reason(self) -> str:
        bad = {name: m for name, m in self.modes.items() if not m.holds}
        parts = [f"{name}: {m.rounds} rounds vs {m.full_rounds}"
                 + ("" if m.first_difference is None
                    else f", first differing at round {m.first_difference + 1}")
                 for name, m in bad.items()]
        return (f"shaped point c{self.concurrency} ({self.output_len} output tokens) does not "
                f"admit the full load's ({self.full_output_len}) prefill rounds ("
                + "; ".join(parts) + "): its TTFT would measure another schedule (lengths "
                "spread by [load].range_ratio < 1 stagger a wave's finishes)")


def compare_rounds(shaped: PointReplay, full: PointReplay) -> ModeProof:
    """Round by round: tokens admitted and saturation."""
    pairs = zip(zip(shaped.batches, shaped.saturated, strict=True),
                zip(full.batches, full.saturated, strict=True), strict=False)
    first = next((i for i, (a, b) in enumerate(pairs) if a != b), None)
    if first is None and len(shaped.batches) != len(full.batches):
        first = min(len(shaped.batches), len(full.batches))
    return ModeProof(rounds=len(shaped.batches), full_rounds=len(full.batches),
                     saturated=sum(shaped.saturated), first_difference=first)


# (concurrency, output length, mode) -> the replay of the suite's first repeat at that point
Replay = Callable[[int, int, str], PointReplay]


def prove(concurrencies: tuple[int, ...], output_len_at: Callable[[int], int],
          full_output_len: int, replay: Replay) -> list[ReshapeProof]:
    """A proof per shaped concurrency (those whose output differs from the full load's)."""
    proofs = []
    for conc in concurrencies:
        shaped_len = output_len_at(conc)
        if shaped_len == full_output_len:
            continue
        modes = {mode: compare_rounds(replay(conc, shaped_len, mode),
                                      replay(conc, full_output_len, mode))
                 for mode in PREFLIGHT_MODES}
        proofs.append(ReshapeProof(conc, shaped_len, full_output_len, modes))
    return proofs
