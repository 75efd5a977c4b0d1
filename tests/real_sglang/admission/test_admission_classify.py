"""``servegate.admission.classify.classify_tree`` on real sglang trees: what a bisect step gets
from the admission stage alone. A two-scenario suite keeps each call to the two imports (about
20 s, both trees at once); the full suite's verdict on the same edit is in test_admission_ab.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from sglang_trees import EXACT_FILL_SHORT, NO_IMPORT, edited_copy, installed_tree

from servegate.admission.classify import (
    DOES_NOT_IMPORT,
    INVARIANT_FAILED,
    Classification,
    classify_tree,
)

SUITE = """
[admission]
page_sizes = [64]
chunk_sizes = [2048]
mixes = ["one-long", "many-medium"]
paths = ["radix"]
modes = ["off", "on", "forced"]
"""


def _classify(tmp_path: Path, edits: dict[str, tuple[str, str]]) -> tuple[Classification, Path]:
    """The installed sglang as the good tree, a copy with ``edits`` as the candidate."""
    suite = tmp_path / "admission.toml"
    suite.write_text(SUITE)
    good = installed_tree()
    candidate = edited_copy(good, tmp_path / "candidate", edits)
    return classify_tree(good, candidate, suite=suite, runner="cpu"), candidate


@pytest.mark.sglang
def test_a_candidate_one_token_short_of_exact_fill_is_decided_by_its_invariant(
        tmp_path: Path) -> None:
    got, _ = _classify(tmp_path, EXACT_FILL_SHORT)
    assert got.verdict == INVARIANT_FAILED and got.decided and got.reason is None
    assert got.moved == ("p64-c2048-one-long-radix [forced]", "p64-c2048-many-medium-radix [forced]")
    assert any("exact-fill-fills-chunk: saturated forced batch is 2047 tokens" in line
               for line in got.invariant_failures)


@pytest.mark.sglang
def test_a_candidate_that_does_not_import_is_named_with_the_failing_module(
        tmp_path: Path) -> None:
    got, broken = _classify(tmp_path, NO_IMPORT)
    assert got.verdict == DOES_NOT_IMPORT and not got.decided
    assert got.reason is not None and f"--head {broken}" in got.reason
    assert "sglang.srt.managers.schedule_policy" in got.reason
    assert "No module named 'sglang_missing_dependency'" in got.reason
