"""The no-op's prefill-batch evidence (servegate.judge.alignment): the one-sided Fisher test on
aligned saturated batches, the counts behind it, and the reported batch sequences, against
values worked out by hand or by scipy (issue 15). Points come both as a run from before
[design] writes them (``repeat``) and as in-server blocks (``start``, ``block``)."""

from __future__ import annotations

from typing import Any

import pytest
from scipy import stats as sps

from servegate.judge import alignment
from servegate.judge.alignment import aligned_beyond_off, aligned_counts, sequence_note
from servegate.judge.checks import Check


def _point(mode: str, repeat: int, aligned: float, saturated: int,
           tokens: list[int] | None = None, conc: int = 4) -> dict[str, Any]:
    """A point of a run from before [design]: its repeat is its own server start."""
    alignment_: dict[str, Any] = {"aligned_fraction": aligned, "saturated_batches": saturated}
    if tokens is not None:
        alignment_["prefill_tokens"] = tokens
    return {"mode": mode, "concurrency": conc, "repeat": repeat, "alignment": alignment_}


def _block(mode: str, start: int, block: int, tokens: list[int]) -> dict[str, Any]:
    """An in-server block: its repeat counts blocks across starts (as bench writes it)."""
    return {"mode": mode, "concurrency": 4, "repeat": 10 * start + block, "start": start,
            "block": block, "alignment": {"prefill_tokens": tokens}}


def _noop(off: list[dict[str, Any]], on: list[dict[str, Any]], confidence: float) -> Check:
    check = Check("claim", "prefill", "aligned_fraction", "pass", mode="on", reference="off",
                  claim="noop-prefill")
    got = aligned_beyond_off(check, on, off, confidence)
    assert got is check                            # decided in place
    return got


def test_equal_alignment_passes_with_both_shares() -> None:
    check = _noop([_point("off", 0, 0.0, 3)], [_point("on", 0, 0.0, 3)], 0.95)
    assert check.verdict == "pass" and check.interval is None
    assert (check.current_value, check.reference_value) == (0.0, 0.0)
    assert check.p_value == pytest.approx(1.0)


def test_on_aligned_beyond_off_is_a_regression_at_the_family_level() -> None:
    # on 3/3 aligned, off 0/3: one-sided Fisher p = 1 / C(6, 3) = 0.05 (by hand)
    off, on = [_point("off", 0, 0.0, 3)], [_point("on", 0, 1.0, 3)]
    at_90 = _noop(off, on, 0.90)
    assert at_90.verdict == "regression"
    assert at_90.reason.startswith(
        "aligned on 3/3 vs off 0/3 saturated batches (one-sided Fisher p=0.05, alpha 0.1): "
        "on aligns more than off - exact fill leaked?; ")
    assert (at_90.current_value, at_90.reference_value) == (1.0, 0.0)
    assert at_90.p_value == pytest.approx(0.05)             # Holm's input
    at_96 = _noop(off, on, 0.96)                  # alpha 0.04 < p: not demonstrated
    assert at_96.verdict == "pass"
    assert at_96.reason.startswith(
        "aligned on 3/3 vs off 0/3 saturated batches (one-sided Fisher p=0.05, alpha 0.04); ")


def test_the_fisher_test_is_one_sided_on_aligning_more() -> None:
    # off aligning more than on is no sign of a leak: p = 1 for "on greater" (scipy reference)
    off, on = [_point("off", 0, 1.0, 3)], [_point("on", 0, 0.0, 3)]
    check = _noop(off, on, 0.5)
    reference = sps.fisher_exact([[0, 3], [3, 0]], alternative="greater").pvalue
    assert reference == pytest.approx(1.0)
    assert check.verdict == "pass" and "Fisher p=1," in check.reason


def test_the_fisher_table_counts_each_sides_unaligned_batches() -> None:
    off, on = [_point("off", 0, 1 / 3, 3)], [_point("on", 0, 1.0, 3)]      # 1/3 vs 3/3
    check = _noop(off, on, 0.5)
    reference = sps.fisher_exact([[3, 0], [1, 2]], alternative="greater").pvalue
    assert check.p_value == pytest.approx(reference) and reference < 0.5


def test_aligned_counts_sum_over_points_with_rounding_and_missing_fields() -> None:
    # 1/3 of 3 batches -> 1 aligned; missing fraction -> none aligned; missing count -> none
    points = [_point("on", 0, 1 / 3, 3), {"alignment": {"saturated_batches": 4}},
              {"alignment": {"aligned_fraction": 1.0}}, {}]
    assert aligned_counts(points) == (1, 7)


