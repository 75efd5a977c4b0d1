"""Where the repository's own files are, for tests anywhere under ``tests/``.

Test files sit at different depths (``tests/``, ``tests/unit/<package>/``), so paths are built
from here, once, rather than from each test file's ``__file__``. Everything a test reads ships
with the repository: GSM8K inside the package, real sglang CPU server logs under ``tests/data/``.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
SRC = REPO_ROOT / "src"
TEST_DATA = REPO_ROOT / "tests" / "data"
LEGACY_SUITES = TEST_DATA / "suites" / "legacy"


def packaged_gsm8k() -> Path:
    """The GSM8K files servegate ships (MIT, LICENSE beside them)."""
    from servegate.accuracy.dataset import PACKAGED_DIR

    return PACKAGED_DIR


# suites/cpu.toml's [design] keys as written (from `starts` to `spending_power`): a test that
# serves a counted design replaces them
CPU_DESIGN = re.search(r"\nstarts = .*?\nspending_power = [^\n]*\n",
                       (REPO_ROOT / "suites" / "cpu.toml").read_text(), re.S).group(0)


def edited_suite(tmp_path: Path, name: str, old: str, new: str,
                 *more: tuple[str, str]) -> Path:
    """A copy of the shipped ``suites/<name>.toml`` in ``tmp_path`` (same file name: a suite's name
    is its file's) with ``old`` replaced by ``new`` (and each further ``(old, new)`` pair); each
    ``old`` must be there, so a suite edit that drops it fails the test instead of silently
    testing the shipped file."""
    text = (REPO_ROOT / "suites" / f"{name}.toml").read_text()
    for before, after in ((old, new), *more):
        assert before in text, f"suites/{name}.toml no longer contains {before!r}"
        text = text.replace(before, after)
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path
