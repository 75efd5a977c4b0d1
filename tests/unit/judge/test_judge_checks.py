"""A check's report forms (servegate.judge.checks): the one-line description in summaries and
logs, the verdict.json entry (a contract other tools read) and the decision boundaries the
guidance solves against, pinned on hand-built checks with the expected text written out here
(issue 15)."""

from __future__ import annotations

import math

import pytest
from scipy import stats as sps

from servegate.judge.checks import CHECK_KEYS, Check, overall_verdict
from servegate.judge.stats import Interval
from servegate.report import verdict_json

RATIO = Interval(1.2345678, 1.15, 1.4, 0.99, "requests", 24, 20, se=0.02, df=30.0)


def _check(**kw: object) -> Check:
    base: dict[str, object] = dict(kind="baseline", name="off@c4 mean_ttft_ms vs baseline",
                                   metric="mean_ttft_ms", verdict="regression", mode="off",
                                   concurrency=4, interval=RATIO, floor=0.1,
                                   current_value=123.45678912, reference_value=100.0)
    base.update(kw)
    return Check(**base)  # type: ignore[arg-type]


def test_a_decided_ratio_check_in_one_line() -> None:
    assert _check().describe() == ("[REGRESSION  ] off@c4 mean_ttft_ms vs baseline: ratio 1.235 "
                                   "[1.150, 1.400] (99.00% requests), floor ±10.0%")
    assert _check(reason="why").describe().endswith("floor ±10.0% — why")
    assert _check(gate=False).describe().endswith("floor ±10.0% (not gating)")
    assert _check(gate=False, kind="experiment").describe().endswith(
        "floor ±10.0% (experiment, not gating)")
    assert _check(floor=None).describe().endswith("(99.00% requests)")


def test_an_inconclusive_check_says_its_mde_and_what_would_decide() -> None:
    wide = Interval(1.05, 0.9, 1.25, 0.95, "requests", 24, 24, se=0.08, df=40.0)
    check = _check(verdict="inconclusive", interval=wide)
    q = sps.t.ppf(0.975, 40.0) + sps.t.ppf(0.8, 40.0)
    mde = math.exp(math.log1p(0.1) + q * 0.08) - 1
    guide = wide.guidance((1.1,))
    assert not guide.decided
    assert check.describe() == (
        "[INCONCLUSIVE] off@c4 mean_ttft_ms vs baseline: ratio 1.050 [0.900, 1.250] "
        f"(95.00% requests), floor ±10.0%; MDE {100 * mde:.1f}%; {guide.text}")


def test_a_difference_check_in_one_line() -> None:
    diff = Interval(0.01, -0.02, 0.04, 0.95, "paired (Agresti-Min)", 100, 100,
                    scale="difference", se=0.015)
    check = _check(kind="accuracy", metric="accuracy", verdict="pass", interval=diff,
                   floor=0.02, name="off GSM8K vs baseline")
    assert check.describe() == ("[PASS        ] off GSM8K vs baseline: diff +0.0100 [-0.0200, "
                                "+0.0400] (95.00% paired (Agresti-Min)), margin ±0.0200")
    inconclusive = _check(kind="accuracy", metric="accuracy", verdict="inconclusive",
                          interval=diff, floor=0.02, name="n")
    # MDE of a difference: margin + (z_0.975 + z_0.8) * se = 0.02 + 2.8016 * 0.015 = 6.2 pp
    assert inconclusive.describe().endswith("margin ±0.0200; MDE 6.2 pp")


def test_a_check_without_an_interval_is_its_reason() -> None:
    assert _check(verdict="error", interval=None, reason="no baseline").describe() == \
        "[ERROR       ] off@c4 mean_ttft_ms vs baseline: no baseline"
    assert _check(verdict="error", interval=None).describe() == \
        "[ERROR       ] off@c4 mean_ttft_ms vs baseline"


def test_verdict_json_entry_of_a_ratio_check() -> None:
    entry = _check(reason="r").to_dict()
    assert entry == {
        "kind": "baseline", "name": "off@c4 mean_ttft_ms vs baseline", "metric": "mean_ttft_ms",
        "point": "off@c4", "mode": "off", "concurrency": 4, "reference": "baseline",
        "verdict": "regression", "gate": True, "scale": "ratio", "ratio": 1.234568,
        "difference": None, "interval": [1.15, 1.4], "confidence": 0.99, "method": "requests",
        "n_current": 24, "n_reference": 20, "floor": 0.1,
        "mde": round(RATIO.minimal_detectable_effect(0.1), 6),
        "samples_factor": None, "prompts_factor": None, "guidance": None, "se": 0.02,
        "df": 30.0, "current_value": 123.456789, "reference_value": 100.0, "reason": "r",
        "primary": True, "claim": None, "resolution": None}


def test_the_check_schema_is_the_verdict_json_entrys_keys_in_order() -> None:
    """One schema: CHECK_KEYS (what report/verdict_json validates) is to_dict's keys, for a
    check with or without an interval."""
    assert tuple(_check().to_dict()) == CHECK_KEYS
    assert tuple(_check(interval=None, floor=None, mode=None).to_dict()) == CHECK_KEYS
    assert verdict_json.CHECK_KEYS is CHECK_KEYS
    assert CHECK_KEYS[:2] == ("kind", "name") and CHECK_KEYS[-1] == "resolution"
    assert len(set(CHECK_KEYS)) == len(CHECK_KEYS)


