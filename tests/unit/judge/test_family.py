"""servegate.judge.family: Holm's step-down levels (statsmodels decides), the decision p-value
of an interval check, and ``decide`` (the primary family at its levels, the rest reported)."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests

from servegate.judge.checks import Check
from servegate.judge.family import (
    BONFERRONI,
    HOLM,
    decide,
    decision_p_value,
    holm_levels,
    holm_levels_array,
)
from servegate.judge.pending import Pending
from servegate.judge.stats import Interval, interval_from_log, tost_confidence

ALPHA = 0.05


# ------------------------------------------------------------------------------- holm_levels


@pytest.mark.parametrize(("p_values", "expected"), [
    # sorted: 0.001 (alpha/4, rejected), 0.01 (alpha/3, rejected), 0.03 > alpha/2 stops:
    # it and every later check (0.04) get alpha/2
    ([0.01, 0.04, 0.03, 0.001], [ALPHA / 3, ALPHA / 2, ALPHA / 2, ALPHA / 4]),
    ([0.001, 0.002], [ALPHA / 2, ALPHA]),                       # all rejected
    ([0.5, 0.9, 0.2], [ALPHA / 3] * 3),                          # the first already stops
    ([0.3], [ALPHA]),
    ([0.012, 0.02, 0.6], [ALPHA / 3, ALPHA / 2, ALPHA]),         # the last step stops itself
    ([], []),
])
def test_holm_levels_by_hand(p_values: list[float], expected: list[float]) -> None:
    levels = holm_levels(p_values, ALPHA)
    assert levels == pytest.approx(expected, rel=1e-12)
    if p_values:
        reject = multipletests(p_values, alpha=ALPHA, method="holm")[0]
        # a check is decided at its level exactly when statsmodels rejects it
        assert [p <= lv for p, lv in zip(p_values, levels, strict=True)] == list(reject)


def test_holm_levels_agree_with_statsmodels_on_random_families(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # statsmodels' holm branch runs gc.collect() on every call (0.1-0.3 s in a test process)
    monkeypatch.setattr(gc, "collect", lambda *_args: 0)
    rng = np.random.default_rng(3)
    for _ in range(200):
        m = int(rng.integers(1, 8))
        p = (rng.uniform(0, 0.08, m) ** rng.uniform(0.5, 2.0)).tolist()
        levels = holm_levels(p, ALPHA)
        reject = multipletests(p, alpha=ALPHA, method="holm")[0]
        assert [pi <= lv for pi, lv in zip(p, levels, strict=True)] == list(reject)
        order = sorted(range(m), key=lambda i: p[i])
        n_rejected = int(reject.sum())
        for rank, i in enumerate(order):
            step = ALPHA / (m - min(rank, n_rejected))
            assert levels[i] == pytest.approx(step, rel=1e-12)


# ------------------------------------------------------------------------ decision_p_value


def _ratio_check(theta: float, se: float, df: float, confidence: float, *, floor: float = 0.05,
                 metric: str = "mean_ttft_ms", boundaries: tuple[float, ...] | None = None,
                 name: str = "check") -> Check:
    check = Check("baseline", name, metric, "inconclusive", floor=floor, boundaries=boundaries)
    check.interval = interval_from_log(theta, se, df, confidence, "test", 4, 4)
    return check


def test_two_sided_p_value_touches_the_floor() -> None:
    """mean TTFT x1.20 (lower is better, floor 5 %): the interval at 1 - p has its low bound
    exactly on 1.05."""
    check = _ratio_check(math.log(1.2), 0.05, 8.0, 0.95)
    p = decision_p_value(check, one_sided=False)
    assert 0 < p < 0.05
    at_p = interval_from_log(math.log(1.2), 0.05, 8.0, 1.0 - p, "test", 4, 4)
    assert at_p.low == pytest.approx(1.05, rel=1e-9)
    # by hand: 2 (1 - F_t(distance / se))
    expected = 2 * (1 - sps.t.cdf((math.log(1.2) - math.log(1.05)) / 0.05, 8.0))
    assert p == pytest.approx(expected, rel=1e-9)


def test_higher_is_better_metric_uses_the_lower_boundary() -> None:
    check = _ratio_check(math.log(0.9), 0.02, 6.0, 0.95, metric="output_throughput")
    p = decision_p_value(check, one_sided=False)
    assert interval_from_log(math.log(0.9), 0.02, 6.0, 1 - p, "t", 1, 1).high == \
        pytest.approx(0.95, rel=1e-9)


def test_one_sided_p_value_touches_the_claim_target() -> None:
    """A claim (one-sided, interval built at 1 - 2 alpha): TTFT x0.90 against the target 0.96;
    its interval at 1 - 2p has its high bound on 0.96."""
    check = _ratio_check(math.log(0.9), 0.02, 6.0, tost_confidence(0.95), boundaries=(0.96,))
    p = decision_p_value(check, one_sided=True)
    assert p == pytest.approx(decision_p_value(check, one_sided=False) / 2)
    at_p = interval_from_log(math.log(0.9), 0.02, 6.0, 1.0 - 2.0 * p, "t", 1, 1)
    assert at_p.high == pytest.approx(0.96, rel=1e-9)


def test_equivalence_p_value_uses_the_nearest_margin() -> None:
    """TOST at ±5 % with the estimate at 1.01: the nearer boundary is 1.05."""
    check = _ratio_check(math.log(1.01), 0.01, 12.0, 0.9, boundaries=(0.95, 1.05))
    p = decision_p_value(check, one_sided=True)
    at_p = interval_from_log(math.log(1.01), 0.01, 12.0, 1.0 - 2.0 * p, "t", 1, 1)
    assert at_p.high == pytest.approx(1.05, rel=1e-9)
    assert at_p.low > 0.95


def test_carried_p_value_and_undecidable_checks() -> None:
    fisher = Check("claim", "prefill", "aligned_fraction", "pass")
    fisher.p_value = 0.37
    assert decision_p_value(fisher, one_sided=False) == 0.37
    assert decision_p_value(Check("claim", "none", "mean_ttft_ms", "inconclusive"), True) == 1.0


# -------------------------------------------------------------------------------- decide


class Recorder:
    """A pending check whose interval is theta ± t se at the confidence it is asked for (or,
    one-sided, at 1 - 2 alpha), recording every confidence it was called with."""

    def __init__(self, name: str, distance_in_se: float, *, counts: bool = True,
                 primary: bool = True, one_sided: bool = False, kind: str = "baseline") -> None:
        self.name, self.kind, self.one_sided = name, kind, one_sided
        self.theta = math.log(1.05) + distance_in_se * 0.02
        self.calls: list[float] = []
        self.pending = Pending(name, counts, self.evaluate, primary=primary, one_sided=one_sided)

    def evaluate(self, confidence: float) -> Check:
        self.calls.append(confidence)
        level = tost_confidence(confidence) if self.one_sided else confidence
        return _ratio_check(self.theta, 0.02, math.inf, level, name=self.name)

    def p(self) -> float:
        """This check's decision p-value, by hand (normal: df is infinite)."""
        distance = abs(self.theta - math.log(1.05)) / 0.02
        two_sided = 2 * (1 - sps.norm.cdf(distance))
        return two_sided / 2 if self.one_sided else two_sided


