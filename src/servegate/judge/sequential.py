"""Block rounds as looks: a group-sequential boundary so a run can stop once its verdict is known
(a gated regression, or every gated check decided). ``[design] looks`` names the block counts;
levels are O'Brien-Fleming-type alpha spending (``[design] spending_power`` rho: ``alpha t^rho``,
Kim and DeMets) turned into per-look nominal levels, and what the
Holm family of t intervals gives is measured by ``servegate calibrate``: docs/judge.md,
Sequential looks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy import optimize
from scipy import stats as sps

from servegate.core.results import Run, point_slot

_GRID = 1001               # Simpson points over a look's continuation region (odd)


def spent(fraction: float, alpha: float, power: float | None = None) -> float:
    """Alpha spent by information fraction ``fraction`` (O'Brien-Fleming-type spending; with
    ``power``, the power family's ``alpha fraction^power``: kinder to the early looks)."""
    if fraction >= 1.0 or power is not None:
        return alpha * min(fraction, 1.0) ** (power or 1.0)
    z = sps.norm.ppf(1.0 - alpha / 2.0)
    return float(2.0 - 2.0 * sps.norm.cdf(z / np.sqrt(fraction)))


def look_fractions(looks: Sequence[int], blocks: int) -> list[float]:
    """Information fractions of the looks, the final look (all ``blocks``) last."""
    return [k / blocks for k in looks if k < blocks] + [1.0]


def nominal_levels(looks: Sequence[int], blocks: int, alpha: float,
                   power: float | None = None) -> list[float]:
    """Two-sided nominal level per look (the final look last): look ``i`` rejects at
    ``|z| >= c_i`` where ``P(first crossing at look i) = spent(t_i) - spent(t_{i-1})``."""
    return list(_levels(tuple(look_fractions(looks, blocks)), float(alpha), power))


@lru_cache(maxsize=64)
def _levels(fractions: tuple[float, ...], alpha: float,
            power: float | None) -> tuple[float, ...]:
    """By the recursive integration of Armitage, McPherson and Rowe (1969): the density of the
    score ``S = Z sqrt(t)`` of the paths no look stopped, carried from look to look on a grid
    (Simpson) by the increment ``N(0, t - t_prev)``: fast for any number of looks."""
    levels: list[float] = []
    previous, last = 0.0, 0.0
    grid, weights = np.zeros(1), np.ones(1)         # every path starts at S = 0
    simpson = np.ones(_GRID)
    simpson[1:-1:2], simpson[2:-1:2] = 4.0, 2.0
    for t in fractions:
        step = spent(t, alpha, power) - previous
        previous += step
        sd = float(np.sqrt(t - last))

        def first_crossing(c: float, t: float = t, sd: float = sd, w: np.ndarray = weights,
                           u: np.ndarray = grid, step: float = step) -> float:
            edge = c * np.sqrt(t)
            return float((w * (sps.norm.cdf((-edge - u) / sd)
                               + sps.norm.sf((edge - u) / sd))).sum()) - step

        bound = float(optimize.brentq(first_crossing, 0.1, 12.0, xtol=1e-9))
        points = np.linspace(-bound * np.sqrt(t), bound * np.sqrt(t), _GRID)
        density = (sps.norm.pdf((points[:, None] - grid[None, :]) / sd) / sd) @ weights
        grid, weights, last = points, density * simpson * (points[1] - points[0]) / 3.0, t
        levels.append(float(2.0 * sps.norm.sf(bound)) if levels else step)
    return tuple(levels)


class FirstStops:
    """Simulated nights walked through a design's looks in order: each night is kept at the
    first look that stops it (:func:`stops`), and the final look (all ``blocks``) stops every
    night left; ``ran`` holds the blocks per start each night ran to."""

    def __init__(self, nights: int, blocks: int) -> None:
        self.blocks = blocks
        self.ran = np.full(nights, blocks)
        self._done = np.zeros(nights, dtype=bool)

    def take(self, at: int, codes: np.ndarray, gating: np.ndarray) -> np.ndarray:
        """The nights this look (``at`` blocks) ends, recorded as run to ``at``."""
        stop = np.ones_like(self._done) if at == self.blocks else stops(codes, gating)
        taken = stop & ~self._done
        self.ran[taken] = at
        self._done |= taken
        return taken


def stops(codes: np.ndarray, gating: np.ndarray) -> np.ndarray:
    """Whether a look ends the run, per night (last axis: the family's checks, verdict codes of
    :data:`servegate.judge.stats.CODES`): a gated regression, or no check inconclusive or short
    of the power to gate (a no-op TOST reported, not gating: more blocks may let it gate)."""
    regression = ((codes == 1) & gating).any(axis=-1)
    decided = ~(((codes == 3) & gating) | ~gating).any(axis=-1)
    return regression | decided


@dataclass(frozen=True)
class Look:
    """One look of a sequential design: the blocks per start it judges and its family level."""

    index: int                      # 0-based; the final look is ``count - 1``
    count: int
    blocks: int
    of_blocks: int
    level: float                    # family-wise alpha at this look

    @property
    def final(self) -> bool:
        return self.index == self.count - 1

    def note(self) -> str:
        seen = (f"the first {self.blocks} of {self.of_blocks} blocks of every start"
                if self.unit == "blocks" else f"{self.blocks} of 2 starts, the second (a "
                "crossover) only when the first is undecided")
        return (f"sequential design: look {self.index + 1} of {self.count} ({seen}), "
                f"family-wise level {100 * self.level:.3g}% ({self.spending} alpha spending "
                f"over looks at {self.schedule} {self.unit})")

    schedule: tuple[int, ...] = ()
    unit: str = "blocks"            # or "starts": a one-start live pair's crossover
    spending: str = "O'Brien-Fleming"


def look_at(design: dict[str, Any], alpha: float, blocks: int | None) -> Look | None:
    """The look a judgement is at: ``blocks`` per start (None: the final look), for a design
    with ``looks`` or a ``crossover`` (looks over its 2 starts); None without."""
    crossover = bool(design.get("crossover"))
    looks = [1] if crossover else [int(k) for k in design.get("looks") or []]
    if not looks or not design.get("in_server"):
        return None
    total, unit = (2, "starts") if crossover else (int(design["blocks"]), "blocks")
    at = total if blocks is None else int(blocks)
    if at not in (*looks, total):
        raise ValueError(f"no look after {at} {unit} (looks: {[*looks, total]})")
    index = (*looks, total).index(at)
    power = design.get("spending_power")
    level = nominal_levels(looks, total, alpha, power)[index]
    return Look(index, len(looks) + 1, at, total, level, (*looks, total), unit,
                f"alpha t^{power:g}" if power else "O'Brien-Fleming")


def stopped_at(run: dict[str, Any]) -> int | None:
    """Blocks per start at which the run stopped early (run.json ``sequential``), else None."""
    value = (run.get("sequential") or {}).get("stopped_at_blocks")
    return int(value) if value is not None else None


def at_look(run: Run, look: Look) -> Run:
    """The run as the look sees it: the first ``look.blocks`` blocks of every start (starts)."""
    axis = 1 if look.unit == "blocks" else 0
    points = [p for p in run.get("points") or [] if point_slot(p)[axis] < look.blocks]
    return {**run, "points": points}  # type: ignore[typeddict-item]