@pytest.mark.parametrize("claim", ["improvement", "accuracy", "noop", "noop-prefill", None])
def test_a_checks_claim_is_a_field_in_its_entry(claim: str | None) -> None:
    entry = _check(kind="claim" if claim else "baseline", claim=claim).to_dict()
    assert entry["claim"] == claim


def test_verdict_json_entry_of_an_undecided_check_carries_the_guidance() -> None:
    wide = Interval(1.05, 0.9, 1.25, 0.95, "requests", 24, 24, se=0.08, df=40.0,
                    run_var=0.001)
    entry = _check(verdict="inconclusive", interval=wide).to_dict()
    guide = wide.guidance((1.1,))
    assert entry["guidance"] == guide.text and entry["guidance"]
    assert entry["samples_factor"] == round(guide.factor, 3)
    assert entry["prompts_factor"] == (None if guide.prompts_factor is None
                                       else round(guide.prompts_factor, 3))


def test_verdict_json_entry_without_an_interval_and_of_a_difference() -> None:
    entry = _check(verdict="error", interval=None, floor=None, current_value=math.inf,
                   reference_value=None, mode=None).to_dict()
    for key in ("scale", "ratio", "difference", "interval", "confidence", "method",
                "n_current", "n_reference", "floor", "mde", "se", "df", "current_value",
                "reference_value", "guidance", "samples_factor", "prompts_factor"):
        assert entry[key] is None, key
    assert entry["point"] == "run"
    diff = Interval(0.0123456789, -0.02, 0.04, 0.95, "paired", 100, 100, scale="difference")
    entry = _check(interval=diff, metric="accuracy").to_dict()
    assert (entry["scale"], entry["ratio"], entry["difference"], entry["se"]) == (
        "difference", None, 0.012346, None)


def test_explicit_boundaries_win() -> None:
    assert _check(boundaries=(0.95, 1.05)).decision_boundaries() == (0.95, 1.05)
    assert _check(boundaries=(0.96,), interval=None).decision_boundaries() == (0.96,)


def test_overall_verdict_folds_gating_checks_by_severity() -> None:
    def c(verdict: str, gate: bool = True) -> Check:
        return _check(verdict=verdict, gate=gate)
    assert overall_verdict([]) == "pass"
    assert overall_verdict([c("pass"), c("improvement")]) == "improvement"
    assert overall_verdict([c("improvement"), c("inconclusive")]) == "inconclusive"
    assert overall_verdict([c("inconclusive"), c("error")]) == "error"
    assert overall_verdict([c("error"), c("regression")]) == "regression"
    assert overall_verdict([c("pass"), c("regression", gate=False)]) == "pass"


def test_verdict_json_rounds_guidance_factors_and_df_to_three_places() -> None:
    # run_var small: more prompts can still decide, so a prompts factor is given
    wide = Interval(1.05, 0.9, 1.25, 0.95, "requests", 24, 24, se=0.08, df=40.123456,
                    run_var=0.0001)
    guide = wide.guidance((1.1,))
    assert guide.prompts_factor is not None and not guide.decided
    assert round(guide.prompts_factor, 3) != round(guide.prompts_factor, 4)   # visible rounding
    entry = _check(verdict="inconclusive", interval=wide).to_dict()
    assert entry["prompts_factor"] == round(guide.prompts_factor, 3)
    assert entry["df"] == 40.123
    assert entry["samples_factor"] == round(guide.factor, 3)
    assert round(guide.factor, 3) != round(guide.factor, 4)


def test_a_difference_without_a_margin_says_none() -> None:
    diff = Interval(0.01, -0.02, 0.04, 0.95, "paired (Agresti-Min)", 100, 100,
                    scale="difference", se=0.015)
    check = _check(kind="accuracy", metric="accuracy", verdict="pass", interval=diff, floor=None,
                   name="n")
    assert check.describe() == ("[PASS        ] n: diff +0.0100 [-0.0200, +0.0400] (95.00% "
                                "paired (Agresti-Min))")


@pytest.mark.parametrize(("metric", "interval", "floor", "expected"), [
    ("mean_ttft_ms", RATIO, 0.1, (1.1,)),                     # lower is better: worse above
    ("output_throughput", RATIO, 0.1, (0.9,)),                # higher is better: worse below
    ("accuracy", Interval(0, -1, 1, 0.95, "m", 1, 1, scale="difference"), 0.02, (-0.02,)),
    ("no_such_metric", RATIO, 0.1, (1.1,)),                   # unknown: treated as a latency
    ("mean_ttft_ms", None, 0.1, None),
    ("mean_ttft_ms", RATIO, None, None),
])
def test_decision_boundaries_from_the_floor(metric: str, interval: Interval | None,
                                            floor: float | None, expected: object) -> None:
    got = _check(metric=metric, interval=interval, floor=floor).decision_boundaries()
    assert got == (pytest.approx(expected) if expected else None)