def test_holm_family_levels_and_reported_checks() -> None:
    strong = Recorder("strong", 5.0)                  # p ~ 6e-7: rejected at alpha/2
    weak = Recorder("weak", 2.0)                      # p ~ 0.0455: rejected at alpha
    reported = Recorder("per-point", 4.0, primary=False)
    integrity = Recorder("integrity", 0.5, counts=False, primary=False, kind="integrity")
    recorders = [reported, strong, integrity, weak]
    checks, family = decide([r.pending for r in recorders], 0.95, HOLM)
    assert [c.name for c in checks] == ["per-point", "strong", "integrity", "weak"]
    # the level each gated check was evaluated at: Holm's step for its rank
    assert family == {"method": "holm", "size": 2, "checks": ["strong", "weak"],
                      "levels": {"strong": pytest.approx(1 - ALPHA / 2),
                                 "weak": pytest.approx(1 - ALPHA)}}
    assert strong.p() < ALPHA / 2 < weak.p() < ALPHA
    # the primaries: once at the plain level for their p-value, then at their Holm level
    assert strong.calls == pytest.approx([0.95, 1 - ALPHA / 2])
    assert weak.calls == pytest.approx([0.95, 1 - ALPHA])
    by_name = {c.name: c for c in checks}
    assert by_name["strong"].interval.confidence == pytest.approx(1 - ALPHA / 2)
    assert by_name["strong"].p_value == pytest.approx(strong.p(), rel=1e-6)
    assert by_name["weak"].p_value == pytest.approx(weak.p(), rel=1e-9)
    assert by_name["strong"].primary and by_name["strong"].gate
    # reported: the plain confidence, never gating, not primary
    assert reported.calls == [0.95]
    assert (by_name["per-point"].gate, by_name["per-point"].primary) == (False, False)
    # not counted (integrity): evaluated at the plain level, keeps gating, not primary
    assert integrity.calls == [0.95]
    assert (by_name["integrity"].gate, by_name["integrity"].primary) == (True, False)


def test_holm_one_sided_checks_build_their_interval_at_one_minus_two_levels() -> None:
    claim = Recorder("claim", 6.0, one_sided=True)
    other = Recorder("other", 0.3)                    # p ~ 0.76: not rejected
    checks, family = decide([claim.pending, other.pending], 0.95, HOLM)
    assert family["size"] == 2
    assert claim.calls[-1] == pytest.approx(1 - ALPHA / 2)
    assert checks[0].interval.confidence == pytest.approx(1 - 2 * ALPHA / 2)
    assert other.calls[-1] == pytest.approx(1 - ALPHA)


