"""``history publish``: the history store as a static site (plain HTML, inline SVG, one CSS file).

Why static and rendered here: the site must open from ``file://`` and from GitHub Pages alike,
with no server and nothing fetched at view time, so every chart is an inline SVG drawn in
Python and every link is relative. No JavaScript: hover text is SVG ``<title>``, folding is
``<details>``. The output is a pure function of the store (no wall-clock stamp), so publishing
the same store twice writes the same bytes.

Layout of ``OUT``::

    index.html            one section per runner class x model x suite: the latest night's
                          verdict (derived, see :func:`night_verdict`), one row with a sparkline
                          per gated series, the other series folded away
    style.css
    series/<slug>.html    one page per series (runner, model, suite, mode, concurrency, metric)

Why one page per series rather than one per runner/model/suite: a change point belongs to one
series, and its page is the URL one pastes into an issue ("since this night, between these two
sglang commits"); the pages stay small (one table of nights each) while the index does the
grouping. Pages of the same metric at other points link to each other.

The store keeps no artifact location; ``artifacts_base`` links each night to
``<base>/<run_id>/`` (or ``base`` with ``{run_id}`` replaced). A relative base is relative to
the site's root.
"""

from __future__ import annotations

import contextlib
import html
import math
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from urllib.parse import urlparse

from servegate.core.atomic import write_text
from servegate.history.changepoints import DEFAULT_CONFIRM_NIGHTS
from servegate.history.noise import ALPHA
from servegate.history.report import (
    SeriesReport,
    analyse,
    change_point_json,
    effect,
    stable_nights,
)
from servegate.history.store import ACCURACY_METRIC, HistoryError, Problem, Record, read_store

GENERATOR = "servegate history publish"
STYLE = "style.css"
SERIES_DIR = "series"
RECENT_NIGHTS = 7           # a confirmed change stays flagged on the index for a week of nights
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_GENERATOR_META = f'<meta name="generator" content="{GENERATOR}">'

Identity = tuple[str, str, str]     # (runner class, model, suite)


# ---------------------------------------------------------------- what a page says


@dataclass(frozen=True)
class Verdict:
    """What the history says about a series' latest night.

    The store keeps no judge verdicts (``verdict.json`` stays in the run folder), so this is
    derived from the change points ``history report`` finds: ``suspected`` (the latest nights
    are at a new level that has not held ``confirm`` nights yet), ``confirmed`` (a change point
    whose first night is among the last :data:`RECENT_NIGHTS`), ``steady``, ``not analysed``.
    """

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


@dataclass(frozen=True)
class SeriesPage:
    """One series, where its page lives (relative to the site root) and its latest verdict."""

    report: SeriesReport
    path: str
    gated: bool
    verdict: Verdict

    @property
    def point(self) -> str:
        mode, conc = self.report.key[3], self.report.key[4]
        return mode if conc is None else f"{mode}@c{conc}"

    @property
    def metric(self) -> str:
        return self.report.key[5]


@dataclass(frozen=True)
class Published:
    """What ``publish`` wrote: the files (index last), stale pages removed, counts."""

    out: Path
    files: list[Path]
    removed: list[Path]
    series: int
    runs: int
    problems: list[Problem]

    @property
    def index(self) -> Path:
        return self.out / "index.html"


def _night_log_mean(record: Record) -> float:
    return sum(math.log(v) for v in record.values) / len(record.values)


def latest_ratio(report: SeriesReport) -> float | None:
    """The latest night over the current level (geometric means; None when there is no level).

    The level is the nights ``stable_nights`` keeps (after the last confirmed change point,
    before a suspected one, transients left out) other than the latest night itself, so a
    suspected step shows as the jump it is.
    """
    if not report.detection.analysed or not report.nights:
        return None
    latest = report.nights[-1]
    level = [n for n in stable_nights(report.detection, report.nights) if n is not latest]
    if not level:
        return None
    reference = sum(_night_log_mean(n) for n in level) / len(level)
    return math.exp(_night_log_mean(latest) - reference)


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


