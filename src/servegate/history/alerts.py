"""Nightly alerts: one GitHub issue per regressed series, opened, updated and closed by the night,
so the maintainer paged by a red night has one place per series that stays the one place (what a
series is, raised and held: docs/history.md, Alerts)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servegate.config.judge import gated_floors
from servegate.core.results import load_run
from servegate.history.changepoints import detect
from servegate.history.health import AGGREGATE_METRICS, health
from servegate.history.pages import page_path
from servegate.history.records import Record
from servegate.history.report import (
    SeriesReport,
    analyse,
    change_point_json,
    changed_components,
    other_changes,
)
from servegate.history.store import HistoryError, read_store, run_id_of
from servegate.judge.baselines import run_identity

ALERT_LABEL = "servegate-alert"
BISECT_LABEL = "servegate-bisect"
MAX_LINES = 40
_MARKER = re.compile(r"<!-- servegate-alert: (.+?) -->")
_BISECT = re.compile(r"<!-- servegate-bisect: (\{.*?\}) -->")
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+/:-]*")
_BISECT_KEYS = ("good", "bad", "runner_class", "suite")


@dataclass(frozen=True)
class Range:
    """Where to look: the last good night's sglang commit and the first bad one's, and every
    other recorded component that changed between the two nights."""

    source: str                         # "change point off@c2" / "since the last night"
    commits: tuple[str | None, str | None]
    versions: tuple[str | None, str | None]
    others: tuple[str, ...]             # "aiter 0.1.9 -> 0.1.10"


@dataclass
class Alert:
    """One series tonight: the lines that raise it, the lines that hold it, where to look."""

    key: str                            # "runner/model/suite point metric" (the marker)
    run_id: str
    time: str
    raised: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    ranges: list[Range] = field(default_factory=list)
    attribution: list[str] = field(default_factory=list)
    page: str | None = None             # its series page, relative to the site's root

    @property
    def runner(self) -> str:
        return self.key.split("/", 1)[0]

    @property
    def suite(self) -> str:
        return self.key.split(" ", 1)[0].rsplit("/", 1)[1]

    @property
    def title(self) -> str:
        identity, point, metric = self.key.split(" ")
        return f"servegate: {metric} regression, {point} on {identity}"


@dataclass(frozen=True)
class Links:
    run_url: str | None = None
    history_url: str | None = None      # the history site's root


def _range(source: str, before: Record, after: Record) -> Range:
    return Range(source, (before.sglang_commit, after.sglang_commit),
                 (before.sglang_version, after.sglang_version),
                 other_changes(changed_components(before, after)))


def _check_line(check: Mapping[str, Any], baseline: str | None) -> str:
    """A verdict.json check in one line: its name, estimate, interval and level."""
    low, high = check.get("interval") or (None, None)
    value = check.get("ratio") if check.get("scale") == "ratio" else check.get("difference")
    source = f"; baseline {baseline}" if baseline else ""
    if value is None or low is None:
        return f"one-night check {check.get('name')}: regression, no interval{source}"
    size = (f"ratio {value:.3f} [{low:.3f}, {high:.3f}]" if check.get("scale") == "ratio"
            else f"difference {value:+.4f} [{low:+.4f}, {high:+.4f}]")
    confidence = check.get("confidence")
    level = f" ({100 * confidence:.2f} % {check.get('method')})" if confidence else ""
    return f"one-night check {check.get('name')}: {size}{level}{source}"


def _read_json(path: Path, notes: list[str]) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        notes.append(f"{path}: unreadable ({err}); left out")
        return None
    if not isinstance(data, dict):
        notes.append(f"{path}: not a JSON object; left out")
        return None
    return data


def _was_confirmed(report: SeriesReport, run_id: str) -> bool:
    """Whether the regression starting at night ``run_id`` was already confirmed last night."""
    earlier = detect([night.values for night in report.nights[:-1]])
    return any(cp.status == "confirmed" and report.nights[cp.index].run_id == run_id
               for cp in earlier.change_points)


@dataclass
class _Night:
    """One judged run's night, adding its series' findings to the night's alerts."""

    prefix: str                         # runner/model/suite
    tonight: Record
    since_last: list[Range]             # the range from the night before (none on the first)
    alerts: dict[str, Alert]

    def alert(self, point: str, metric: str) -> Alert:
        key = f"{self.prefix} {point} {metric}"
        return self.alerts.setdefault(key, Alert(key, self.tonight.run_id, self.tonight.time))


