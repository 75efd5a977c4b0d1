"""The reshape proof's round-by-round comparison (the replays themselves: the real-sglang
preflight tests)."""

from __future__ import annotations

from servegate.preflight.arrivals import PointReplay
from servegate.preflight.reshape import ReshapeProof, compare_rounds, prove


def _replay(*rounds: tuple[int, bool]) -> PointReplay:
    return PointReplay(concurrency=4, requests=4, batches=tuple(b for b, _ in rounds),
                       saturated=tuple(s for _, s in rounds), effective=True)


def test_identical_rounds_hold_and_any_difference_names_its_round() -> None:
    full = _replay((16384, True), (16384, True), (400, False))
    assert compare_rounds(full, full).holds
    moved = compare_rounds(_replay((16384, True), (16000, True), (784, False)), full)
    assert not moved.holds and moved.first_difference == 1
    unsaturated = compare_rounds(_replay((16384, True), (16384, False), (400, False)), full)
    assert unsaturated.first_difference == 1
    longer = compare_rounds(_replay((16384, True), (16384, True), (400, False), (8, False)), full)
    assert not longer.holds and longer.first_difference == 3
    assert (longer.rounds, longer.full_rounds, longer.saturated) == (4, 3, 2)


def test_only_shaped_concurrencies_are_proven_and_a_failure_reads_as_one() -> None:
    calls: list[tuple[int, int, str]] = []

    def replay(conc: int, output_len: int, mode: str) -> PointReplay:
        calls.append((conc, output_len, mode))
        if output_len == 16 and mode == "exact":
            return _replay((16384, True), (100, False))
        return _replay((16384, True), (16384, True))

    proofs = prove((4, 64), {4: 1024, 64: 16}.__getitem__, 1024, replay)
    assert [p.concurrency for p in proofs] == [64]
    assert sorted(calls) == [(64, 16, "exact"), (64, 16, "off"), (64, 1024, "exact"),
                             (64, 1024, "off")]
    [proof] = proofs
    assert isinstance(proof, ReshapeProof) and not proof.holds
    assert proof.modes["off"].holds and not proof.modes["exact"].holds
    assert proof.contract()["modes"]["exact"]["first_difference"] == 1
    assert "exact: 2 rounds vs 2, first differing at round 2" in proof.reason()