def gated_metrics(suite: str) -> frozenset[str]:
    """The metrics the suite's ``[judge]`` table gates (defaults when it has none).

    The same table the noise budget reads: the index shows a trend for exactly the metrics the
    nightly gate judges; a suite file that does not parse gates nothing here (its series are
    still published, under "other metrics").
    """
    from servegate.config.judge import load_judge_table
    from servegate.core.errors import ServegateError
    from servegate.core.paths import SUITES_DIR

    try:
        return frozenset(load_judge_table(SUITES_DIR / f"{suite}.toml").metrics)
    except (ServegateError, ValueError, OSError):
        return frozenset()


def slug(*parts: str) -> str:
    """A file-name-safe join of the parts (the same alphabet as the plots' names)."""
    return "__".join(_UNSAFE.sub("_", part) for part in parts)


def page_path(report: SeriesReport) -> str:
    runner, model, suite, mode, conc, metric = report.key
    point = mode if conc is None else f"{mode}-c{conc}"
    return f"{SERIES_DIR}/{slug(runner, model, suite, point, metric)}.html"


def artifact_href(base: str | None, run_id: str, depth: int) -> str | None:
    """Where a night's run artifacts are, seen from a page ``depth`` folders below the root."""
    if not base:
        return None
    url = base.replace("{run_id}", run_id) if "{run_id}" in base \
        else f"{base.rstrip('/')}/{run_id}/"
    if urlparse(url).scheme or url.startswith("/"):
        return url
    return "../" * depth + url


def check_artifacts_base(base: str | None) -> None:
    """Only http(s) or a relative path: the link is followed by a reader, never fetched."""
    if base is None:
        return
    scheme = urlparse(base).scheme
    if not base.strip() or scheme not in ("", "http", "https") or any(c.isspace() for c in base):
        raise HistoryError(f"--artifacts-base {base!r}: expected an http(s) URL or a relative "
                           "path (optionally with {run_id})")


# ---------------------------------------------------------------- SVG


def _fmt(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.4g}"


def _pct_change(ratio: float | None) -> str:
    return "-" if ratio is None else f"{(ratio - 1) * 100:+.1f} %"


def _short(commit: str | None) -> str:
    return (commit or "?")[:10]


def _means(report: SeriesReport) -> list[float]:
    return [sum(n.values) / len(n.values) for n in report.nights]


def _range(values: Sequence[float]) -> tuple[float, float]:
    """A y range with 5 % padding; a flat series gets +-1 % around its value."""
    lo, hi = min(values), max(values)
    if hi <= lo:
        pad = abs(lo) * 0.01 or 1.0
        return lo - pad, hi + pad
    pad = (hi - lo) * 0.05
    return lo - pad, hi + pad


@dataclass(frozen=True)
class _Frame:
    """Data to SVG coordinates: night ``i`` at the middle of its slot, values linear in y."""

    width: float
    height: float
    left: float
    right: float
    top: float
    bottom: float
    nights: int
    lo: float
    hi: float

    def x(self, night: float) -> float:
        span = self.width - self.left - self.right
        return self.left + (night + 0.5) * span / max(1, self.nights)

    def y(self, value: float) -> float:
        span = self.height - self.top - self.bottom
        return self.top + (self.hi - value) / (self.hi - self.lo) * span


def _effect_class(metric: str, ratio: float) -> str:
    kind = effect(metric, ratio)
    return "good" if kind == "improvement" else "bad"


_COLOURS = {"bad": "#c0392b", "good": "#1e8449"}


def segment_levels(report: SeriesReport) -> list[tuple[int, int, float]]:
    """(first night, end night, geometric-mean level) of each segment between change points,
    transients left out (the levels ``detect`` measured the ratios from)."""
    points = report.detection.change_points
    bounds = [0, *(cp.index for cp in points), len(report.nights)]
    if points:
        levels = [points[0].before, *(cp.after for cp in points)]
    else:
        kept = [n for i, n in enumerate(report.nights) if i not in set(report.detection.transients)]
        if not kept or not report.detection.analysed:
            return []
        levels = [math.exp(sum(_night_log_mean(n) for n in kept) / len(kept))]
    return [(start, end, level) for (start, end), level in zip(pairwise(bounds), levels, strict=True)]