def _one_night(night: _Night, verdict: Mapping[str, Any], pages: Mapping[Any, str]) -> None:
    """Tonight's gating checks that say regression (an A/B claim is its own series)."""
    against = (verdict.get("baseline") or {}).get("source_run")
    for check in verdict.get("checks") or []:
        if not (isinstance(check, dict) and check.get("gate")
                and check.get("verdict") == "regression"):
            continue
        mode, reference = check.get("mode") or "run", check.get("reference") or "baseline"
        found = night.alert(mode if reference == "baseline" else f"{mode}-vs-{reference}",
                            str(check.get("metric")))
        found.raised.append(_check_line(check, against and str(against)))
        found.ranges.extend(night.since_last)
        found.page = found.page or pages.get((mode, check.get("concurrency"),
                                              check.get("metric")))


def _change_points(night: _Night, report: SeriesReport) -> None:
    """A series whose last confirmed change point is a regression: raised the night it is
    confirmed, held after that."""
    points = change_point_json(report)
    confirmed = [cp for cp in points if cp["status"] == "confirmed"]
    if not confirmed or confirmed[-1]["effect"] != "regression":
        return
    cp = confirmed[-1]
    new = not _was_confirmed(report, cp["run_id"])
    _, _, _, mode, conc, metric = report.key
    where = f"{mode if conc is None else f'{mode}@c{conc}'} {metric}"
    found = night.alert(mode, metric)
    (found.raised if new else found.held).append(
        f"change point {where}: {cp['before']:.4g} -> {cp['after']:.4g} (x{cp['ratio']:.3f}) "
        f"from night `{cp['run_id']}`, " + ("confirmed tonight" if new else
                                           f"{cp['nights_after']} nights at the new level"))
    if points[-1]["status"] == "suspected" and points[-1]["effect"] == "improvement":
        found.held.append(f"change point {where}: tonight x{points[-1]['ratio']:.3f}, back "
                          "toward the old level? (suspected: closes once it holds a night more)")
    (good, bad), (old, latest) = cp["sglang_commits"], cp["sglang_versions"]
    found.ranges.append(Range(f"change point {where.split()[0]}", (good, bad), (old, latest),
                              other_changes(cp["components"])))
    found.page = found.page or page_path(report)


def _sustained(night: _Night, records: Sequence[Record]) -> None:
    """The gated aggregates the sustained rule flags on tonight's night."""
    for entry in health(records):
        for agg in entry["aggregates"]:
            if night.tonight.run_id in agg["flagged"]:
                found = night.alert(agg["mode"], agg["metric"])
                found.raised.append(
                    f"sustained rule: {agg['mode']} {agg['metric']} (c"
                    f"{','.join(map(str, agg['concurrencies']))}) shift flagged tonight, "
                    f"{agg['nights']} nights watched")
                found.ranges.extend(night.since_last)


def night_alerts(store: Path, run_dirs: Sequence[Path]
                 ) -> tuple[dict[str, Alert], dict[str, str], list[str]]:
    """Tonight's alerts by key, the runner/model/suite judged tonight (-> run id), and notes.

    A run folder whose run is not in the store (refused by ``history add``) decides nothing."""
    contents = read_store(store)
    notes = [f"skipped {problem}" for problem in contents.problems]
    alerts: dict[str, Alert] = {}
    judged: dict[str, str] = {}
    for run_dir in map(Path, run_dirs):
        run = load_run(run_dir)
        run_id, identity = run_id_of(run, run_dir), run_identity(run)
        prefix = "/".join(identity)
        records = [r for r in contents.records if r.identity == identity]
        nights = sorted({r.run_id: r for r in records}.values(), key=lambda r: (r.time, r.run_id))
        index = next((i for i, r in enumerate(nights) if r.run_id == run_id), None)
        if index is None:
            notes.append(f"{run_dir}: run {run_id} is not in the store: nothing decided for "
                         f"{prefix}")
            continue
        judged[prefix] = run_id
        since_last = ([_range("since the last night", nights[index - 1], nights[index])]
                      if index else [])
        night = _Night(prefix, nights[index], since_last, alerts)
        gated = list(gated_floors(identity[2])[0]) or list(AGGREGATE_METRICS)
        reports = [r for r in analyse(records, metrics=gated) if r.nights[-1].run_id == run_id]
        _one_night(night, _read_json(run_dir / "verdict.json", notes) or {},
                   {r.key[3:]: page_path(r) for r in reports})
        for report in reports:
            _change_points(night, report)
        _sustained(night, records)
        attribution = _read_json(run_dir / "attribution.json", notes) or {}
        lines = [str(c["line"]) for c in attribution.get("comparisons") or []
                 if isinstance(c, dict) and c.get("line")]
        for key, found in alerts.items():
            if key.startswith(prefix + " "):
                found.attribution = lines
    return alerts, judged, notes


