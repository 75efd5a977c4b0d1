"""The history site's HTML: the index, a series page, and the one stylesheet.

Plain HTML5, charts inline, every link relative (``file://`` and GitHub Pages alike), no
JavaScript; each page carries the generator's ``<meta>`` mark, so a later publish removes only
its own stale pages. Pure functions of the analysed store."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from servegate.history.changepoints import DEFAULT_CONFIRM_NIGHTS
from servegate.history.load import series_changes
from servegate.history.noise import MAX_BLOCKS
from servegate.history.pages import (
    GENERATOR,
    GENERATOR_META,
    STYLE,
    Identity,
    SeriesPage,
    artifact_href,
    slug,
)
from servegate.history.records import ACCURACY_METRIC, Record
from servegate.history.report import SeriesReport, change_point_json
from servegate.history.store import Problem
from servegate.history.svg import effect_class, fmt, series_chart_svg, short_commit, sparkline_svg
from servegate.history.verdict import RECENT_NIGHTS, Verdict, group_verdict


def _pct_change(ratio: float | None) -> str:
    return "-" if ratio is None else f"{(ratio - 1) * 100:+.1f} %"


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _page(title: str, body: str, depth: int) -> str:
    """An HTML5 document with the shared stylesheet, linked relative to the page's folder."""
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"{GENERATOR_META}\n<title>{_e(title)}</title>\n"
            f'<link rel="stylesheet" href="{"../" * depth}{STYLE}">\n</head>\n<body>\n'
            f"{body}\n</body>\n</html>\n")


def _badge(verdict: Verdict, text: str | None = None) -> str:
    return f'<span class="badge {verdict.css}">{_e(text or verdict.text)}</span>'


def _commit(commit: str | None) -> str:
    if not commit:
        return '<span class="muted">?</span>'
    return f'<code title="{_e(commit)}">{_e(short_commit(commit))}</code>'


def _run_link(record: Record, base: str | None, depth: int) -> str:
    href = artifact_href(base, record.run_id, depth)
    name = _e(record.run_id)
    return f'<a href="{_e(href)}">{name}</a>' if href else name


def _group_id(identity: Identity) -> str:
    return "g-" + slug(*identity)


def _group_badge(pages: Sequence[SeriesPage]) -> str:
    """The worst latest-night verdict of a group's gated series."""
    return _badge(group_verdict([p.verdict for p in pages if p.gated]))


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
            f'<td class="num" title="{_e(last.run_id)}">{fmt(sum(last.values) / len(last.values))}'
            f'</td><td class="num">{_pct_change(page.verdict.ratio)}</td>'
            f"<td>{_badge(page.verdict)}</td><td>{latest_cp or '-'}</td></tr>")


_TABLE_HEAD = ("<table class=\"series\"><thead><tr><th>metric</th><th>point</th><th>trend</th>"
               "<th>latest</th><th>vs level</th><th>latest night</th><th>change points</th>"
               "</tr></thead><tbody>")


def _profile(entry: Mapping[str, Any] | None) -> str:
    """The group's learned noise profile (``history health``): each level with its dof and
    source, the out-of-profile nights, and the aggregates the sustained-shift rule flagged."""
    if not entry or not (entry.get("levels") or entry.get("aggregates")):
        return ""
    rows = "".join(f"<tr><td>{_e(lv['level'])}</td><td>{_e(lv['of'])}</td>"
                   f"<td>{_e(lv['metric'])}</td><td>{100 * lv['log_sd']:.2f} %</td>"
                   f"<td>{lv['dof']:g}</td><td>{_e(lv['source'])}</td></tr>"
                   for lv in entry.get("levels", []))
    out = "".join(f"<li>{_e(key)}: {_e(', '.join(runs))}</li>"
                  for key, runs in entry.get("out_of_profile", {}).items())
    loads = "".join(f"<li>load changed at {_e(c['run_id'])}: {_e(c['changed'])} (the nights "
                    "before it are not compared)</li>" for c in entry.get("load_changes", []))
    flags = "".join(f"<li>{_e(a['mode'])} {_e(a['metric'])}: sustained shift flagged at "
                    f"{_e(', '.join(a['flagged']))}"
                    + (f" ({_e(a['spread'])})" if a.get("spread") else "") + "</li>"
                    for a in entry.get("aggregates", []) if a["flagged"])
    return ("<details class=\"profile\"><summary>noise profile (learned from "
            f"{entry.get('nights', 0)} night(s)) and sustained shifts</summary>"
            "<table><thead><tr><th>level</th><th>of</th><th>metric</th><th>log-sd</th>"
            f"<th>dof</th><th>source</th></tr></thead><tbody>{rows}</tbody></table>"
            + (f"<p>out of profile (a runner-health signal, not averaged in):</p><ul>{out}</ul>"
               if out else "<p>no night out of profile</p>")
            + (f"<ul>{flags}</ul>" if flags else "<p>no sustained shift flagged</p>")
            + (f"<ul>{loads}</ul>" if loads else "") + "</details>")


