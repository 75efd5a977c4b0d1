"""``servegate history publish``: the static site of the history store (servegate.history.site
and the pages, charts and HTML it builds from).

The store is the seeded one of history_site_store.py (40 nights through the real store API):
a confirmed 8 % step at night 20 on ``off``, a one-night blip on ``on@c4``, a suspected step on
``on@c2``'s last night. The site must work from ``file://`` and GitHub Pages alike, so every
reference must be relative and resolve to a file the publish wrote.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import pytest
from history_site_store import (
    BLIP_AT,
    BLIP_SERIES,
    LAST_SERIES,
    NIGHTS,
    STEP_AT,
    STEP_SERIES,
    SeededStore,
    add_night,
    page_of,
    sglang_commit,
)

from servegate.history import site
from servegate.history.cli import main
from servegate.history.render import STYLE_CSS
from servegate.history.report import SeriesReport


class _References(HTMLParser):
    """Every href/src of a page (with the tag), and every id it defines."""

    def __init__(self) -> None:
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                self.refs.append((tag, name, value))
            if name == "id" and value:
                self.ids.add(value)


def _parse(path: Path) -> _References:
    parser = _References()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def _publish(store: Path, out: Path, *extra: str) -> tuple[int, str]:
    stdout = io.StringIO()
    return main(["publish", "--store", str(store), "--out", str(out), *extra], out=stdout), \
        stdout.getvalue()


# ---------------------------------------------------------------- what is published


def test_index_style_and_one_page_per_series_exist(published_site: Path,
                                                   reports: dict[tuple, SeriesReport]) -> None:
    assert (published_site / "index.html").is_file()
    assert (published_site / "style.css").read_text() == STYLE_CSS
    pages = sorted(p.relative_to(published_site).as_posix()
                   for p in (published_site / "series").glob("*.html"))
    assert pages == sorted(page_of(key) for key in reports)
    assert len(pages) == len(reports) == 33          # 4 points x 8 metrics + GSM8K


def test_step_page_names_the_two_sglang_commits_bracketing_the_step(
        published_site: Path, reports: dict[tuple, SeriesReport]) -> None:
    [cp] = reports[STEP_SERIES].detection.change_points
    assert cp.index == STEP_AT and cp.status == "confirmed"
    text = (published_site / page_of(STEP_SERIES)).read_text()
    before, after = sglang_commit(STEP_AT - 1), sglang_commit(STEP_AT)
    assert f"git log {before}..{after}" in text
    assert f"x{cp.ratio:.3f}" in text and "regression" in text
    # every night is in the table, each with its own commit (the short form, full on hover)
    assert text.count("<tr id=\"n") == NIGHTS
    for night in (0, STEP_AT, NIGHTS - 1):
        assert f'title="{sglang_commit(night)}"' in text


def test_every_reference_is_relative_and_resolves(published_site: Path) -> None:
    pages = [published_site / "index.html", *sorted((published_site / "series").glob("*.html"))]
    ids = {page: _parse(page).ids for page in pages}
    checked = 0
    for page in pages:
        for tag, attr, ref in _parse(page).refs:
            where = f"{page.relative_to(published_site)}: <{tag} {attr}={ref!r}>"
            parsed = urlparse(ref)
            assert not parsed.scheme and not parsed.netloc and not ref.startswith("/"), where
            target = page if not parsed.path else (page.parent / parsed.path).resolve()
            assert target.is_file(), f"{where}: {target} does not exist"
            assert published_site.resolve() in target.resolve().parents \
                or target.resolve().parent == published_site.resolve(), where
            if parsed.fragment:
                assert parsed.fragment in ids.get(target, _parse(target).ids), where
            checked += 1
    assert checked > 3 * len(pages)              # stylesheet, back link, sibling links, ...
    for path in published_site.rglob("*"):
        if path.is_file():
            text = path.read_text(encoding="utf-8")
            assert not re.search(r"https?:", text), f"{path}: an http(s) reference"
            assert "<script" not in text and "@import" not in text, path


def test_index_shows_verdicts_trends_and_links(published_site: Path) -> None:
    text = (published_site / "index.html").read_text()
    # the group's worst gated series: on@c2 jumped on the last night
    assert re.search(r'<h2>cpu / smollm2-135m / nightly-synthetic <span class="badge bad">'
                     r"suspected regression: \d+ of 16 gated series</span>", text)
    row = re.search(rf'<tr><td><a href="{re.escape(page_of(LAST_SERIES))}">mean_ttft_ms</a>'
                    r"</td><td>on@c2</td>.*?</tr>", text)
    assert row and "suspected regression x1.1" in row.group(0)
    step_row = re.search(rf'<tr><td><a href="{re.escape(page_of(STEP_SERIES))}">.*?</tr>', text)
    assert step_row and "steady" in step_row.group(0) and "x1.0" in step_row.group(0)
    # a sparkline per series; non-gated metrics folded under <details>
    assert text.count('<svg class="spark"') == 33
    assert "<details><summary>other metrics (17 series, not gated)</summary>" in text
    assert "nightly-cpu-039" in text and sglang_commit(NIGHTS - 1)[:10] in text


def test_series_page_shows_transients_noise_budget_and_chart(published_site: Path) -> None:
    text = (published_site / page_of(BLIP_SERIES)).read_text()
    transients = text.split("<h2>Transients</h2>")[1].split("<h2>")[0]
    assert f"night {BLIP_AT}: nightly-cpu-{BLIP_AT:03d}" in transients
    noise = text.split("<h2>Noise budget</h2>")[1].split("<h2>")[0]
    assert "practical floor</dt><dd>5.00 %" in noise and "repeats needed for the floor" in noise
    assert '<path class="transient"' in text and '<polyline class="mean"' in text
    assert text.count('fill-opacity="0.45"') == 2 * NIGHTS      # every repeat a dot
    accuracy = (published_site / "series" /
                "cpu__smollm2-135m__nightly-synthetic__off__gsm8k_accuracy.html").read_text()
    assert "judged on questions" in accuracy and "<th>questions</th>" in accuracy


def test_artifacts_base_links_each_night(seeded_store: SeededStore, tmp_path: Path) -> None:
    out = tmp_path / "site"
    code, _ = _publish(seeded_store.store, out, "--artifacts-base", "https://ci.example/runs/")
    assert code == 0
    page = _parse(out / page_of(STEP_SERIES))
    anchors = {ref for tag, _, ref in page.refs if tag == "a"}
    assert f"https://ci.example/runs/nightly-cpu-{STEP_AT:03d}/" in anchors
    assert all(not urlparse(ref).scheme for tag, _, ref in page.refs if tag != "a")
    code, _ = _publish(seeded_store.store, out, "--artifacts-base", "runs/{run_id}/summary.md")
    assert code == 0
    assert "../runs/nightly-cpu-000/summary.md" in {r for _, _, r in
                                                     _parse(out / page_of(STEP_SERIES)).refs}
    assert "runs/nightly-cpu-039/summary.md" in {r for _, _, r in _parse(out / "index.html").refs}


def test_republish_is_byte_identical_and_removes_only_its_own_stale_pages(
        published_site: Path, seeded_store: SeededStore, tmp_path: Path) -> None:
    out = tmp_path / "site"
    shutil.copytree(published_site, out)
    stale = out / "series" / "gone.html"
    stale.write_text((out / page_of(STEP_SERIES)).read_text())
    foreign = out / "series" / "notes.html"
    foreign.write_text("<p>mine</p>")
    code, printed = _publish(seeded_store.store, out)
    assert code == 0 and "1 stale page(s) removed" in printed
    assert not stale.exists() and foreign.exists()
    for path in published_site.rglob("*"):
        if path.is_file():
            assert (out / path.relative_to(published_site)).read_bytes() == path.read_bytes()


def test_every_file_is_written_through_the_atomic_writer(
        seeded_store: SeededStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []
    real = site.write_text

    def recording(path: Path, text: str) -> None:
        calls.append(Path(path))
        real(path, text)

    monkeypatch.setattr(site, "write_text", recording)
    result = site.publish(seeded_store.store, tmp_path / "site")
    written = sorted(p for p in (tmp_path / "site").rglob("*") if p.is_file())
    assert sorted(calls) == written == sorted(result.files)
    assert calls[-1].name == "index.html"        # last: never points at a page not yet written


def test_a_young_store_publishes_its_series_as_not_analysed(tmp_path: Path) -> None:
    """Two nights: no change point analysis yet, but every page still renders."""
    store = tmp_path / "store"
    for night in range(2):
        add_night(tmp_path / "runs", store, night)
    code, _ = _publish(store, tmp_path / "site")
    assert code == 0
    index = (tmp_path / "site" / "index.html").read_text()
    assert '<span class="badge na">not analysed: 16 of 16 gated series</span>' in index
    page = (tmp_path / "site" / page_of(STEP_SERIES)).read_text()
    assert "not analysed: 2 night(s), needs &gt;= 3" in page and page.count('<tr id="n') == 2


# ---------------------------------------------------------------- bad input: exit 2, nothing written


def _bad_store(tmp_path: Path, kind: str, seeded: SeededStore) -> Path:
    store = tmp_path / "store"
    if kind == "file":
        store.write_text("not a folder")
    elif kind == "empty":
        store.mkdir()
        (store / "README").write_text("no runs here")
    elif kind == "malformed":
        shutil.copytree(seeded.store, store)
        (store / "broken-run.jsonl").write_text("{not json\n")
    elif kind == "undecodable":
        store.mkdir()
        (store / "binary.jsonl").write_bytes(b"\xff\xfe\x00garbage")
    return store


@pytest.mark.parametrize(("kind", "message"), [
    ("missing", "history store does not exist"),
    ("file", "history store is a file"),
    ("empty", "history store has no runs to publish"),
    ("malformed", "broken-run.jsonl:1: not valid JSON"),
    ("undecodable", "binary.jsonl:0: unreadable"),
])
def test_bad_store_exits_2_naming_the_path_and_writes_nothing(
        tmp_path: Path, seeded_store: SeededStore, capsys: pytest.CaptureFixture[str],
        kind: str, message: str) -> None:
    store = _bad_store(tmp_path, kind, seeded_store)
    out = tmp_path / "site"
    code, _ = _publish(store, out)
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("history publish: ") and message in err and str(store) in err
    assert not out.exists()


def test_skip_malformed_publishes_the_rest_and_lists_the_line(
        tmp_path: Path, seeded_store: SeededStore, capsys: pytest.CaptureFixture[str]) -> None:
    store = _bad_store(tmp_path, "malformed", seeded_store)
    code, _ = _publish(store, tmp_path / "site", "--skip-malformed")
    assert code == 0
    assert "skipped" in capsys.readouterr().err
    index = (tmp_path / "site" / "index.html").read_text()
    assert "1 unreadable store line(s), skipped" in index
    assert "<code>broken-run.jsonl:1</code>" in index


@pytest.mark.parametrize("argv", [
    ["--out", "{tmp}/file.txt"],
    ["--out", "{store}"],
    ["--out", "{tmp}/site", "--artifacts-base", "javascript:alert(1)"],
    [],                                              # --out is required
])
def test_bad_options_exit_2(tmp_path: Path, seeded_store: SeededStore,
                            capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    (tmp_path / "file.txt").write_text("x")
    args = [a.format(tmp=tmp_path, store=seeded_store.store) for a in argv]
    assert main(["publish", "--store", str(seeded_store.store), *args], out=io.StringIO()) == 2
    assert capsys.readouterr().err
    assert not (tmp_path / "site").exists()
    assert not (seeded_store.store / "index.html").exists()


# The published history site in a real browser: headless Chromium loads it from ``file://``.
#
# Why a browser and not only the HTML checks of test_site.py: ``file://`` is where a static site
# breaks first (absolute links, a stylesheet from a CDN, a script blocked from a local file);
# the browser proves the page renders, with its inline SVG, from the files alone.
#
# How console errors are caught: Chromium's own log on stderr (``--enable-logging=stderr
# --v=0``), where every console message and uncaught exception of the page is a ``CONSOLE`` line
# (``INFO:CONSOLE`` in Chromium 156, ``ERROR:CONSOLE`` / ``CONSOLE(n)`` in older ones). The site
# has no JavaScript, so any such line fails the test. Limits: this depends on Chromium's log
# format (a release that renames the tag would make the check pass vacuously:
# ``test_the_console_check_can_fail`` guards against that), and the log does not report a failed
# subresource load (a missing stylesheet or image), which test_site.py checks statically for every
# href/src instead. The DevTools protocol would see both, at the price of a websocket client.
#
# Chromium: ``$SERVEGATE_CHROMIUM``, else ``chromium`` on PATH (Debian's package, installed by
# ``nox -s unit``, and so by the README test command, where apt can: envbuild.ensure_chromium).
# Without it (or when ``chromium --version`` fails) the tests are skipped, naming why.


FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--enable-logging=stderr", "--v=0")


CONSOLE = re.compile(r":CONSOLE\b|\bUncaught\b")


TIMEOUT_S = 60


WINDOW = (1280, 900)


@pytest.fixture(scope="module")
def chromium() -> str:
    found = os.environ.get("SERVEGATE_CHROMIUM") or shutil.which("chromium") \
        or shutil.which("chromium-browser")
    if not found:
        pytest.skip("headless Chromium not found: `apt-get install -y chromium` (Debian; `nox -s "
                    "unit` does it where apt can: root or passwordless sudo) or set "
                    "SERVEGATE_CHROMIUM")
    try:
        probe = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=30,
                               stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as err:
        pytest.skip(f"{found} does not start: {err}")
    if probe.returncode != 0:      # e.g. Ubuntu's snap wrapper inside a container
        pytest.skip(f"{found} --version exits {probe.returncode}: {probe.stderr.strip()[-300:]}")
    return found


def _run(chromium: str, url: str, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run([chromium, *FLAGS, f"--user-data-dir={profile}", *extra, url],
                          capture_output=True, text=True, timeout=TIMEOUT_S,
                          stdin=subprocess.DEVNULL)


def console_lines(stderr: str) -> list[str]:
    """The page's console messages and uncaught exceptions in Chromium's stderr log."""
    return [line for line in stderr.splitlines() if CONSOLE.search(line)]


def test_step_page_renders_with_both_commits_no_console_error_and_a_screenshot(
        chromium: str, published_site: Path, tmp_path: Path) -> None:
    page = published_site / page_of(STEP_SERIES)
    shot = tmp_path / "step-series.png"
    proc = _run(chromium, page.as_uri(), tmp_path, "--dump-dom", f"--screenshot={shot}",
                f"--window-size={WINDOW[0]},{WINDOW[1]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    before, after = sglang_commit(STEP_AT - 1), sglang_commit(STEP_AT)
    assert f"git log {before}..{after}" in dom
    assert "<svg" in dom and '<polyline class="mean"' in dom
    assert console_lines(proc.stderr) == []
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (WINDOW[1], WINDOW[0])
    # the chart really rendered: pixels of the night-means line (#2c6fbb) are on screen
    blue = np.all(np.abs(pixels - np.array([0x2C, 0x6F, 0xBB]) / 255) < 0.06, axis=-1)
    assert blue.sum() > 200, f"{blue.sum()} pixels of the chart's line colour in {shot}"


def test_index_renders_with_the_verdict_and_the_link_to_the_page(
        chromium: str, published_site: Path, tmp_path: Path) -> None:
    proc = _run(chromium, (published_site / "index.html").as_uri(), tmp_path, "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f'href="{page_of(STEP_SERIES)}"' in proc.stdout
    assert f'href="{page_of(LAST_SERIES)}"' in proc.stdout
    assert "suspected regression" in proc.stdout
    assert console_lines(proc.stderr) == []


def test_the_console_check_can_fail(chromium: str, tmp_path: Path) -> None:
    """Guard against a check that passes everything (e.g. a renamed log tag)."""
    page = tmp_path / "broken.html"
    page.write_text("<!DOCTYPE html><p>x</p><script>console.error('servegate-probe');"
                    "missingFunction();</script>")
    proc = _run(chromium, page.as_uri(), tmp_path, "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = console_lines(proc.stderr)
    assert any("servegate-probe" in line for line in found), proc.stderr[-2000:]
    assert any("Uncaught" in line and "missingFunction" in line for line in found)
