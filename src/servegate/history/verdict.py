"""What the history says about a series' latest night: the verdict the site shows, derived from
the change points ``history report`` finds (``suspected``, ``confirmed``, ``steady``, ``not
analysed``); a group shows its worst gated series (:func:`group_verdict`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from servegate.history.changepoints import DEFAULT_CONFIRM_NIGHTS
from servegate.history.records import Record
from servegate.history.report import SeriesReport, effect, stable_nights

RECENT_NIGHTS = 7           # a confirmed change stays flagged on the index for a week of nights


@dataclass(frozen=True)
class Verdict:
    """One series' latest night (or a group's worst): state, effect, text, ratio to the level."""

    state: str
    effect: str                 # regression | improvement | change | "" (steady, not analysed)
    text: str
    ratio: float | None         # the latest night / the current level (None: no level to compare)

    @property
    def severity(self) -> int:
        """Order for "the worst series of a group": regressions first, then improvements."""
        if self.state == "not analysed":
            return -1
        if self.state == "steady":
            return 0
        bad = self.effect != "improvement"
        return (3 if bad else 1) + (1 if self.state == "confirmed" else 0)

    @property
    def css(self) -> str:
        if self.severity < 0:
            return "na"
        if self.severity == 0:
            return "ok"
        return "good" if self.effect == "improvement" else "bad"


def night_log_mean(record: Record) -> float:
    """A night's level: the mean log of its values (geometric means, as the change points)."""
    return sum(math.log(v) for v in record.values) / len(record.values)


def latest_ratio(report: SeriesReport) -> float | None:
    """The latest night over the current level (geometric means; None when there is no level):
    the nights ``stable_nights`` keeps (after the last confirmed change point, before a
    suspected one, no transients) but the latest, so a suspected step shows as the jump it is."""
    if not report.detection.analysed or not report.nights:
        return None
    latest = report.nights[-1]
    level = [n for n in stable_nights(report.detection, report.nights) if n is not latest]
    if not level:
        return None
    reference = sum(night_log_mean(n) for n in level) / len(level)
    return math.exp(night_log_mean(latest) - reference)


def night_verdict(report: SeriesReport, *, recent: int = RECENT_NIGHTS) -> Verdict:
    """The latest night's state of one series (see :class:`Verdict`)."""
    detection = report.detection
    if not detection.analysed:
        return Verdict("not analysed", "", detection.reason or "not analysed", None)
    ratio = latest_ratio(report)
    if detection.change_points:
        last = detection.change_points[-1]
        kind = effect(report.key[5], last.ratio)
        age = len(report.nights) - last.index          # nights since its first, inclusive
        if last.status == "suspected":
            return Verdict("suspected", kind,
                           f"suspected {kind} x{last.ratio:.3f} (new level for {age} "
                           f"night(s), not yet held {DEFAULT_CONFIRM_NIGHTS})", ratio)
        if age <= recent:
            return Verdict("confirmed", kind,
                           f"{kind} x{last.ratio:.3f} confirmed (new level for {age} "
                           "night(s))", ratio)
    return Verdict("steady", "", "steady", ratio)


def group_verdict(gated: Sequence[Verdict]) -> Verdict:
    """The worst of a group's gated series' verdicts, with how many share it."""
    if not gated:
        return Verdict("not analysed", "", "no gated metric in the store", None)
    worst = max(gated, key=lambda v: v.severity)
    same = [v for v in gated if (v.state, v.effect) == (worst.state, worst.effect)]
    if worst.state == "steady":
        text = f"steady: {len(same)} of {len(gated)} gated series"
    else:
        label = f"{worst.state} {worst.effect}".strip()
        text = f"{label}: {len(same)} of {len(gated)} gated series"
    return Verdict(worst.state, worst.effect, text, None)