# ------------------------------------------------------------------ the text


def _commit(value: str | None) -> str:
    return f"`{value}`" if value else "(not recorded)"


def _range_lines(ranges: Sequence[Range]) -> list[str]:
    """The distinct ranges, change points first (they name the step's own nights)."""
    unique: dict[tuple[Any, ...], Range] = {}
    for found in sorted(ranges, key=lambda r: not r.source.startswith("change point")):
        unique.setdefault((found.commits, found.others), found)
    lines = []
    for found in list(unique.values())[:3]:
        (good, bad), (old, new) = found.commits, found.versions
        versions = f" ({old} -> {new})" if old and new and old != new else ""
        text = (f"- sglang {_commit(good)} -> {_commit(bad)}{versions}" if good != bad
                else f"- sglang unchanged ({_commit(good)})")
        also = f"; also changed: {', '.join(found.others)}" if found.others else ""
        lines.append(f"{text}{also} [{found.source}]")
    return lines


def bisect_marker(alert: Alert) -> str | None:
    """The hidden line the bisect workflow reads (None when there is no sglang range)."""
    ranges = sorted(alert.ranges, key=lambda r: not r.source.startswith("change point"))
    for found in ranges:
        good, bad = found.commits
        values = {"good": good, "bad": bad, "runner_class": alert.runner, "suite": alert.suite}
        if good != bad and all(isinstance(v, str) and _SAFE.fullmatch(v)
                               for v in values.values()):
            return f"<!-- servegate-bisect: {json.dumps(values)} -->"
    return None


def render(alert: Alert, links: Links) -> str:
    """The issue body (and each later night's comment): at most :data:`MAX_LINES` lines."""
    head = [f"<!-- servegate-alert: {alert.key} -->",
            f"## {alert.title.removeprefix('servegate: ')}", "",
            f"Night `{alert.run_id}` ({alert.time}): "
            + ("raised tonight." if alert.raised else "still regressed (nothing new tonight).")]
    tail = ["", "**Range to bisect** (last good night -> first bad night):",
            *(_range_lines(alert.ranges) or ["- unknown (no earlier night in the store)"])]
    if alert.attribution:
        tail += ["", "**Attribution** (attribution.json: kernel time by family; never gating):",
                 *(f"- {line}" for line in alert.attribution[:3])]
    link = [f"[workflow run]({links.run_url})"] if links.run_url else []
    if links.history_url:
        root = links.history_url.rstrip("/")
        link.append(f"[history page]({root}/{alert.page or 'index.html'})")
    marker = bisect_marker(alert)
    tail += ["", " · ".join(link)] if link else []
    if marker:
        tail += ["", f"Add the label `{BISECT_LABEL}` to bisect this range on the same runner "
                 "class.", marker]
    signals = [f"- {line}" for line in alert.raised + alert.held]
    room = MAX_LINES - len(head) - len(tail) - 2
    if len(signals) > room:
        signals = [*signals[:room - 1], f"- ... and {len(signals) - room + 1} more "
                   "(`servegate history report`, the run's verdict.json)"]
    return "\n".join([*head, "", *signals, *tail]) + "\n"


def marker_key(body: str) -> str | None:
    """The series an issue body is the alert of (None: not an alert issue)."""
    found = _MARKER.search(body)
    return found.group(1) if found else None


def recovered_text(key: str, run_id: str) -> str:
    return (f"Recovered on night `{run_id}`: nothing flags `{key}` tonight (the one-night check "
            "passed, the sustained rule did not flag the night, and no series' last confirmed "
            "change point is a regression). Closed by servegate nightly.")


def bisect_request(body: str) -> dict[str, str]:
    """The range an alert issue's body carries for a bisect (HistoryError naming what is
    missing or malformed: the values reach a command line, so only safe characters pass)."""
    found = _BISECT.search(body)
    if found is None:
        raise HistoryError("issue body: no `<!-- servegate-bisect: {...} -->` line (only an "
                           "alert with an sglang range carries one)")
    try:
        data = json.loads(found.group(1))
    except json.JSONDecodeError as err:
        raise HistoryError(f"issue body: servegate-bisect line is not JSON ({err})") from None
    for name in _BISECT_KEYS:
        value = data.get(name) if isinstance(data, dict) else None
        if not (isinstance(value, str) and _SAFE.fullmatch(value)):
            raise HistoryError(f"issue body: servegate-bisect {name!r} must be a ref or name "
                               f"([A-Za-z0-9._+/:-]), got {value!r}")
    return {name: data[name] for name in _BISECT_KEYS}