def sparkline_svg(report: SeriesReport, width: int = 150, height: int = 32) -> str:
    """A small trend for the index: night means, change points as ticks, the latest night dot."""
    means = _means(report)
    lo, hi = _range(means)
    frame = _Frame(width, height, 2, 2, 3, 3, len(means), lo, hi)
    points = " ".join(f"{frame.x(i):.1f},{frame.y(v):.1f}" for i, v in enumerate(means))
    parts = [f'<svg class="spark" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             f'role="img" aria-label="trend of {html.escape(report.label)}">']
    for cp in report.detection.change_points:
        x = frame.x(cp.index - 0.5)
        css = _effect_class(report.key[5], cp.ratio)
        parts.append(f'<line class="cp {css}" x1="{x:.1f}" '
                     f'y1="0" x2="{x:.1f}" y2="{height}" stroke="{_COLOURS[css]}" stroke-width="1" '
                     'stroke-dasharray="2,2"/>')
    parts.append(f'<polyline points="{points}" fill="none" stroke="#2c6fbb" stroke-width="1.2"/>')
    parts.append(f'<circle cx="{frame.x(len(means) - 1):.1f}" cy="{frame.y(means[-1]):.1f}" r="2.2" '
                 'fill="#2c6fbb"/>')
    parts.append("</svg>")
    return "".join(parts)


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values inside [lo, hi] (1-2-5 steps)."""
    raw = (hi - lo) / max(1, count - 1)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def series_chart_svg(report: SeriesReport, width: int = 960, height: int = 320) -> str:
    """The series page's chart: every repeat as a dot, the night means as a line, the level of
    each segment, change points as vertical lines labelled with ratio and commit range,
    transients crossed. Hovering a night shows its run, commit and values (SVG ``<title>``)."""
    nights, metric = report.nights, report.key[5]
    means = _means(report)
    lo, hi = _range([v for n in nights for v in n.values])
    frame = _Frame(width, height, 70, 16, 40, 46, len(nights), lo, hi)
    out = [f'<svg class="chart" viewBox="0 0 {width} {height}" width="100%" role="img" '
           f'aria-label="{html.escape(report.label)}: {len(nights)} nights">']
    for tick in _ticks(lo, hi, 6):
        y = frame.y(tick)
        out.append(f'<line class="grid" x1="{frame.left}" y1="{y:.1f}" x2="{width - frame.right}" '
                   f'y2="{y:.1f}" stroke="#e3e3e3" stroke-width="1"/>')
        out.append(f'<text class="tick" x="{frame.left - 6}" y="{y + 4:.1f}" text-anchor="end" '
                   f'font-size="11">{_fmt(tick)}</text>')
    step = max(1, math.ceil(len(nights) / 8))
    for i in range(0, len(nights), step):
        out.append(f'<text class="tick" x="{frame.x(i):.1f}" y="{height - frame.bottom + 16}" '
                   f'text-anchor="middle" font-size="11">{html.escape(nights[i].time[:10])}</text>')
    out.append(f'<text class="axis" x="{(width + frame.left) / 2:.0f}" y="{height - 6}" '
               f'text-anchor="middle" font-size="11">night (run start, UTC)</text>')
    for start, end, level in segment_levels(report):
        y = frame.y(level)
        out.append(f'<line class="level" x1="{frame.x(start - 0.5):.1f}" y1="{y:.1f}" '
                   f'x2="{frame.x(end - 0.5):.1f}" y2="{y:.1f}" stroke="#888" stroke-width="1" '
                   f'stroke-dasharray="6,3"><title>level {_fmt(level)}</title></line>')
    for cp in change_point_json(report):
        x = frame.x(cp["index"] - 0.5)
        before, after = cp["sglang_commits"]
        css = _effect_class(metric, cp["ratio"])
        dash = "6,3" if cp["status"] == "confirmed" else "2,3"
        out.append(f'<line class="cp {css}" x1="{x:.1f}" y1="{frame.top - 28}" x2="{x:.1f}" '
                   f'y2="{height - frame.bottom}" stroke="{_COLOURS[css]}" stroke-width="1.5" '
                   f'stroke-dasharray="{dash}"/>')
        out.append(f'<text class="cp-label" x="{x + 4:.1f}" y="{frame.top - 18}" font-size="11">'
                   f'x{cp["ratio"]:.3f} {html.escape(cp["status"])}</text>')
        out.append(f'<text class="cp-label" x="{x + 4:.1f}" y="{frame.top - 5}" font-size="11">'
                   f'sglang {html.escape(_short(before))}..{html.escape(_short(after))}</text>')
    line = " ".join(f"{frame.x(i):.1f},{frame.y(v):.1f}" for i, v in enumerate(means))
    out.append(f'<polyline class="mean" points="{line}" fill="none" stroke="#2c6fbb" '
               'stroke-width="1.5"/>')
    transients = set(report.detection.transients)
    for i, night in enumerate(nights):
        x = frame.x(i)
        tip = html.escape(f"night {i} {night.run_id} {night.time}\nsglang "
                          f"{night.sglang_commit or '?'}\nvalues "
                          + ", ".join(_fmt(v) for v in night.values))
        out.append(f'<g class="night"><title>{tip}</title>')
        out.extend(f'<circle cx="{x:.1f}" cy="{frame.y(v):.1f}" r="2.5" fill="#2c6fbb" '
                   'fill-opacity="0.45"/>' for v in night.values)
        if i in transients:
            y = frame.y(means[i])
            out.append(f'<path class="transient" d="M{x - 5:.1f},{y - 5:.1f}L{x + 5:.1f},{y + 5:.1f}'
                       f'M{x - 5:.1f},{y + 5:.1f}L{x + 5:.1f},{y - 5:.1f}" stroke="#000" '
                       'stroke-width="1.5"/>')
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


# ---------------------------------------------------------------- HTML


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _page(title: str, body: str, depth: int) -> str:
    """An HTML5 document with the shared stylesheet, linked relative to the page's folder."""
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"{_GENERATOR_META}\n<title>{_e(title)}</title>\n"
            f'<link rel="stylesheet" href="{"../" * depth}{STYLE}">\n</head>\n<body>\n'
            f"{body}\n</body>\n</html>\n")


