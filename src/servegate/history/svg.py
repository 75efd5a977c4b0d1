"""The history site's charts as inline SVG (a sparkline per series, a full chart per page).

Why drawn here: the site opens from ``file://`` and GitHub Pages with nothing fetched, and
publishing the same store twice writes the same bytes. Hover text is SVG ``<title>``."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from servegate.history.load import series_changes
from servegate.history.report import SeriesReport, change_point_json, effect
from servegate.history.verdict import night_log_mean


def fmt(value: float | None) -> str:
    """A value in 4 significant digits (``-`` when missing or not finite)."""
    return "-" if value is None or not math.isfinite(value) else f"{value:.4g}"


def short_commit(commit: str | None) -> str:
    """The first 10 characters of a commit (``?`` when unknown): what fits a label."""
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


def effect_class(metric: str, ratio: float) -> str:
    """``good`` for an improvement, ``bad`` otherwise (the CSS class and the colour)."""
    kind = effect(metric, ratio)
    return "good" if kind == "improvement" else "bad"


COLOURS = {"bad": "#c0392b", "good": "#1e8449"}


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
        levels = [math.exp(sum(night_log_mean(n) for n in kept) / len(kept))]
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
        css = effect_class(report.key[5], cp.ratio)
        parts.append(f'<line class="cp {css}" x1="{x:.1f}" '
                     f'y1="0" x2="{x:.1f}" y2="{height}" stroke="{COLOURS[css]}" stroke-width="1" '
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
    each segment, change points as vertical lines labelled with ratio and commit range, a load
    change as a purple line (the means' line breaks there), transients crossed. Hovering a
    night shows its run, commit and values (SVG ``<title>``)."""
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
                   f'font-size="11">{fmt(tick)}</text>')
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
                   f'stroke-dasharray="6,3"><title>level {fmt(level)}</title></line>')
    for cp in change_point_json(report):
        x = frame.x(cp["index"] - 0.5)
        before, after = cp["sglang_commits"]
        css = effect_class(metric, cp["ratio"])
        dash = "6,3" if cp["status"] == "confirmed" else "2,3"
        out.append(f'<line class="cp {css}" x1="{x:.1f}" y1="{frame.top - 28}" x2="{x:.1f}" '
                   f'y2="{height - frame.bottom}" stroke="{COLOURS[css]}" stroke-width="1.5" '
                   f'stroke-dasharray="{dash}"/>')
        out.append(f'<text class="cp-label" x="{x + 4:.1f}" y="{frame.top - 18}" font-size="11">'
                   f'x{cp["ratio"]:.3f} {html.escape(cp["status"])}</text>')
        out.append(f'<text class="cp-label" x="{x + 4:.1f}" y="{frame.top - 5}" font-size="11">'
                   f'sglang {html.escape(short_commit(before))}..{html.escape(short_commit(after))}</text>')
    loads = series_changes(nights)
    for i, changed in loads.items():          # another load: a marker, and the line breaks
        x = frame.x(i - 0.5)
        out.append(f'<line class="load" x1="{x:.1f}" y1="{frame.top}" x2="{x:.1f}" '
                   f'y2="{height - frame.bottom}" stroke="#7d3c98" stroke-width="1.5">'
                   f'<title>load changed: {html.escape(changed)}</title></line>')
        out.append(f'<text class="load-label" x="{x + 4:.1f}" y="{height - frame.bottom - 6}" '
                   'font-size="11" fill="#7d3c98">load changed</text>')
    bounds = [0, *loads, len(means)]
    for lo_i, hi_i in pairwise(bounds):
        line = " ".join(f"{frame.x(i):.1f},{frame.y(means[i]):.1f}" for i in range(lo_i, hi_i))
        out.append(f'<polyline class="mean" points="{line}" fill="none" stroke="#2c6fbb" '
                   'stroke-width="1.5"/>')
    transients = set(report.detection.transients)
    for i, night in enumerate(nights):
        x = frame.x(i)
        tip = html.escape(f"night {i} {night.run_id} {night.time}\nsglang "
                          f"{night.sglang_commit or '?'}\nvalues "
                          + ", ".join(fmt(v) for v in night.values))
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
