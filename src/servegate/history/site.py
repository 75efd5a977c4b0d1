"""``history publish``: the history store as a static site, a pure function of the store (the
same store writes the same bytes; why static: docs/history.md, The history site). This module
builds the files and writes them (the state: .verdict, the pages: .pages, the charts: .svg, the
HTML: .render)."""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from servegate.core.atomic import write_text
from servegate.history.health import health
from servegate.history.noise import ALPHA
from servegate.history.pages import (
    GENERATOR_META,
    SERIES_DIR,
    STYLE,
    SeriesPage,
    check_artifacts_base,
    series_pages,
)
from servegate.history.records import Record
from servegate.history.render import STYLE_CSS, render_index, render_series
from servegate.history.report import analyse
from servegate.history.store import HistoryError, Problem, read_store


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
    profiles = {(e["runner"], e["model"], e["suite"]): e for e in health(records)}
    files["index.html"] = render_index(groups, problems, artifacts_base,   # last: see write_site
                                       profiles)
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
        if GENERATOR_META in head:
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