def test_holm_stops_at_the_first_non_rejection() -> None:
    a, b, c = Recorder("a", 1.0), Recorder("b", 8.0), Recorder("c", 0.2)
    _, family = decide([a.pending, b.pending, c.pending], 0.95, HOLM)
    assert b.calls[-1] == pytest.approx(1 - ALPHA / 3)    # rank 1, rejected
    assert a.calls[-1] == pytest.approx(1 - ALPHA / 2)    # rank 2, p ~ 0.32: stops here
    assert c.calls[-1] == pytest.approx(1 - ALPHA / 2)    # later: that step's level
    # the record names each check's level, rounded as verdict.json carries it
    assert family["levels"] == {"a": round(1 - ALPHA / 2, 8), "b": round(1 - ALPHA / 3, 8),
                                "c": round(1 - ALPHA / 2, 8)}


def test_bonferroni_evaluates_every_primary_once_at_alpha_over_m() -> None:
    recorders = [Recorder("a", 5.0), Recorder("b", 0.1), Recorder("c", 2.0, one_sided=True),
                 Recorder("reported", 1.0, primary=False)]
    checks, family = decide([r.pending for r in recorders], 0.95, BONFERRONI)
    assert family == {"method": "bonferroni", "size": 3, "checks": ["a", "b", "c"],
                      "levels": dict.fromkeys("abc", pytest.approx(1 - ALPHA / 3))}
    for r in recorders[:3]:
        assert r.calls == pytest.approx([1 - ALPHA / 3])
    assert recorders[3].calls == [0.95]
    assert [c.gate for c in checks] == [True, True, True, False]
    assert [c.primary for c in checks] == [True, True, True, False]


def test_empty_family() -> None:
    lone = Recorder("reported", 1.0, primary=False)
    checks, family = decide([lone.pending], 0.95, HOLM)
    assert family == {"method": "holm", "size": 0, "checks": [], "levels": {}}
    assert lone.calls == [0.95] and checks[0].gate is False


# ------------------------------------------------ Holm for many families at once (calibration)

def _rowwise(p: np.ndarray, alpha: float) -> np.ndarray:
    return np.array([holm_levels(list(map(float, row)), alpha)
                     for row in p.reshape(-1, p.shape[-1])]).reshape(p.shape)


def test_holm_levels_array_equals_holm_levels_family_by_family() -> None:
    # statsmodels' holm runs gc.collect() on every call (~50 ms in a test process, 600 families
    # took 22 s): 40 families, the second 20 scaled down, cover every rejection count 0-5
    rng = np.random.default_rng(11)
    p = rng.uniform(0.0, 0.08, (2, 20, 5))   # families over the last axis, any leading shape
    p[1] *= 0.25
    assert np.array_equal(holm_levels_array(p, 0.05), _rowwise(p, 0.05))
    rejected = (holm_levels_array(p, 0.05) >= p).sum(axis=-1)
    assert set(rejected.ravel().tolist()) == set(range(6))


def test_holm_levels_array_at_the_boundaries() -> None:
    m, alpha = 4, 0.05
    steps = [alpha / (m - i) for i in range(m)]
    cases = np.array([
        [steps[0], 0.9, 0.9, 0.9],              # p exactly at its step: rejected (<=)
        [0.001, 0.002, 0.003, 0.9],             # all but the last rejected: it stops at alpha
        [0, 1, 1, 1],                           # integers are p-values too
    ])
    got = holm_levels_array(cases, alpha)
    assert np.array_equal(got, _rowwise(cases, alpha))
    assert got[0].tolist() == [steps[0], steps[1], steps[1], steps[1]]
    assert got[1].tolist() == [steps[0], steps[1], steps[2], steps[3]]
    ints = holm_levels_array([[0, 1, 1, 1]], alpha)
    assert ints.dtype == float and ints[0].tolist() == [steps[0], steps[1], steps[1], steps[1]]


def test_holm_levels_array_orders_tied_p_values_as_holm_levels_does() -> None:
    p = np.full((1, 40), 0.001)                  # introsort (numpy's default) is not stable
    p[0, ::3] = 0.0005
    assert np.array_equal(holm_levels_array(p, 0.05), _rowwise(p, 0.05))


@pytest.mark.parametrize(("change", "why"), [
    (dict(floor=None), "no decision boundary"),
    (dict(interval=Interval(1.2, 1.1, 1.3, 0.95, "requests", 9, 9, se=0.0, df=8.0)),
     "a zero standard error"),
    (dict(interval=Interval(1.2, 1.1, 1.3, 0.95, "requests", 9, 9, se=math.nan, df=8.0)),
     "no standard error"),
])
def test_a_check_that_cannot_be_decided_has_p_value_one(change: dict, why: str) -> None:
    base = dict(kind="baseline", name="c", metric="mean_ttft_ms", verdict="inconclusive",
                interval=Interval(1.2, 1.1, 1.3, 0.95, "requests", 9, 9, se=0.04, df=8.0),
                floor=0.05)
    assert decision_p_value(Check(**base), False) < 1.0               # decidable as given
    assert decision_p_value(Check(**{**base, **change}), False) == 1.0, why


def test_holm_levels_at_another_family_alpha() -> None:
    p = [0.03, 0.06, 0.5]
    assert holm_levels(p, 0.1) == pytest.approx([0.1 / 3, 0.05, 0.05])  # first rejected only
    assert holm_levels(p, 0.05) == pytest.approx([0.05 / 3] * 3)      # none rejected