def _badge(verdict: Verdict, text: str | None = None) -> str:
    return f'<span class="badge {verdict.css}">{_e(text or verdict.text)}</span>'


def _commit(commit: str | None) -> str:
    if not commit:
        return '<span class="muted">?</span>'
    return f'<code title="{_e(commit)}">{_e(_short(commit))}</code>'


def _run_link(record: Record, base: str | None, depth: int) -> str:
    href = artifact_href(base, record.run_id, depth)
    name = _e(record.run_id)
    return f'<a href="{_e(href)}">{name}</a>' if href else name


def _group_id(identity: Identity) -> str:
    return "g-" + slug(*identity)


def group_verdict(pages: Sequence[SeriesPage]) -> Verdict:
    """The worst latest-night verdict of a group's gated series, with how many share it."""
    gated = [p for p in pages if p.gated]
    if not gated:
        return Verdict("not analysed", "", "no gated metric in the store", None)
    worst = max(gated, key=lambda p: p.verdict.severity).verdict
    same = [p for p in gated if (p.verdict.state, p.verdict.effect)
            == (worst.state, worst.effect)]
    if worst.state == "steady":
        text = f"steady: {len(same)} of {len(gated)} gated series"
    else:
        label = f"{worst.state} {worst.effect}".strip()
        text = f"{label}: {len(same)} of {len(gated)} gated series"
    return Verdict(worst.state, worst.effect, text, None)


def _series_row(page: SeriesPage, depth: int) -> str:
    report = page.report
    cps = change_point_json(report)
    latest_cp = ""
    if cps:
        cp = cps[-1]
        before, after = cp["sglang_commits"]
        latest_cp = (f'{len(cps)}: last x{cp["ratio"]:.3f} {_e(cp["status"])} '
                     f'(sglang {_commit(before)}..{_commit(after)})')
    last = report.nights[-1]
    return (f'<tr><td><a href="{"../" * depth}{_e(page.path)}">{_e(page.metric)}</a></td>'
            f'<td>{_e(page.point)}</td><td>{sparkline_svg(report)}</td>'
            f'<td class="num" title="{_e(last.run_id)}">{_fmt(sum(last.values) / len(last.values))}'
            f'</td><td class="num">{_pct_change(page.verdict.ratio)}</td>'
            f"<td>{_badge(page.verdict)}</td><td>{latest_cp or '-'}</td></tr>")


_TABLE_HEAD = ("<table class=\"series\"><thead><tr><th>metric</th><th>point</th><th>trend</th>"
               "<th>latest</th><th>vs level</th><th>latest night</th><th>change points</th>"
               "</tr></thead><tbody>")


