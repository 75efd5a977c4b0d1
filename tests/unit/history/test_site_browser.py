"""The published history site in a real browser: headless Chromium loads it from ``file://``.

Why a browser and not only the HTML checks of test_site.py: ``file://`` is where a static site
breaks first (absolute links, a stylesheet from a CDN, a script blocked from a local file);
the browser proves the page renders, with its inline SVG, from the files alone.

How console errors are caught: Chromium's own log on stderr (``--enable-logging=stderr
--v=0``), where every console message and uncaught exception of the page is a ``CONSOLE`` line
(``INFO:CONSOLE`` in Chromium 156, ``ERROR:CONSOLE`` / ``CONSOLE(n)`` in older ones). The site
has no JavaScript, so any such line fails the test. Limits: this depends on Chromium's log
format (a release that renames the tag would make the check pass vacuously:
``test_the_console_check_can_fail`` guards against that), and the log does not report a failed
subresource load (a missing stylesheet or image), which test_site.py checks statically for every
href/src instead. The DevTools protocol would see both, at the price of a websocket client.

Chromium: ``$SERVEGATE_CHROMIUM``, else ``chromium`` on PATH (Debian's package, installed by
``.ci/run`` where apt can). Without it (or when ``chromium --version`` fails) the tests are
skipped, naming why.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from history_site_store import LAST_SERIES, STEP_AT, STEP_SERIES, page_of, sglang_commit

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
        pytest.skip("headless Chromium not found: `apt-get install -y chromium` (Debian; .ci/run "
                    "does it where apt is available) or set SERVEGATE_CHROMIUM")
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
