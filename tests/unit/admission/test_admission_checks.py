"""The admission checks themselves must catch what they claim to (no sglang needed)."""

from __future__ import annotations

import dataclasses

from servegate.admission import checks
from servegate.admission.replay import Admission, Round, Trace
from servegate.admission.scenario import Prompt, Scenario

# The KV reservation of each length (ceil to the page, plus one page), worked out by hand, not
# with the formula of the code under test.
KV_RESERVED = {
    64: {3000: 3072, 5000: 5120, 7000: 7104, 1280: 1344, 7720: 7808, 1384: 1472, 7616: 7680,
         16384: 16448, 64: 128, 0: 64, 100: 192},
    1: {2048: 2049, 952: 953, 2040: 2041, 960: 961},
}


def _trace(mode: str, extends: list[list[int]], page: int = 64, chunk: int = 16384,
           effective: bool | None = None, leak: int = 0) -> Trace:
    scenario = Scenario(page_size=page, chunk_size=chunk,
                        prompts=tuple(Prompt(n) for n in (3000, 5000, 7000, 9000)))
    rounds = []
    for index, lens in enumerate(extends):
        adms = [Admission(f"r{i}", 0, n, KV_RESERVED[page][n], False)
                for i, n in enumerate(lens)]
        rounds.append(Round(index, adms, sum(lens), index < len(extends) - 1,
                            0, 0, "chunk"))
    return Trace(scenario=scenario, mode=mode,
                 effective=(mode == "forced") if effective is None else effective,
                 rounds=rounds, pool_tokens=1000, free_after=900 - leak, evictable_after=100,
                 rows_total=6, rows_free_after=6)


def test_forced_saturated_round_short_of_chunk_fails() -> None:
    result = checks.check_trace(_trace("forced", [[3000, 5000, 7000, 1280], [7720]]))
    assert any("saturated forced batch is 16280" in f and "round 0" in f for f in result.failures)


def test_exact_fill_effective_in_on_is_held_to_the_chunk_like_forced() -> None:
    """On gfx95 ``on`` runs exact fill: a saturated round short of the chunk fails the named
    invariant; off gfx95 (not effective) the same page-floored round is ``off``'s, no failure."""
    short = [[3000, 5000, 7000, 1280], [7720]]
    trace = _trace("on", short, effective=True)
    assert checks.check_trace(trace).failures == [
        f"{trace.scenario.scenario_id} [on] round 0: exact-fill-fills-chunk: saturated on batch "
        "is 16280 tokens, expected exactly the chunk size 16384"]
    assert checks.check_trace(_trace("on", short, effective=False)).failures == []


def test_forced_exact_round_passes() -> None:
    assert checks.check_trace(_trace("forced", [[3000, 5000, 7000, 1384], [7616]])).failures == []


def test_round_over_chunk_and_zero_chunk_fail() -> None:
    result = checks.check_trace(_trace("off", [[16384, 64, 0], [100]]))
    assert any("exceeds chunk size" in f for f in result.failures)
    assert any("zero-length chunk" in f for f in result.failures)


def test_kv_budget_must_stay_page_ceiled() -> None:
    trace = _trace("off", [[3000, 5000, 7000, 1280], [7720]])
    trace.rounds[0].admissions[0] = dataclasses.replace(trace.rounds[0].admissions[0],
                                                        kv_reserved=3000 + 64)
    result = checks.check_trace(trace)
    assert any("KV budget for r0 grew by 3064" in f for f in result.failures)


def test_leak_is_reported() -> None:
    result = checks.check_trace(_trace("off", [[100]], leak=64))
    assert any("KV slots leaked" in f for f in result.failures)


def test_on_must_equal_off_without_gfx95() -> None:
    off = _trace("off", [[3000, 5000, 7000, 1280], [7720]])
    on_same = dataclasses.replace(off, mode="on")
    assert checks.check_modes({"off": off, "on": on_same}).failures == []
    on_diff = _trace("on", [[3000, 5000, 7000, 1384], [7616]], effective=True)
    failures = checks.check_modes({"off": off, "on": on_diff}).failures
    assert any("gate leaked" in f for f in failures)
    assert any("not a no-op" in f and "round 0" in f for f in failures)


def test_page_one_forced_must_equal_off() -> None:
    off = _trace("off", [[2048], [952]], page=1, chunk=2048)
    forced = _trace("forced", [[2040], [960]], page=1, chunk=2048)
    failures = checks.check_modes({"off": off, "forced": forced}).failures
    assert any("page size 1 must make forced == off" in f for f in failures)


# Check results on traces written out by hand (issue 15).
#
# Every trace here is written out by hand, KV reservations included (worked out on paper, never
# with the formula the checks use), so a check that computes the wrong thing cannot agree with
# its own test by construction.


def test_check_result_extend_keeps_both() -> None:
    a = checks.CheckResult(["f1"], ["n1"])
    a.extend(checks.CheckResult(["f2"], ["n2"]))
    assert (a.failures, a.findings) == (["f1", "f2"], ["n1", "n2"])