def _group_section(identity: Identity, pages: Sequence[SeriesPage], base: str | None) -> str:
    runner, model, suite = identity
    latest = max((n for p in pages for n in p.report.nights), key=lambda n: (n.time, n.run_id))
    runs = {n.run_id for p in pages for n in p.report.nights}
    gated = [p for p in pages if p.gated]
    other = [p for p in pages if not p.gated]
    parts = [f'<section class="group" id="{_group_id(identity)}">',
             f"<h2>{_e(runner)} / {_e(model)} / {_e(suite)} {_badge(group_verdict(pages))}</h2>",
             f'<p class="latest">latest night: {_run_link(latest, base, 0)}, {_e(latest.time)}, '
             f"sglang {_e(latest.sglang_version or '?')} {_commit(latest.sglang_commit)}; "
             f"{len(runs)} night(s), {len(pages)} series</p>"]
    if gated:
        parts.append(_TABLE_HEAD + "".join(_series_row(p, 0) for p in gated) + "</tbody></table>")
    else:
        parts.append('<p class="muted">no gated metric of this suite is in the store</p>')
    if other:
        parts.append(f"<details><summary>other metrics ({len(other)} series, not gated)</summary>"
                     + _TABLE_HEAD + "".join(_series_row(p, 0) for p in other)
                     + "</tbody></table></details>")
    parts.append("</section>")
    return "\n".join(parts)


def render_index(groups: Mapping[Identity, Sequence[SeriesPage]], problems: Sequence[Problem],
                 base: str | None) -> str:
    """``index.html``: one section per runner class x model x suite."""
    runs = {n.run_id for pages in groups.values() for p in pages for n in p.report.nights}
    series = sum(len(pages) for pages in groups.values())
    nav = "".join(f'<li><a href="#{_group_id(identity)}">{_e(" / ".join(identity))}</a> '
                  f"{_badge(group_verdict(pages))}</li>" for identity, pages in groups.items())
    body = [
        "<header><h1>servegate nightly history</h1>",
        f"<p>{len(runs)} run(s), {series} series in {len(groups)} runner class x model x suite "
        "group(s).</p>",
        '<p class="muted">The store keeps no judge verdicts, so the verdict here is derived from '
        f"the history: <b>suspected</b> = the latest night(s) moved to a new level that has not "
        f"held {DEFAULT_CONFIRM_NIGHTS} nights yet; <b>confirmed</b> = a change point confirmed "
        f"within the last {RECENT_NIGHTS} nights; <b>steady</b> otherwise. Each group shows its "
        "worst gated series; <i>vs level</i> is the latest night against the current level "
        "(geometric means). Trends: night means, change points dashed.</p>",
        f"<nav><ul>{nav}</ul></nav></header>", "<main>",
        *(_group_section(identity, pages, base) for identity, pages in groups.items()),
    ]
    if problems:
        items = "".join(f"<li><code>{_e(p.path.name)}:{p.line}</code>: {_e(p.message)}</li>"
                        for p in problems)
        body.append(f'<section class="problems"><h2>{len(problems)} unreadable store line(s), '
                    f"skipped</h2><ul>{items}</ul></section>")
    body.append(f'</main>\n<footer>generated by <code>{GENERATOR}</code> from the history store '
                "(docs/history.md)</footer>")
    return _page("servegate nightly history", "\n".join(body), depth=0)


