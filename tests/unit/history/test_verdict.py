"""The latest night's verdict the history site shows (servegate.history.verdict), derived from
the change points of the seeded store (history_site_store.py) and of hand-made series."""

from __future__ import annotations

import math

import pytest
from history_site_store import LAST_SERIES, NIGHTS, STEP_SERIES

from servegate.history.changepoints import detect
from servegate.history.records import Record
from servegate.history.report import SeriesReport
from servegate.history.verdict import Verdict, group_verdict, latest_ratio, night_verdict


def test_night_verdicts_of_the_three_kinds_of_series(
        reports: dict[tuple, SeriesReport]) -> None:
    step = night_verdict(reports[STEP_SERIES])
    assert (step.state, step.css) == ("steady", "ok")
    assert step.ratio is not None and abs(step.ratio - 1) < 0.06
    last = night_verdict(reports[LAST_SERIES])
    assert (last.state, last.effect, last.css) == ("suspected", "regression", "bad")
    assert last.ratio is not None and last.ratio > 1.08
    recent = night_verdict(reports[STEP_SERIES], recent=NIGHTS)
    assert (recent.state, recent.effect) == ("confirmed", "regression")
    assert recent.severity > last.severity > step.severity


def _series(nights: list[list[float]], metric: str = "mean_ttft_ms") -> SeriesReport:
    records = tuple(Record(run_id=f"r{i:02d}", time=f"2026-01-{i + 1:02d}", runner_class="cpu",
                           model="m", suite="s", mode="off", concurrency=2, metric=metric,
                           values=tuple(values)) for i, values in enumerate(nights))
    key = ("cpu", "m", "s", "off", 2, metric)
    return SeriesReport(key, records, detect([r.values for r in records]))


def test_latest_ratio_is_the_latest_night_over_the_geometric_level_of_the_others() -> None:
    flat = [[100.0, 102.0], [101.0, 99.0], [98.0, 100.0], [100.0, 101.0], [99.0, 100.0]]
    report = _series([*flat, [100.5, 101.5]])
    level = sum(math.log(v) for night in flat for v in night) / 10     # 2 values a night
    latest = (math.log(100.5) + math.log(101.5)) / 2
    assert latest_ratio(report) == pytest.approx(math.exp(latest - level), rel=1e-9)
    assert night_verdict(report).state == "steady"
    young = _series(flat[:2])                                      # too few nights: no level
    assert latest_ratio(young) is None and night_verdict(young).state == "not analysed"


def test_group_verdict_is_the_worst_gated_series_and_counts_who_shares_it() -> None:
    steady = Verdict("steady", "", "steady", 1.0)
    better = Verdict("confirmed", "improvement", "x0.9", 0.9)
    worse = Verdict("suspected", "regression", "x1.1", 1.1)
    assert group_verdict([steady, steady]).text == "steady: 2 of 2 gated series"
    mixed = group_verdict([steady, better, worse, worse])
    assert (mixed.state, mixed.effect, mixed.css) == ("suspected", "regression", "bad")
    assert mixed.text == "suspected regression: 2 of 4 gated series"
    assert group_verdict([steady, better]).css == "good"
    assert group_verdict([]).text == "no gated metric in the store"