def _group_section(identity: Identity, pages: Sequence[SeriesPage], base: str | None,
                   profile: Mapping[str, Any] | None = None) -> str:
    runner, model, suite = identity
    latest = max((n for p in pages for n in p.report.nights), key=lambda n: (n.time, n.run_id))
    runs = {n.run_id for p in pages for n in p.report.nights}
    gated = [p for p in pages if p.gated]
    other = [p for p in pages if not p.gated]
    parts = [f'<section class="group" id="{_group_id(identity)}">',
             f"<h2>{_e(runner)} / {_e(model)} / {_e(suite)} {_group_badge(pages)}</h2>",
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
    parts.append(_profile(profile))
    parts.append("</section>")
    return "\n".join(parts)


def render_index(groups: Mapping[Identity, Sequence[SeriesPage]], problems: Sequence[Problem],
                 base: str | None,
                 profiles: Mapping[Identity, Mapping[str, Any]] | None = None) -> str:
    """``index.html``: one section per runner class x model x suite (with its noise profile,
    ``profiles``: ``history health``'s entries)."""
    runs = {n.run_id for pages in groups.values() for p in pages for n in p.report.nights}
    series = sum(len(pages) for pages in groups.values())
    nav = "".join(f'<li><a href="#{_group_id(identity)}">{_e(" / ".join(identity))}</a> '
                  f"{_group_badge(pages)}</li>" for identity, pages in groups.items())
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
        *(_group_section(identity, pages, base, (profiles or {}).get(identity))
          for identity, pages in groups.items()),
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
    accepted night before the step and of the first night after it, in full (``git log A..B``),
    and every other recorded component that changed between them (aiter, a GEMM config, ...)."""
    cps = change_point_json(report)
    if not cps:
        return '<p class="muted">No change point: the series holds one level.</p>'
    rows, suspects = [], []
    for cp in cps:
        before, after = cp["sglang_commits"]
        v_before, v_after = cp["sglang_versions"]
        night = report.nights[cp["index"]]
        rows.append(
            f'<tr class="{effect_class(report.key[5], cp["ratio"])}"><td>{cp["index"]}</td>'
            f"<td>{_run_link(night, base, 1)}<br><span class=\"muted\">{_e(night.time)}</span></td>"
            f'<td class="num">{fmt(cp["before"])} &rarr; {fmt(cp["after"])}</td>'
            f'<td class="num">x{cp["ratio"]:.3f} ({_pct_change(cp["ratio"])})</td>'
            f'<td>{_e(cp["effect"])}</td><td>{_e(cp["status"])} after {cp["nights_after"]} '
            f"night(s)</td><td>{_commit(before)} &rarr; {_commit(after)}</td>"
            f"<td>{_e(v_before or '?')} &rarr; {_e(v_after or '?')}</td></tr>")
        suspects.append(
            f'<li>night {cp["index"]} (x{cp["ratio"]:.3f}): sglang '
            f'<code class="commit">{_e(before or "?")}</code> (last night before) &rarr; '
            f'<code class="commit">{_e(after or "?")}</code> (first night after): '
            f"<code>git log {_e(before or '?')}..{_e(after or '?')}</code>"
            + "".join(f'; {_e(c["label"])} <code class="commit">{_e(c["before"])}</code> &rarr; '
                      f'<code class="commit">{_e(c["after"])}</code>'
                      for c in cp["components"]
                      if c["component"] not in ("sglang", "sglang_commit"))
            + "</li>")
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
                     f"{fmt(sum(night.values) / len(night.values))}, sglang "
                     f"{_commit(night.sglang_commit)}</li>")
    return ("<p>One-off nights set aside (a level that did not hold "
            f"{DEFAULT_CONFIRM_NIGHTS} nights):</p><ul>{''.join(items)}</ul>")


def _noise(report: SeriesReport, alpha: float) -> str:
    """The noise budget by level: the start and block levels measured from the nights, today's
    design, what it resolves and what the floor would need."""
    found = report.budget
    if found is None:
        return f'<p class="muted">{_e(report.budget_note or "no noise budget")}</p>'

    def pct(value: float) -> str:
        return f"{value * 100:.2f} %"

    def dof(value: float | None) -> str:
        return "exact" if value is None else f"{value:.1f}".removesuffix(".0")

    levels, minutes = found.levels, found.minutes_needed
    block = (f"{pct(math.sqrt(levels.block_var))} ({dof(levels.block_dof)} degrees of freedom)"
             if levels.block_dof > 0 else "not measured (one block per server start)")
    rows = [
        ("start level (log-sd between server starts)",
         f"{pct(math.sqrt(levels.start_var))} ({levels.start_dof} degrees of freedom)"),
        ("block level (log-sd between blocks of a start, winsorized)", block),
        ("from", f"{levels.starts} server start(s) x {levels.blocks} block(s) of "
                 f"{levels.nights} night(s) at the current level"),
        (f"spread of one start of {found.blocks} block(s) (a repeat)",
         f"{pct(found.sigma)} ({dof(found.dof)} degrees of freedom)"),
        ("practical floor", pct(found.floor)),
        ("design per arm today", f"{found.repeats_today} start(s) x {found.blocks} block(s)"),
        ("floor reachable with today's design", pct(found.reachable_floor)),
        (f"repeats needed for the floor (server starts of {found.blocks} block(s))",
         "more than 1000" if found.repeats_needed is None else str(found.repeats_needed)),
        (f"blocks per start needed at {found.repeats_today} start(s)",
         f"more than {MAX_BLOCKS}: the start level decides" if found.blocks_needed is None
         else str(found.blocks_needed)),
        ("serving minutes per arm for that", "-" if minutes is None else f"{minutes:.1f}"),
    ]
    items = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in rows)
    return (f'<p class="muted">80 % power, two-sided alpha {alpha}, n server starts of b blocks '
            f"against as many, log scale (docs/history.md, Noise budget).</p><dl>{items}</dl>")


def _nights_table(report: SeriesReport, base: str | None) -> str:
    starts = {cp.index: cp for cp in report.detection.change_points}
    transients = set(report.detection.transients)
    loads = series_changes(report.nights)
    accuracy = report.key[5] == ACCURACY_METRIC
    rows = []
    for i, night in enumerate(report.nights):
        notes = []
        if i in loads:
            notes.append(f"load changed: {loads[i]}")
        if i in starts:
            notes.append(f"change point: x{starts[i].ratio:.3f} {starts[i].status}")
        if i in transients:
            notes.append("transient (set aside)")
        values = ", ".join(fmt(v) for v in night.values)
        mark = ' class="mark"' if notes else ""
        extra = f"<td class=\"num\">{night.n if night.n is not None else '-'}</td>" \
            if accuracy else ""
        rows.append(
            f'<tr id="n{i}"{mark}><td>{i}</td>'
            f"<td>{_e(night.time)}</td><td>{_run_link(night, base, 1)}</td>"
            f"<td>{_e(night.sglang_version or '?')}</td><td>{_commit(night.sglang_commit)}</td>"
            f"<td>{_commit(night.servegate_commit)}</td><td class=\"num\">{values}</td>"
            f'<td class="num">{fmt(sum(night.values) / len(night.values))}</td>{extra}'
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


# the one stylesheet, shipped beside the GSM8K files (package data)
STYLE_CSS = (Path(__file__).resolve().parents[1] / "data" / "history" / "style.css").read_text(
    encoding="utf-8")