@pytest.mark.parametrize(("n_off", "n_on"), [(0, 3), (3, 0), (0, 0)])
def test_no_saturated_batches_on_either_side_is_inconclusive(n_off: int, n_on: int) -> None:
    check = _noop([_point("off", 0, 0.0, n_off, [10])], [_point("on", 0, 0.0, n_on, [10])],
                  0.95)
    assert check.verdict == "inconclusive" and check.p_value == 1.0    # never decides
    assert check.reason == (f"no saturated prefill batches to compare (on {n_on}, off {n_off}); "
                            "batch sequences identical in 1/1 block(s)")


def test_a_single_saturated_batch_per_side_is_judged() -> None:
    check = _noop([_point("off", 0, 0.0, 1)], [_point("on", 0, 0.0, 1)], 0.95)
    assert check.verdict == "pass" and "aligned on 0/1 vs off 0/1" in check.reason


# --------------------------------------------------------------- reported sequences


def test_sequence_note_identical_sequences() -> None:
    off = [_point("off", r, 0, 2, [256, 44]) for r in (0, 1)]
    on = [_point("on", r, 0, 2, [256, 44]) for r in (1, 0)]
    assert sequence_note(off, on) == "batch sequences identical in 2/2 block(s)"


def test_sequence_note_names_the_first_difference_and_tests_the_sizes() -> None:
    off = [_point("off", 0, 0, 0, [256, 44]), _point("off", 1, 0, 0, [256, 236, 64]),
           _point("off", 2, 0, 0, [256, 100])]
    on = [_point("on", 0, 0, 0, [256, 44]), _point("on", 1, 0, 0, [256, 256, 44]),
          _point("on", 2, 0, 0, [256, 90])]
    p_value = sps.ks_2samp([256, 44, 256, 256, 44, 256, 90],
                           [256, 44, 256, 236, 64, 256, 100]).pvalue
    assert sequence_note(off, on) == (
        "batch sequences identical in 1/3 block(s) (c4 start 1 block 0: batch 1: off=236 "
        f"on=256); size distributions KS p={p_value:.3g}")


def test_sequence_note_a_shorter_sequence_differs_by_length() -> None:
    off = [_point("off", 0, 0, 0, [256, 256, 44])]
    on = [_point("on", 0, 0, 0, [256, 256])]
    note = sequence_note(off, on)
    assert note.startswith("batch sequences identical in 0/1 block(s) (c4 start 0 block 0: "
                           "lengths differ: off has 3 batches, on has 2); size distributions KS p=")


def test_sequence_note_only_compares_blocks_with_sequences_on_both_sides() -> None:
    off = [_point("off", 0, 0, 0, [256]), _point("off", 1, 0, 0, [256]),
           _point("off", 2, 0, 0, None)]
    on = [_point("on", 0, 0, 0, [256]), _point("on", 2, 0, 0, [1]), _point("on", 3, 0, 0, [2])]
    assert sequence_note(off, on) == "batch sequences identical in 1/1 block(s)"
    assert sequence_note([_point("off", 0, 0, 0, None)], [_point("on", 0, 0, 0, [1])]) \
        == "no prefill-batch sequences recorded"
    assert sequence_note([], []) == "no prefill-batch sequences recorded"


def test_sequence_note_pairs_in_server_blocks_by_start_and_block_round() -> None:
    """Blocks are compared with the block of the same start and round (not by ``repeat``),
    and a concurrency only with itself."""
    off = [_block("off", 0, 0, [256, 44]), _block("off", 0, 1, [256, 44]),
           _block("off", 1, 0, [256, 44])]
    on = [_block("on", 1, 0, [256, 44]), _block("on", 0, 1, [256, 236]),
          _block("on", 0, 0, [256, 44])]
    assert sequence_note(off, on).startswith(
        "batch sequences identical in 2/3 block(s) (c4 start 0 block 1: batch 1: off=44 on=236)")
    other_conc = [{**p, "concurrency": 8} for p in on]
    assert sequence_note(off, other_conc) == "no prefill-batch sequences recorded"


def test_first_difference() -> None:
    assert alignment._first_difference([1, 2, 3], [1, 5, 3]) == "batch 1: off=2 on=5"
    assert alignment._first_difference([1, 2], [1, 2, 3]) == \
        "lengths differ: off has 2 batches, on has 3"