def _change_point_table(report: SeriesReport, base: str | None) -> str:
    """The change points, then per change point its suspects: the sglang commits of the last
    accepted night before the step and of the first night after it, in full (``git log A..B``)."""
    cps = change_point_json(report)
    if not cps:
        return '<p class="muted">No change point: the series holds one level.</p>'
    rows, suspects = [], []
    for cp in cps:
        before, after = cp["sglang_commits"]
        v_before, v_after = cp["sglang_versions"]
        night = report.nights[cp["index"]]
        rows.append(
            f'<tr class="{_effect_class(report.key[5], cp["ratio"])}"><td>{cp["index"]}</td>'
            f"<td>{_run_link(night, base, 1)}<br><span class=\"muted\">{_e(night.time)}</span></td>"
            f'<td class="num">{_fmt(cp["before"])} &rarr; {_fmt(cp["after"])}</td>'
            f'<td class="num">x{cp["ratio"]:.3f} ({_pct_change(cp["ratio"])})</td>'
            f'<td>{_e(cp["effect"])}</td><td>{_e(cp["status"])} after {cp["nights_after"]} '
            f"night(s)</td><td>{_commit(before)} &rarr; {_commit(after)}</td>"
            f"<td>{_e(v_before or '?')} &rarr; {_e(v_after or '?')}</td></tr>")
        suspects.append(
            f'<li>night {cp["index"]} (x{cp["ratio"]:.3f}): sglang '
            f'<code class="commit">{_e(before or "?")}</code> (last night before) &rarr; '
            f'<code class="commit">{_e(after or "?")}</code> (first night after): '
            f"<code>git log {_e(before or '?')}..{_e(after or '?')}</code></li>")
    return ("<table><thead><tr><th>night</th><th>first night at the new level</th>"
            "<th>before &rarr; after</th><th>ratio</th><th>effect</th><th>status</th>"
            "<th>sglang commit range</th><th>sglang version</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table><p>The suspects, per change point:</p><ul>"
            + "".join(suspects) + "</ul>")


def _transients(report: SeriesReport) -> str:
    if not report.detection.transients:
        return '<p class="muted">None.</p>'
    items = []
    for i in report.detection.transients:
        night = report.nights[i]
        items.append(f"<li>night {i}: {_e(night.run_id)} ({_e(night.time)}), mean "
                     f"{_fmt(sum(night.values) / len(night.values))}, sglang "
                     f"{_commit(night.sglang_commit)}</li>")
    return ("<p>One-off nights set aside (a level that did not hold "
            f"{DEFAULT_CONFIRM_NIGHTS} nights):</p><ul>{''.join(items)}</ul>")


def _noise(report: SeriesReport, alpha: float) -> str:
    found = report.budget
    if found is None:
        return f'<p class="muted">{_e(report.budget_note or "no noise budget")}</p>'

    def pct(value: float) -> str:
        return f"{value * 100:.2f} %"

    minutes = found.minutes_needed
    rows = [
        ("run-to-run spread (log-sd of a repeat)", pct(found.spread.sigma)),
        ("from", f"{found.spread.values} value(s) of {found.spread.nights} night(s) at the "
                 f"current level, {found.spread.dof} degrees of freedom"),
        ("practical floor", pct(found.floor)),
        ("repeats per arm today", str(found.repeats_today)),
        ("floor reachable with today's repeats", pct(found.reachable_floor)),
        ("repeats needed for the floor", "more than 1000" if found.repeats_needed is None
         else str(found.repeats_needed)),
        ("serving minutes per arm for that", "-" if minutes is None else f"{minutes:.1f}"),
    ]
    items = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in rows)
    return (f'<p class="muted">80 % power, two-sided alpha {alpha}, n repeats against n, log '
            f"scale (docs/history.md, Noise budget).</p><dl>{items}</dl>")


def _nights_table(report: SeriesReport, base: str | None) -> str:
    starts = {cp.index: cp for cp in report.detection.change_points}
    transients = set(report.detection.transients)
    accuracy = report.key[5] == ACCURACY_METRIC
    rows = []
    for i, night in enumerate(report.nights):
        notes = []
        if i in starts:
            notes.append(f"change point: x{starts[i].ratio:.3f} {starts[i].status}")
        if i in transients:
            notes.append("transient (set aside)")
        values = ", ".join(_fmt(v) for v in night.values)
        mark = ' class="mark"' if notes else ""
        extra = f"<td class=\"num\">{night.n if night.n is not None else '-'}</td>" \
            if accuracy else ""
        rows.append(
            f'<tr id="n{i}"{mark}><td>{i}</td>'
            f"<td>{_e(night.time)}</td><td>{_run_link(night, base, 1)}</td>"
            f"<td>{_e(night.sglang_version or '?')}</td><td>{_commit(night.sglang_commit)}</td>"
            f"<td>{_commit(night.servegate_commit)}</td><td class=\"num\">{values}</td>"
            f'<td class="num">{_fmt(sum(night.values) / len(night.values))}</td>{extra}'
            f"<td>{_e('; '.join(notes))}</td></tr>")
    head_extra = "<th>questions</th>" if accuracy else ""
    return ("<table class=\"nights\"><thead><tr><th>#</th><th>run start (UTC)</th><th>run</th>"
            "<th>sglang</th><th>sglang commit</th><th>servegate commit</th>"
            f"<th>values (per repeat)</th><th>mean</th>{head_extra}<th>note</th></tr></thead>"
            "<tbody>" + "".join(rows) + "</tbody></table>")


