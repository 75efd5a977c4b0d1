"""The attribution's ratios: Welch's interval on the log of per-forward values, which pairs are
compared, and the one line naming the families that moved."""

from __future__ import annotations

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
