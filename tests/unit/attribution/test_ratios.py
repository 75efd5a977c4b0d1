"""The attribution's ratios: Welch's interval on the log of per-forward values, which pairs are
compared, and the one line naming the families that moved."""

from __future__ import annotations

import math

import numpy as np
import pytest

from servegate.attribution.ratios import compare, line, pairs, ratio_interval


def _forward(kind: str, us: dict[str, float], tokens: int | None = None) -> dict:
    out = {"stage": "EXTEND" if kind == "prefill" else "DECODE", "kind": kind, "bs": 2,
           "span_us": sum(us.values()), "us": us}
    if tokens:
        out["tokens"] = tokens
    return out


def _block(mode: str, gemm_scale: float, jitter: tuple[float, ...], arm: str = "") -> dict:
    forwards = []
    for i, j in enumerate(jitter):
        tokens = (256, 236, 108)[i % 3]
        forwards.append(_forward("prefill", {"gemm": 4.0 * tokens * gemm_scale * j,
                                             "attention": 1.0 * tokens * j,
                                             "norm_elementwise": 2.0 * tokens * j}, tokens))
        forwards.append(_forward("decode", {"gemm": 700.0 * gemm_scale * j,
                                            "attention": 300.0 * j,
                                            "norm_elementwise": 500.0 * j}))
    return {"arm": arm, "mode": mode, "start": 0, "forwards": forwards}


def test_interval_of_a_known_ratio() -> None:
    a, b = [2.0, 2.2, 1.8, 2.1], [1.0, 1.1, 0.9, 1.05]
    ratio, low, high, moved = ratio_interval(a, b, floor=0.1)
    assert ratio == pytest.approx(2.0, rel=0.01)
    assert low < ratio < high and low > 1.1 and moved
    same = ratio_interval([1.0, 1.1, 0.9], [1.0, 1.1, 0.9], floor=0.1)
    assert same is not None and same[0] == pytest.approx(1.0) and not same[3]
    assert ratio_interval([1.0], [1.0, 2.0], floor=0.1) is None


def test_a_change_inside_the_floor_is_not_moved_however_tight() -> None:
    _, low, _, moved = ratio_interval([1.05] * 3 + [1.0501], [1.0] * 3 + [1.0001], floor=0.1)
    assert low > 1.0 and not moved


def test_pairs_modes_against_off_and_head_against_base() -> None:
    assert pairs(["off", "on", "forced"]) == [("on", "off"), ("forced", "off")]
    assert pairs(["on", "forced"]) == []
    assert pairs(["base-off", "head-off", "base-on", "head-on"]) == [
        ("head-off", "base-off"), ("head-on", "base-on")]


def test_a_gemm_only_change_names_gemm_and_no_other_family() -> None:
    jitter_off, jitter_forced = (1.0, 1.04, 0.97, 1.02, 0.99, 1.03), (1.02, 0.98, 1.01, 1.0,
                                                                     0.97, 1.04)
    blocks = [_block("off", 1.0, jitter_off), _block("forced", 4.0, jitter_forced)]
    (found,) = compare(blocks, floor=0.1)
    assert (found["a"], found["b"]) == ("forced", "off")
    assert found["moved"] == ["gemm"]
    ratios = {(r["family"], r["quantity"]): r for r in found["ratios"]}
    assert ratios[("gemm", "prefill_per_token")]["ratio"] == pytest.approx(4.0, rel=0.05)
    assert ratios[("gemm", "decode_per_forward")]["moved"]
    assert not ratios[("attention", "prefill_per_token")]["moved"]
    assert ("moe", "prefill_per_token") not in ratios           # absent on both sides
    assert found["line"].startswith("forced vs off: moved beyond noise: dense GEMM per prefill "
                                    "token x3.98 [")
    assert "within noise: attention x1.00" in found["line"]


def test_head_vs_base_per_mode() -> None:
    blocks = [_block("off", 1.0, (1.0, 1.02, 0.98), "base"), _block("off", 0.62,
                                                                     (1.0, 0.99, 1.01), "head")]
    (found,) = compare(blocks)
    assert (found["a"], found["b"]) == ("head-off", "base-off")
    assert found["moved"] == ["gemm"] and "x0.62" in found["line"]


def test_line_without_movement() -> None:
    assert line("on", "off", []) == "on vs off: no family moved beyond noise"