def render_series(page: SeriesPage, siblings: Sequence[SeriesPage], base: str | None,
                  alpha: float) -> str:
    """One series page: chart, change points with their commit range, transients, noise
    budget, and every night with its values and its artifact link."""
    report = page.report
    runner, model, suite = report.key[:3]
    latest = report.nights[-1]
    others = " ".join(f'<a href="../{_e(p.path)}">{_e(p.point)}</a>' for p in siblings
                      if p.path != page.path)
    artifacts = ("" if base else " The store records no artifact location: pass "
                 "<code>--artifacts-base URL</code> to link each night.")
    body = "\n".join([
        f'<p class="crumbs"><a href="../index.html#{_group_id((runner, model, suite))}">'
        f"&larr; index</a> / {_e(runner)} / {_e(model)} / {_e(suite)}</p>",
        f"<h1>{_e(page.metric)} <small>{_e(page.point)}</small></h1>",
        f"<p>{_e(runner)} / {_e(model)} / {_e(suite)}, {len(report.nights)} night(s); "
        f"{'gated' if page.gated else 'not gated'} by the suite. "
        f"{'Same metric at: ' + others if others else ''}</p>",
        f"<p>Latest night: {_run_link(latest, base, 1)} ({_e(latest.time)}), sglang "
        f"{_commit(latest.sglang_commit)}: {_badge(page.verdict)}, vs level "
        f"{_pct_change(page.verdict.ratio)}.</p>",
        f"<figure>{series_chart_svg(report)}<figcaption>Every repeat a dot, night means joined, "
        "the level of each segment dashed grey, change points as red lines (dashed confirmed, "
        "dotted suspected) with the sglang commits of the last night before and the first night "
        "after, transients crossed. Hover a night for its run and values.</figcaption></figure>",
        "<h2>Change points</h2>", _change_point_table(report, base),
        "<h2>Transients</h2>", _transients(report),
        "<h2>Noise budget</h2>", _noise(report, alpha),
        f"<h2>Nights</h2><p class=\"muted\">Oldest first.{artifacts}</p>",
        _nights_table(report, base),
        f"<footer>generated by <code>{GENERATOR}</code></footer>",
    ])
    return _page(f"{report.label} - servegate history", body, depth=1)


STYLE_CSS = """\
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5rem auto;
       max-width: 1200px; padding: 0 1rem; color: #1d1d1d; background: #fff; }
h1 small { font-weight: normal; color: #555; }
h2 { margin-top: 2rem; border-bottom: 1px solid #ddd; padding-bottom: .2rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { border-bottom: 1px solid #e5e5e5; padding: .25rem .6rem; text-align: left;
         vertical-align: middle; }
th { background: #f5f5f5; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.mark td { background: #fff7e0; }
tr.bad td:first-child { border-left: 3px solid #c0392b; }
tr.good td:first-child { border-left: 3px solid #1e8449; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; }
code.commit { word-break: break-all; }
.muted { color: #666; }
.badge { display: inline-block; border-radius: 3px; padding: 0 .45rem; font-size: 12px;
         font-weight: 600; vertical-align: middle; }
.badge.ok { background: #e8f5e9; color: #1e6b30; }
.badge.bad { background: #fdecea; color: #a12a1f; }
.badge.good { background: #e3f2fd; color: #1a5a96; }
.badge.na { background: #eee; color: #555; }
svg.chart { max-width: 100%; height: auto; background: #fcfcfc; border: 1px solid #eee; }
svg text { fill: #333; font-family: system-ui, sans-serif; }
nav ul { padding-left: 1.2rem; }
details { margin: .5rem 0 1rem; }
summary { cursor: pointer; color: #333; }
dl { display: grid; grid-template-columns: max-content auto; gap: .2rem 1rem; }
dt { color: #555; }
dd { margin: 0; }
footer { margin-top: 3rem; color: #777; font-size: 12px; }
"""


