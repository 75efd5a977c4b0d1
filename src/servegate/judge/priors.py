"""Where the judge's noise priors come from: the suite's stated figures, or a profile learned from
the runner's own nights (servegate.history.profile) once it is worth more degrees of freedom.
A small protocol because the judge sits below the history (import layers): the history answers
"the prior for this level of this series", the judge keeps the rule and names the source."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class LevelPrior:
    """A prior variance (log scale) worth ``dof`` degrees of freedom, and where it came from."""

    var: float
    dof: float
    source: str                 # e.g. "[judge] interaction_cv in suites/nightly.toml"
    learned: bool = False       # from the runner's history (not a typed figure)

    def text(self) -> str:
        """``log-sd 0.008 (14 dof) from 14 nights of mi355x history``."""
        dof = "exact" if self.dof <= 0 else f"{self.dof:g} dof"
        return f"log-sd {math.sqrt(max(self.var, 0.0)):.4f} ({dof}) from {self.source}"


class PriorSource(Protocol):
    """A learned noise profile the judge may consult (None: nothing learned for that series)."""

    def interaction(self, mode: str, reference: str, metric: str,
                    concs: tuple[int, ...]) -> LevelPrior | None: ...

    def start(self, mode: str, metric: str, concs: tuple[int, ...]) -> LevelPrior | None: ...

    def pair(self, mode: str, metric: str, concs: tuple[int, ...]) -> LevelPrior | None: ...

    def notes(self) -> list[str]: ...


def choose(stated: LevelPrior, learned: LevelPrior | None) -> LevelPrior:
    """The learned prior once it is worth more degrees of freedom than the stated one. A
    stated figure worth 0 dof is kept: it says the run's measurement decides alone (e.g.
    against ``history:N``, whose nights measure the start level) or the figure is exact."""
    if learned is None or stated.dof <= 0 or learned.dof <= stated.dof:
        return stated
    return learned
