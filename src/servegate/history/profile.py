"""The noise profile a runner class x model x suite has shown over its last nights (start level,
start x mode interaction, block level, each with its dof), learned with the judge's own estimator
so that the judge can use it in place of a suite's typed figures once it is worth more degrees of
freedom (docs/history.md, Learned noise profile; judge/priors.py)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from servegate.history.load import LoadChange, comparable, load_id, regimes
from servegate.history.noise_profile import (
    OUT_LEVEL,
    PAIR_OUT_LEVEL,
    night_levels,
    pair_levels,
    pool,
)
from servegate.history.records import ACCURACY_METRIC, Record
from servegate.history.store import read_store
from servegate.judge.evidence import Evidence, MissingEvidence, as_matrix, paired_matrices
from servegate.judge.priors import LevelPrior

DEFAULT_PROFILE_NIGHTS = 30


@dataclass(frozen=True)
class Night:
    """One stored run of the series' identity, as the judge's evidence table."""

    run_id: str
    time: str
    in_server: bool
    evidence: Evidence


@dataclass
class LearnedProfile:
    """Levels learned on demand per (level, modes, metric, concurrencies) from ``nights``
    (oldest first); what the judge consulted is kept for :meth:`notes`."""

    runner_class: str
    model: str
    suite: str
    nights: tuple[Night, ...]
    consulted: dict[tuple[str, ...], LevelPrior | None] = field(default_factory=dict)
    out_of_profile: dict[str, list[str]] = field(default_factory=dict)   # start levels: health
    left_out: dict[str, list[str]] = field(default_factory=dict)   # interaction, live pairs
    # every load change among the identity's nights, oldest first; ``nights`` are after the last
    load_changes: tuple[LoadChange, ...] = ()
    pairs: tuple[Night, ...] = ()       # the suite's head-vs-base live pairs of the class
    unknown_hardware: int = 0           # nights of unknown hardware among ``nights``

    def _learn(self, key: tuple[str, ...], matrices: list[tuple[str, np.ndarray]]
               ) -> LevelPrior | None:
        if key in self.consulted:
            return self.consulted[key]
        levels: list[tuple[str, float, float, float]] = []
        for run_id, m in matrices:
            if key[0] == "pair":
                var, carried = pair_levels(m[0])            # one per start
                levels += [(run_id, float(v), 1.0, float(c))
                           for v, c in zip(var, carried, strict=True)]
            elif m.shape[-2] >= 2:
                lv = night_levels(m)
                levels.append((run_id, *(float(x.reshape(-1)[0])
                                          for x in (lv.var, lv.dof, lv.carried))))
        found: LevelPrior | None = None
        if levels:
            pooled = pool(*(np.array([lv[i] for lv in levels]) for i in (1, 2, 3)),
                          out_level=PAIR_OUT_LEVEL if key[0] == "pair" else OUT_LEVEL)
            out = sorted({lv[0] for lv, o in zip(levels, pooled.out, strict=True) if o})
            if out:
                (self.out_of_profile if key[0] == "start" else self.left_out)[
                    " ".join(key)] = out
            dof = float(pooled.dof)
            if dof > 0 and math.isfinite(float(pooled.var)):
                what = "live pairs" if key[0] == "pair" else "nights"
                source = f"{int(pooled.nights)} {what} of {self.runner_class} history"
                if out:
                    source += f" ({len(out)} out of profile left out: {', '.join(out)})"
                found = LevelPrior(float(pooled.var), dof, source, learned=True)
        self.consulted[key] = found
        return found

    @staticmethod
    def _paired(nights: Iterable[Night], current: tuple[str, str], reference: tuple[str, str],
                concs: tuple[int, ...], metric: str) -> list[tuple[str, np.ndarray]]:
        """Per night, (arm, mode) ``current`` - ``reference`` paired by start and block round
        (averaged over ``concs`` block by block, as the judge reads them)."""
        out = []
        for night in nights:
            try:
                a, b = paired_matrices(*(night.evidence.logs(arm, mode, list(concs), metric)
                                         for arm, mode in (current, reference)))
            except MissingEvidence:
                continue
            out.append((night.run_id, a - b))
        return out

    def interaction(self, mode: str, reference: str, metric: str,
                    concs: tuple[int, ...]) -> LevelPrior | None:
        """The start x mode interaction of ``mode`` vs ``reference``."""
        return self._learn(("interaction", mode, reference, metric, *map(str, concs)),
                           self._paired((n for n in self.nights if n.in_server), ("", mode),
                                        ("", reference), concs, metric))

    def start(self, mode: str, metric: str, concs: tuple[int, ...]) -> LevelPrior | None:
        """The start level of ``mode`` (its starts' spread inside a night)."""
        matrices = []
        for night in self.nights:
            try:
                matrices.append((night.run_id, as_matrix(night.evidence.logs(
                    "", mode, list(concs), metric))))
            except MissingEvidence:
                continue
        return self._learn(("start", mode, metric, *map(str, concs)), matrices)

    def pair(self, mode: str, metric: str, concs: tuple[int, ...]) -> LevelPrior | None:
        """A live pair's start level: head - base of the earlier pairs, each start one
        measurement around no change (a pair that moved is left out)."""
        return self._learn(("pair", mode, metric, *map(str, concs)), self._paired(
            self.pairs, ("head", mode), ("base", mode), concs, metric))

    def notes(self) -> list[str]:
        """One line per level the judge consulted, and every night left out of it."""
        lines = []
        for key, prior in self.consulted.items():
            if prior is not None:
                lines.append(f"learned {' '.join(key)}: {prior.text()}" + (
                    " (taken once worth more dof than the suite's prior)" * (key[0] == "pair")))
        for key, runs in self.out_of_profile.items():
            lines.append(f"out of profile ({key}): {', '.join(runs)}: a runner-health "
                         "signal, not averaged into the profile")
        for key, runs in self.left_out.items():
            lines.append(f"left out of the learned {key}: {', '.join(runs)} (a pair that moved "
                         "or a mode apart in a start: not noise, not a runner-health signal)")
        if self.unknown_hardware and lines:
            lines.append(f"{self.unknown_hardware} of {len(self.nights)} nights learned from: "
                         "hardware unknown (stored before it was recorded), pooled")
        if self.load_changes and lines:
            last = self.load_changes[-1]
            lines.append(f"learned only from nights since the load changed at {last.run_id} "
                         f"({last.changed})")
        return lines


def _night(records: list[Record]) -> Night:
    evidence = Evidence(records[0].run_id, in_server=bool(records[0].design
                                                          and records[0].design.in_server))
    for record in records:
        if record.metric == ACCURACY_METRIC or record.concurrency is None:
            continue
        for value, start, block in zip(record.values, record.starts, record.blocks,
                                       strict=True):
            evidence.add(record.arm, record.mode, record.concurrency, record.metric, start,
                         block, value)
    return Night(records[0].run_id, records[0].time, evidence.in_server, evidence)


def learn_profile(records: Iterable[Record], runner_class: str, model: str, suite: str, *,
                  nights: int = DEFAULT_PROFILE_NIGHTS,
                  exclude_run_ids: Iterable[str] = (),
                  loads: Mapping[int, str] | None = None,
                  hardware: str | None = None) -> LearnedProfile | None:
    """The profile of the last ``nights`` stored runs of (runner, model, suite) in the newest
    load regime, the runs in ``exclude_run_ids`` (the run being judged) and, given ``loads``
    (the judged run's load id per concurrency) and ``hardware`` (its digest), runs of another
    load or hardware left out; None when there are none."""
    if nights < 1:
        raise ValueError(f"noise profile: nights must be >= 1, got {nights}")
    excluded = set(exclude_run_ids)
    by_run: dict[str, list[Record]] = defaultdict(list)
    for record in records:
        # the raw fields, not ``identity``: a live pair's per-tree lines are read here too
        if (record.runner_class, record.model, record.suite) == (runner_class, model, suite) \
                and record.run_id not in excluded and comparable(record.hardware, hardware):
            by_run[record.run_id].append(record)
    runs = sorted(by_run.values(), key=lambda rs: (rs[0].time, rs[0].run_id))
    if loads:
        runs = [rs for rs in runs if all(comparable(load_id(r), loads.get(r.concurrency or 0))
                                         for r in rs)]
    start, changes = regimes(runs)
    chosen = [rs for rs in runs[start:] if not rs[0].arm][-nights:]
    pairs = [rs for rs in runs[start:] if rs[0].arm and rs[0].design and rs[0].design.in_server]
    if not chosen and not pairs:
        return None
    return LearnedProfile(runner_class, model, suite, tuple(_night(rs) for rs in chosen),
                          load_changes=tuple(changes),
                          pairs=tuple(_night(rs) for rs in pairs[-nights:]),
                          unknown_hardware=sum(
                              rs[0].hardware is None for rs in chosen) if hardware else 0)


def profile_from_store(store: Path, runner_class: str, model: str, suite: str, *,
                       nights: int = DEFAULT_PROFILE_NIGHTS,
                       exclude_run_ids: Iterable[str] = (),
                       loads: Mapping[int, str] | None = None,
                       hardware: str | None = None) -> LearnedProfile | None:
    """Read the store (malformed lines skipped) and learn; None without a store or nights."""
    if not Path(store).is_dir():
        return None
    return learn_profile(read_store(store).records, runner_class, model, suite,
                         nights=nights, exclude_run_ids=exclude_run_ids, loads=loads,
                         hardware=hardware)
