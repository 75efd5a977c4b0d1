"""The history site's charts (servegate.history.svg), drawn from the seeded store's analysis
(history_site_store.py: a confirmed step at night 20 on ``off``, a one-night blip on
``on@c4``)."""

from __future__ import annotations

import re
from xml.etree import ElementTree

import pytest
from history_site_store import BLIP_AT, BLIP_SERIES, NIGHTS, STEP_AT, STEP_SERIES

from servegate.history.report import SeriesReport
from servegate.history.svg import segment_levels, series_chart_svg, sparkline_svg

SVG = "{http://www.w3.org/2000/svg}"


def _parse(text: str) -> ElementTree.Element:
    """The chart as XML (it must be well-formed to render inline)."""
    return ElementTree.fromstring(text.replace("<svg ", f'<svg xmlns="{SVG[1:-1]}" ', 1))


def test_sparkline_has_a_point_per_night_and_a_tick_per_change_point(
        reports: dict[tuple, SeriesReport]) -> None:
    step = reports[STEP_SERIES]
    root = _parse(sparkline_svg(step))
    [line] = root.iter(f"{SVG}polyline")
    assert len(line.get("points", "").split()) == NIGHTS
    ticks = [e for e in root.iter(f"{SVG}line") if "cp" in e.get("class", "")]
    assert len(ticks) == len(step.detection.change_points) == 1
    assert ticks[0].get("class") == "cp bad"                    # a slower TTFT: a regression
    flat = _parse(sparkline_svg(reports[BLIP_SERIES]))
    assert not [e for e in flat.iter(f"{SVG}line") if "cp" in e.get("class", "")]


def test_chart_draws_every_value_a_night_group_with_its_run_and_the_transient_crossed(
        reports: dict[tuple, SeriesReport]) -> None:
    blip = reports[BLIP_SERIES]
    root = _parse(series_chart_svg(blip))
    nights = [g for g in root.iter(f"{SVG}g") if g.get("class") == "night"]
    assert len(nights) == NIGHTS
    for night, record in zip(nights, blip.nights, strict=True):
        assert len(night.findall(f"{SVG}circle")) == len(record.values)
        assert record.run_id in (night.findtext(f"{SVG}title") or "")
    crossed = [i for i, g in enumerate(nights) if g.find(f"{SVG}path") is not None]
    assert crossed == [BLIP_AT]


def test_segment_levels_are_the_change_points_before_and_after(
        reports: dict[tuple, SeriesReport]) -> None:
    step = reports[STEP_SERIES]
    [cp] = step.detection.change_points
    assert segment_levels(step) == [(0, STEP_AT, cp.before), (STEP_AT, NIGHTS, cp.after)]
    chart = series_chart_svg(step)
    levels = re.findall(r'<line class="level"[^>]*><title>level ([0-9.]+)</title>', chart)
    assert [float(v) for v in levels] == [pytest.approx(cp.before, rel=1e-3),
                                          pytest.approx(cp.after, rel=1e-3)]
    assert f"x{cp.ratio:.3f} confirmed" in chart