# ---------------------------------------------------------------- building and writing


def series_pages(reports: Sequence[SeriesReport]) -> dict[Identity, list[SeriesPage]]:
    """Every series as a page, grouped per (runner, model, suite) in the report's order."""
    gated_by_suite: dict[str, frozenset[str]] = {}
    groups: dict[Identity, list[SeriesPage]] = defaultdict(list)
    used: set[str] = set()
    for report in reports:
        suite = report.key[2]
        if suite not in gated_by_suite:
            gated_by_suite[suite] = gated_metrics(suite)
        path, number = page_path(report), 2
        while path in used:             # two keys that sanitise alike: keep both pages
            path = page_path(report).removesuffix(".html") + f"-{number}.html"
            number += 1
        used.add(path)
        gated = report.key[5] in gated_by_suite[suite]
        groups[report.key[:3]].append(SeriesPage(report, path, gated, night_verdict(report)))
    return dict(groups)


def build_site(records: Sequence[Record], problems: Sequence[Problem] = (), *,
               artifacts_base: str | None = None, alpha: float = ALPHA) -> dict[str, str]:
    """The site as {path relative to OUT: text} (pure: nothing is written)."""
    check_artifacts_base(artifacts_base)
    groups = series_pages(analyse(records, alpha=alpha))
    files: dict[str, str] = {STYLE: STYLE_CSS}
    for pages in groups.values():
        by_metric: dict[str, list[SeriesPage]] = defaultdict(list)
        for page in pages:
            by_metric[page.metric].append(page)
        for page in pages:
            files[page.path] = render_series(page, by_metric[page.metric], artifacts_base, alpha)
    files["index.html"] = render_index(groups, problems, artifacts_base)   # last: see write_site
    return files


def check_out_dir(out: Path, store: Path) -> None:
    """OUT is a folder (created when missing) and not the store itself."""
    if out.exists() and not out.is_dir():
        raise HistoryError(f"{out}: --out must be a folder, it is a file")
    if out.exists() and store.exists() and out.resolve() == store.resolve():
        raise HistoryError(f"{out}: --out is the history store itself; publish somewhere else")


def write_site(files: Mapping[str, str], out: Path) -> list[Path]:
    """Write every file atomically, in the given order (``build_site`` puts the index last, so
    an interrupted publish never leaves an index pointing at a page not yet written)."""
    written = []
    for relative, text in files.items():
        target = out / relative
        write_text(target, text)
        written.append(target)
    return written


def remove_stale(out: Path, keep: set[str]) -> list[Path]:
    """Remove series pages a previous publish wrote that this one did not (a series renamed or
    gone); only files carrying this generator's mark, so no one else's file is touched."""
    folder = out / SERIES_DIR
    if not folder.is_dir():
        return []
    removed = []
    for path in sorted(folder.glob("*.html")):
        if f"{SERIES_DIR}/{path.name}" in keep:
            continue
        try:
            head = path.read_text(encoding="utf-8", errors="replace")[:1000]
        except OSError:
            continue
        if _GENERATOR_META in head:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            removed.append(path)
    return removed


def publish(store: Path, out: Path, *, artifacts_base: str | None = None,
            skip_malformed: bool = False, alpha: float = ALPHA) -> Published:
    """Read the store and write the site into ``out``; HistoryError (exit 2) for bad input,
    before anything is written."""
    store, out = Path(store), Path(out)
    check_artifacts_base(artifacts_base)
    check_out_dir(out, store)
    contents = read_store(store, strict=not skip_malformed)
    if not contents.records:
        skipped = f" ({len(contents.problems)} unreadable line(s) skipped)" \
            if contents.problems else ""
        raise HistoryError(f"{store}: history store has no runs to publish{skipped} "
                           f"(`servegate history add RUN_DIR --store {store}` adds one)")
    files = build_site(contents.records, contents.problems, artifacts_base=artifacts_base,
                       alpha=alpha)
    written = write_site(files, out)
    removed = remove_stale(out, set(files))
    series = sum(1 for name in files if name.startswith(f"{SERIES_DIR}/"))
    return Published(out, written, removed, series, len({r.run_id for r in contents.records}),
                     list(contents.problems))
