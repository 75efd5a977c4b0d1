"""The history site's pages: one per series, where each lives, whether the suite gates it.

Why one page per series rather than one per runner/model/suite: a change point belongs to one
series, and its page is the URL one pastes into an issue; the index does the grouping. The store
keeps no artifact location; ``artifacts_base`` links each night to ``<base>/<run_id>/`` (or
``base`` with ``{run_id}`` replaced; a relative base is relative to the site's root).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlparse

from servegate.config.judge import gated_floors
from servegate.history.report import SeriesReport
from servegate.history.store import HistoryError
from servegate.history.verdict import Verdict, night_verdict

GENERATOR = "servegate history publish"
GENERATOR_META = f'<meta name="generator" content="{GENERATOR}">'
STYLE = "style.css"
SERIES_DIR = "series"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")

Identity = tuple[str, str, str]     # (runner class, model, suite)


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


def series_pages(reports: Sequence[SeriesReport]) -> dict[Identity, list[SeriesPage]]:
    """Every series as a page, grouped per (runner, model, suite) in the report's order.

    Gated: the metrics the suite's ``[judge]`` table gates (:func:`gated_floors`, the table the
    noise budget reads); a suite file that does not parse gates nothing here (its series are
    still published, under "other metrics")."""
    gated_by_suite: dict[str, frozenset[str]] = {}
    groups: dict[Identity, list[SeriesPage]] = defaultdict(list)
    used: set[str] = set()
    for report in reports:
        suite = report.key[2]
        if suite not in gated_by_suite:
            gated_by_suite[suite] = frozenset(gated_floors(suite)[0])
        path, number = page_path(report), 2
        while path in used:             # two keys that sanitise alike: keep both pages
            path = page_path(report).removesuffix(".html") + f"-{number}.html"
            number += 1
        used.add(path)
        gated = report.key[5] in gated_by_suite[suite]
        groups[report.key[:3]].append(SeriesPage(report, path, gated, night_verdict(report)))
    return dict(groups)