# The "moved" rule calibrated: simulated profiled blocks (one per mode) through compare(). Each
# block shifts every family's time by its own log-normal factor (the between-block spread), each
# forward adds its own (prefill attention and `other` are the noisiest on the CPU trace); GEMM is
# slowed x2 per prefill token and x9 per decode forward in `forced`, as the shared e2e injects.
_FAMILIES = ("gemm", "attention", "norm_elementwise", "other")
_PREFILL_US = {"gemm": 800.0, "attention": 150.0, "norm_elementwise": 200.0, "other": 100.0}
_DECODE_US = {"gemm": 30000.0, "attention": 3000.0, "norm_elementwise": 5000.0, "other": 2000.0}
_PREFILL_SD = {"gemm": 0.1, "attention": 0.5, "norm_elementwise": 0.1, "other": 0.3}
_DECODE_SD = 0.1


def _simulated_block(rng, mode: str, gemm: tuple[float, float], block_sd: float) -> dict:
    shift = {f: rng.normal(0.0, block_sd) for f in _FAMILIES}
    forwards = []
    for tokens in (256, 256, 88):
        forwards.append({"kind": "prefill", "tokens": tokens, "us": {
            f: _PREFILL_US[f] * tokens * (gemm[0] if f == "gemm" else 1.0)
            * math.exp(shift[f] + rng.normal(0.0, _PREFILL_SD[f])) for f in _FAMILIES}})
    for _ in range(9):
        forwards.append({"kind": "decode", "us": {
            f: _DECODE_US[f] * (gemm[1] if f == "gemm" else 1.0)
            * math.exp(shift[f] + rng.normal(0.0, _DECODE_SD)) for f in _FAMILIES}})
    return {"arm": "", "mode": mode, "start": 0, "forwards": forwards}


def _named(runs: int, block_sd: float, block_cv: float, gemm: tuple[float, float],
           seed: int = 20261203) -> tuple[float, float]:
    """(share of runs naming an untouched family, share naming GEMM) at the cpu suite's floor."""
    rng = np.random.default_rng(seed)
    untouched = named_gemm = 0
    for _ in range(runs):
        (found,) = compare([_simulated_block(rng, "off", (1.0, 1.0), block_sd),
                            _simulated_block(rng, "forced", gemm, block_sd)], 0.4, block_cv)
        untouched += any(f != "gemm" for f in found["moved"])
        named_gemm += "gemm" in found["moved"]
    return untouched / runs, named_gemm / runs


def test_between_block_spread_keeps_untouched_families_unnamed_and_gemm_named() -> None:
    """At the CPU's between-block log-sd (0.15, suites/cpu.toml block_cv): an untouched family
    named in 0.7 % of 1000 runs (here 600: <= 2 %), the e2e's GEMM slowdown in every run; the
    rule without block_cv named one in 13.8 % (the shared e2e: 1 failure in 7 runs)."""
    untouched, gemm = _named(600, 0.15, 0.15, (2.0, 9.0))
    assert untouched <= 0.02 and gemm >= 0.99, (untouched, gemm)
    old_untouched, _ = _named(600, 0.15, 0.0, (2.0, 9.0))
    assert old_untouched >= 0.08, old_untouched


def test_two_blocks_a_side_are_the_units() -> None:
    rng = np.random.default_rng(7)
    blocks = [dict(_simulated_block(rng, mode, gemm, 0.15), start=start)
              for start in (0, 1) for mode, gemm in (("off", (1.0, 1.0)), ("forced", (2.0, 9.0)))]
    (found,) = compare(blocks, 0.4, 0.15)
    ratios = {(r["family"], r["quantity"]): r for r in found["ratios"]}
    decode = ratios[("gemm", "decode_per_forward")]
    assert decode["blocks"] == [2, 2] and decode["between"] == "blocks" and decode["n"] == [18, 18]
    assert decode["ratio"] == pytest.approx(9.0, rel=0.35)
    (one,) = compare(blocks[:2], 0.4, 0.15)
    assert {r["between"] for r in one["ratios"]} == {"prior"}


def test_the_prior_widens_an_interval_of_agreeing_forwards() -> None:
    a, b = [1.30, 1.31, 1.29, 1.30], [1.0, 1.01, 0.99, 1.0]
    tight = ratio_interval(a, b, floor=0.1)
    wide = ratio_interval(a, b, floor=0.1, known_var=2 * 0.15 ** 2)
    assert tight is not None and wide is not None
    assert tight[3] and not wide[3]                 # x1.30: moved alone, not across blocks
    assert wide[1] < tight[1] < tight[2] < wide[2]
