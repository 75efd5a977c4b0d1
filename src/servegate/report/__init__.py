"""Report stage: verdict.json, summary.md verdict section, junit.xml, pytest-benchmark, plots.

Every writer has one signature, ``write(judgement) -> list[Path]``: it writes its artefacts
atomically into the run folder and returns their paths; none of them decides anything.
:data:`WRITERS` lists them in the order ``servegate compare`` runs them; the text they show a
person comes from :mod:`servegate.report.headline`, so they agree.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from servegate.report import (
    attribution,
    headline,
    junit,
    plots,
    pytest_benchmark,
    summary,
    verdict_json,
)

if TYPE_CHECKING:
    from servegate.judge.judgement import Judgement

ReportWriter = Callable[["Judgement"], list[Path]]

WRITERS: dict[str, ReportWriter] = {
    "verdict.json": verdict_json.write,
    "summary.md": summary.write,
    "junit.xml": junit.write,
    "pytest_benchmark.json": pytest_benchmark.write,
    "plots": plots.write,
    "attribution": attribution.write,
}


def write_reports(judgement: Judgement, skip: frozenset[str] = frozenset()) -> list[Path]:
    """Run every registered writer but the ``skip``ped ones; returns the written paths."""
    if not judgement.run_dir.is_dir():
        return []
    written: list[Path] = []
    for name, writer in WRITERS.items():
        if name not in skip:
            written += writer(judgement)
    return written


def print_judgement(judgement: Judgement, stream: object = None, *,
                    verbose: bool = False) -> None:
    """The verdict as text on stdout (what CI logs show): :func:`headline.verdict_block`,
    headline first; ``verbose`` prints every check's full line and every note."""
    import sys

    out = stream or sys.stdout
    for line in headline.verdict_block(judgement, verbose=verbose):
        print(line, file=out)
