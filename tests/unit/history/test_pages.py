"""The history site's pages (servegate.history.pages): where each series page lives, which series
the suite gates, and where a night's artifacts are linked."""

from __future__ import annotations

import pytest

from servegate.history.changepoints import detect
from servegate.history.pages import artifact_href, check_artifacts_base, series_pages
from servegate.history.records import Record
from servegate.history.report import SeriesReport
from servegate.history.store import HistoryError


def _report(model: str, suite: str, metric: str) -> SeriesReport:
    nights = tuple(Record(run_id=f"r{i}", time=f"2026-01-0{i + 1}", runner_class="cpu",
                          model=model, suite=suite, mode="off", concurrency=2, metric=metric,
                          values=(100.0 + i,)) for i in range(3))
    return SeriesReport(("cpu", model, suite, "off", 2, metric), nights,
                        detect([n.values for n in nights]))


def test_the_suite_file_decides_which_series_are_gated() -> None:
    """suites/cpu.toml gates mean_ttft_ms, not p99_ttft_ms; a suite not in suites/ gets the
    default [judge] metrics."""
    groups = series_pages([_report("m", "cpu", "mean_ttft_ms"), _report("m", "cpu", "p99_ttft_ms"),
                           _report("m", "no-such-suite", "mean_ttft_ms")])
    gated = {(ident[2], page.metric): page.gated
             for ident, pages in groups.items() for page in pages}
    assert gated == {("cpu", "mean_ttft_ms"): True, ("cpu", "p99_ttft_ms"): False,
                     ("no-such-suite", "mean_ttft_ms"): True}


def test_two_series_that_sanitise_alike_keep_a_page_each() -> None:
    groups = series_pages([_report("a/b", "s", "mean_ttft_ms"), _report("a_b", "s", "mean_ttft_ms")])
    paths = [page.path for pages in groups.values() for page in pages]
    assert paths == ["series/cpu__a_b__s__off-c2__mean_ttft_ms.html",
                     "series/cpu__a_b__s__off-c2__mean_ttft_ms-2.html"]


@pytest.mark.parametrize(("base", "depth", "href"), [
    (None, 1, None),
    ("https://ci.example/runs", 1, "https://ci.example/runs/r7/"),
    ("https://ci.example/{run_id}/summary.md", 0, "https://ci.example/r7/summary.md"),
    ("runs/", 1, "../runs/r7/"),
    ("runs/{run_id}.html", 0, "runs/r7.html"),
    ("/abs/runs", 2, "/abs/runs/r7/"),
])
def test_artifact_href_is_relative_to_the_page_unless_absolute(base: str | None, depth: int,
                                                               href: str | None) -> None:
    assert artifact_href(base, "r7", depth) == href


@pytest.mark.parametrize("base", ["javascript:alert(1)", "file:///etc", "", "runs /x"])
def test_artifacts_base_other_than_http_or_relative_is_refused(base: str) -> None:
    with pytest.raises(HistoryError, match="--artifacts-base"):
        check_artifacts_base(base)
    check_artifacts_base("https://ci.example/runs/{run_id}/")
