"""The block checks of in-server runs (servegate.judge.block_checks), through
``servegate.judge.evaluate.judge`` on run folders written here (run.json with
``design.in_server``): the primary family under Holm, the no-op and gfx95 claims, baselines and
head vs base, and what verdict.json says about the family."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from judge_runs import make_run
from scipy import stats as sps
from unit.judge.block_runs import edit_points, judge_table, slower, write_block_run

from servegate.config.judge import JudgeConfig, parse_judge_table
from servegate.core.results import load_run
from servegate.judge.baselines import baseline_from_run
from servegate.judge.block_checks import block_pendings
from servegate.judge.checks import Check
from servegate.judge.evaluate import judge
from servegate.judge.evidence import evidence_from_run
from servegate.judge.family import holm_levels
from servegate.judge.judgement import Judgement
from servegate.judge.stats import per_check_confidence
from servegate.report import verdict_json

ALPHA = 0.05


PREFILL = "no-op: on prefill batches not aligned beyond off (exact fill inactive)"


def noop(metric: str) -> str:
    return f"no-op: on {metric} at all concurrencies (geometric mean) equivalent to off within ±5.0%"


def aggregate(mode: str, metric: str, label: str = "baseline") -> str:
    return f"{mode} {metric} at all concurrencies (geometric mean) vs {label}"


def run_judge(run_dir: Path, **kwargs: Any) -> Judgement:
    """Judge without the repository's baselines (an empty root unless a document is given)."""
    kwargs.setdefault("baselines_root", run_dir.parent / "no-baselines")
    return judge(run_dir, **kwargs)


def by_name(judgement: Judgement) -> dict[str, Check]:
    checks = {c.name: c for c in judgement.checks}
    assert len(checks) == len(judgement.checks), "check names must be unique"
    return checks


def primary_levels(judgement: Judgement) -> dict[str, float]:
    """Holm's level per primary check, from the p-values the checks carry."""
    names = judgement.family["checks"]
    checks = by_name(judgement)
    levels = holm_levels([checks[n].p_value for n in names], ALPHA)
    return dict(zip(names, levels, strict=True))


def baseline_doc(tmp_path: Path, **kwargs: Any) -> dict[str, Any]:
    """A stored baseline from another in-server run (another sitting: its own seed)."""
    kwargs.setdefault("seed", 99)
    source = write_block_run(tmp_path / "baseline-run", started_at="2026-11-30T12:00:00+00:00",
                             **kwargs)
    return baseline_from_run(load_run(source), source)


# ------------------------------------------------------------------------- no-op (not gfx95)


def test_aa_run_passes_the_noop_claims_which_gate(tmp_path: Path) -> None:
    judgement = run_judge(write_block_run(tmp_path / "run"))
    assert judgement.exit_code == 0 and judgement.overall == "pass"
    family = judgement.family
    assert family["method"] == "holm" and family["size"] == 3
    assert family["checks"] == [PREFILL, noop("mean_ttft_ms"), noop("median_tpot_ms")]
    checks = by_name(judgement)
    levels = primary_levels(judgement)
    for name in family["checks"]:
        check = checks[name]
        assert (check.verdict, check.gate, check.primary) == ("pass", True, True), check.describe()
        assert check.p_value is not None
    for metric in ("mean_ttft_ms", "median_tpot_ms"):
        check = checks[noop(metric)]
        # one-sided (TOST): its interval at 1 - 2 * its Holm level
        assert check.interval.confidence == pytest.approx(1 - 2 * levels[check.name])
        assert "TOST power" in check.reason and "interaction level" in check.reason
    per_point = [c for c in judgement.checks if c.name not in family["checks"]]
    assert len(per_point) == 4                                 # 2 concurrencies x 2 metrics
    for check in per_point:
        assert check.name.startswith("no-op: on ") and "@" not in check.name
        assert (check.gate, check.primary) == (False, False)
        assert check.interval.confidence == pytest.approx(1 - 2 * ALPHA)   # plain, one-sided
    assert any("Holm step-down" in note for note in judgement.notes)


def test_on_30_percent_slower_fails_the_noop_tost(tmp_path: Path) -> None:
    judgement = run_judge(write_block_run(tmp_path / "run", effect=slower("on", 1.3)))
    assert judgement.exit_code == 1 and judgement.overall == "regression"
    checks = by_name(judgement)
    for metric in ("mean_ttft_ms", "median_tpot_ms"):
        check = checks[noop(metric)]
        assert (check.verdict, check.gate, check.primary) == ("regression", True, True)
        assert check.interval.low > 1.05
        assert check.interval.estimate == pytest.approx(1.3, rel=0.02)
    assert checks[PREFILL].verdict == "pass"


def test_on_block_read_back_effective_fails_the_prefill_noop(tmp_path: Path) -> None:
    judgement = run_judge(write_block_run(tmp_path / "run", effective={("on", 4, 1, 2)}))
    assert judgement.exit_code == 1
    check = by_name(judgement)[PREFILL]
    assert (check.verdict, check.gate, check.primary, check.p_value) == \
        ("regression", True, True, 0.0)
    assert "exact fill read back effective in on blocks [(4, 1, 2)]" in check.reason


def test_without_a_family_every_primary_is_bonferroni_corrected(tmp_path: Path) -> None:
    judgement = run_judge(write_block_run(tmp_path / "run", table=judge_table(family=None)))
    assert judgement.family["method"] == "bonferroni"
    assert judgement.family["checks"] == [PREFILL, noop("mean_ttft_ms"), noop("median_tpot_ms")]
    checks = by_name(judgement)
    for metric in ("mean_ttft_ms", "median_tpot_ms"):
        assert checks[noop(metric)].interval.confidence == pytest.approx(1 - 2 * ALPHA / 3)
    assert any("Bonferroni" in note for note in judgement.notes)


# ------------------------------------------------------------------------- gfx95 claim


def test_gated_claim_passes_when_on_is_ten_percent_faster(tmp_path: Path) -> None:
    judgement = run_judge(write_block_run(tmp_path / "run", runner_class="mi355x",
                                          effect=slower("on", 0.9)))
    assert judgement.exit_code == 0
    claim_name = "claim: on vs off mean_ttft_ms at c4 improves >= 4.0%"
    accuracy_name = "claim: on vs off GSM8K non-inferior within 2.0 pp"
    # Holm: the claim is rejected at alpha/2, GSM8K (no answers: p = 1) stops at alpha
    assert judgement.family == {"method": "holm", "size": 2,
                                "checks": [claim_name, accuracy_name],
                                "levels": {claim_name: 1 - ALPHA / 2, accuracy_name: 1 - ALPHA}}
    # verdict.json's per_check_confidence: the strictest level Holm used, not Bonferroni's
    assert judgement.per_check_confidence == pytest.approx(1 - ALPHA / 2)
    checks = by_name(judgement)
    claim = checks[claim_name]
    assert (claim.verdict, claim.gate, claim.primary) == ("pass", True, True)
    assert claim.interval.estimate == pytest.approx(0.9, rel=0.02)
    # the claim decides first (its p << alpha/2; GSM8K has no results: p = 1), so its level is
    # alpha/2 and its one-sided interval is built at 1 - 2 * alpha/2
    assert claim.p_value < ALPHA / 2
    assert claim.interval.confidence == pytest.approx(1 - 2 * ALPHA / 2)
    assert checks[accuracy_name].verdict == "inconclusive"
    effect = checks["effect: on vs off mean_ttft_ms at c2 (claim size 4.0%, reported)"]
    assert (effect.gate, effect.primary) == (False, False)


def test_gated_claim_never_passes_when_on_equals_off(tmp_path: Path) -> None:
    judgement = run_judge(write_block_run(tmp_path / "run", runner_class="mi355x"))
    claim = by_name(judgement)["claim: on vs off mean_ttft_ms at c4 improves >= 4.0%"]
    assert claim.verdict in ("inconclusive", "regression")
    assert judgement.overall != "pass"


def test_gated_claim_at_a_concurrency_the_run_lacks_is_an_error(tmp_path: Path) -> None:
    table = judge_table(claims={"noop_margin": 0.05, "gated_claim_concurrency": 64})
    judgement = run_judge(write_block_run(tmp_path / "run", runner_class="mi355x",
                                          effect=slower("on", 0.9), table=table))
    claims = [c for c in judgement.checks if c.name.startswith("claim: on vs off mean_ttft_ms")]
    assert len(claims) == 1 and claims[0].concurrency == 64
    assert claims[0].verdict == "error" and claims[0].gate and claims[0].primary
    assert (claims[0].kind, claims[0].name, claims[0].metric, claims[0].mode,
            claims[0].reference, claims[0].reason) == (
        "claim", "claim: on vs off mean_ttft_ms at c64", "mean_ttft_ms", "on", "off",
        "run has no on and off blocks at concurrency 64 (measured: [2, 4])")
    assert claims[0].name in judgement.family["checks"]
    assert judgement.exit_code == 2
    # outside the suite's family it is reported, never gating
    table = judge_table(family=["baseline-aggregate"],
                        claims={"noop_margin": 0.05, "gated_claim_concurrency": 64})
    judgement = run_judge(write_block_run(tmp_path / "other", runner_class="mi355x",
                                          effect=slower("on", 0.9), table=table))
    (claim,) = [c for c in judgement.checks if c.name == "claim: on vs off mean_ttft_ms at c64"]
    assert claim.verdict == "error" and not claim.primary


# ------------------------------------------------------------------------- reference runs


def test_non_primary_checks_never_change_the_exit_code(tmp_path: Path) -> None:
    """c2 is 30 % slower than the baseline and c4 30 % faster: the per-point c2 check is a
    regression but only reported; the gated aggregate (geometric mean ~ 1) is not."""
    doc = baseline_doc(tmp_path)

    def effect(_mode: str, conc: int, _start: int, _block: int) -> float:
        return 1.3 if conc == 2 else 1 / 1.3

    table = judge_table(family=["claims", "baseline-aggregate"])
    judgement = run_judge(write_block_run(tmp_path / "run", effect=effect, table=table),
                          baseline_doc=doc)
    checks = by_name(judgement)
    c2 = checks["off@c2 mean_ttft_ms vs baseline"]
    assert (c2.verdict, c2.gate, c2.primary) == ("regression", False, False)
    for mode in ("off", "on"):
        agg = checks[aggregate(mode, "mean_ttft_ms")]
        assert agg.primary and agg.gate and agg.verdict != "regression"
    assert judgement.exit_code == 0 and judgement.overall != "regression"
    assert judgement.family["size"] == 3 + 4


def _block_logs(run: dict[str, Any], mode: str, metric: str) -> dict[tuple[int, int], float]:
    """Per (start, block), the mean over concurrencies of log(value), from run.json."""
    logs: dict[tuple[int, int], list[float]] = {}
    for p in run["points"]:
        if p["mode"] == mode:
            logs.setdefault((p["start"], p["block"]), []).append(math.log(p["metrics"][metric]))
    return {slot: statistics.mean(v) for slot, v in logs.items()}


def test_baseline_aggregates_use_the_start_prior_with_one_start(tmp_path: Path) -> None:
    """One start per side, 4 blocks (no trimming): each side's start component is the suite's
    run_to_run_cv^2, so se^2 = 2 cv^2 + var(run blocks)/4 + var(baseline blocks)/4."""
    cv = 0.03
    table = judge_table(family=["baseline-aggregate"], run_to_run_cv=cv)
    doc = baseline_doc(tmp_path, starts=1, blocks=4, table=table)
    run_dir = write_block_run(tmp_path / "run", starts=1, blocks=4, table=table)
    judgement = run_judge(run_dir, baseline_doc=doc)
    names = [aggregate(m, k) for m in ("off", "on") for k in ("mean_ttft_ms", "median_tpot_ms")]
    assert judgement.family == {"method": "holm", "size": 4, "checks": names,
                                "levels": dict.fromkeys(names, 1 - ALPHA / 4)}
    checks = by_name(judgement)
    run = load_run(run_dir)
    base_run = load_run(tmp_path / "baseline-run")
    for name in names:
        check = checks[name]
        assert check.primary and check.gate and check.kind == "baseline"
        assert "start level from the prior" in check.reason
        cur = list(_block_logs(run, check.mode, check.metric).values())
        ref = list(_block_logs(base_run, check.mode, check.metric).values())
        se2 = 2 * cv * cv + statistics.variance(cur) / 4 + statistics.variance(ref) / 4
        assert check.interval.se ** 2 == pytest.approx(se2, rel=1e-5)
        ratio = math.exp(statistics.mean(cur) - statistics.mean(ref))
        assert check.interval.estimate == pytest.approx(ratio, rel=1e-5)
    # the prefill and no-op claims are outside this family: reported, never gating
    assert (checks[PREFILL].gate, checks[PREFILL].primary) == (False, False)
    assert judgement.exit_code == 0


def test_baseline_aggregates_measure_the_start_variance_with_three_starts(tmp_path: Path) -> None:
    table = judge_table(family=["baseline-aggregate"])
    doc = baseline_doc(tmp_path, starts=3, blocks=3, table=table)
    judgement = run_judge(write_block_run(tmp_path / "run", starts=3, blocks=3, table=table),
                          baseline_doc=doc)
    for name in judgement.family["checks"]:
        check = by_name(judgement)[name]
        assert "start level measured+prior over 3 starts" in check.reason
        assert "from the prior" not in check.reason
        assert check.interval.n_starts == 3


def test_a_halves_run_judges_its_baseline_aggregates_with_a_level_per_half(
        tmp_path: Path) -> None:
    """Four starts on two halves, the second half 20 % slower in both sittings: recorded as
    halves, each start's level is centred on its half's, so the pass rests on the starts'
    own spread; the same blocks without the record read the halves' offset as start noise,
    refute the 1 % start prior and cannot rule out the floor."""
    table = judge_table(family=["baseline-aggregate"], run_to_run_cv=0.01)

    def slow_half(_label: str, _conc: int, start: int, _block: int) -> float:
        return 1.2 if start % 2 else 1.0

    def judged(halves: bool, name: str) -> dict[str, Check]:
        kwargs: dict[str, Any] = dict(starts=4, blocks=3, table=table, start_sd=0.005,
                                      effect=slow_half, halves=halves)
        doc = baseline_doc(tmp_path / name, **kwargs)
        assert ("start_halves" in doc["design"]) is halves
        return by_name(run_judge(write_block_run(tmp_path / name / "run", **kwargs),
                                 baseline_doc=doc))

    centred, plain = judged(True, "halves"), judged(False, "plain")
    name = aggregate("off", "mean_ttft_ms")
    assert centred[name].verdict == "pass" and plain[name].verdict == "inconclusive"
    assert "over 4 starts centred on 2 halves" in centred[name].reason
    assert "4x3 in 2 halves vs 4x3 in 2 halves" in centred[name].interval.method
    assert "halves" not in plain[name].reason and "widened" in plain[name].reason


def test_baseline_slower_than_the_run_by_a_third_is_a_gated_regression(tmp_path: Path) -> None:
    table = judge_table(family=["claims", "baseline-aggregate"], run_to_run_cv=0.02)
    doc = baseline_doc(tmp_path, table=table)
    judgement = run_judge(write_block_run(tmp_path / "run", table=table,
                                          effect=lambda *_: 1.35), baseline_doc=doc)
    checks = by_name(judgement)
    agg = checks[aggregate("on", "median_tpot_ms")]
    assert (agg.verdict, agg.gate, agg.primary) == ("regression", True, True)
    assert agg.current_value / agg.reference_value == pytest.approx(1.35, rel=0.05)
    assert judgement.exit_code == 1


def test_head_vs_base_aggregates_gate_under_ab_aggregate(tmp_path: Path) -> None:
    table = judge_table(family=["ab-aggregate"], run_to_run_cv=0.02)

    def effect(label: str, _conc: int, _start: int, _block: int) -> float:
        return 1.3 if label.startswith("head-") else 1.0

    judgement = run_judge(write_block_run(tmp_path / "run", arms=("base", "head"), table=table,
                                          effect=effect))
    names = [aggregate(m, k, "base") for m in ("off", "on")
             for k in ("mean_ttft_ms", "median_tpot_ms")]
    assert judgement.family["checks"] == names
    checks = by_name(judgement)
    for name in names:
        assert checks[name].kind == "ab" and checks[name].verdict == "regression"
        assert checks[name].reference == "base"
    # head's own no-op claims are reported (not in this family) and pass: on == off in head
    assert checks[PREFILL].verdict == "pass" and not checks[PREFILL].gate
    assert judgement.exit_code == 1


def test_single_concurrency_run_has_each_comparison_once(tmp_path: Path) -> None:
    table = judge_table(family=["claims", "baseline-aggregate"])
    doc = baseline_doc(tmp_path, concurrencies=(4,), table=table)
    judgement = run_judge(write_block_run(tmp_path / "run", concurrencies=(4,), table=table),
                          baseline_doc=doc)
    names = [c.name for c in judgement.checks]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_rolling_baseline_spread_replaces_the_prior_for_the_run_side(tmp_path: Path) -> None:
    table = judge_table(family=["baseline-aggregate"], run_to_run_cv=0.3)
    doc = baseline_doc(tmp_path, starts=5, blocks=2, table=table)     # five nights
    judgement = run_judge(write_block_run(tmp_path / "run", starts=1, blocks=2, table=table),
                          baseline_doc=doc, measured_run_spread=True)
    assert any("replaces the suite's assumed run_to_run_cv" in n for n in judgement.notes)
    for name in judgement.family["checks"]:
        check = by_name(judgement)[name]
        assert "from the prior" not in check.reason, check.reason


# ------------------------------------------------------------------------- verdict.json


def test_verdict_json_records_the_family_and_primary_flags(tmp_path: Path) -> None:
    table = judge_table(family=["claims", "baseline-aggregate"])
    doc = baseline_doc(tmp_path, table=table)
    judgement = run_judge(write_block_run(tmp_path / "run", table=table), baseline_doc=doc)
    out = verdict_json.build(judgement)
    verdict_json.validate(out)
    names = [PREFILL, noop("mean_ttft_ms"), noop("median_tpot_ms")] + [
        aggregate(m, k) for m in ("off", "on") for k in ("mean_ttft_ms", "median_tpot_ms")]
    assert out["family"]["method"] == "holm"
    assert out["family"]["size"] == len(names) == out["family_size"]
    assert sorted(out["family"]["checks"]) == sorted(names)
    assert all("primary" in c for c in out["checks"])
    assert {c["name"] for c in out["checks"] if c["primary"]} == set(names)
    assert all(not c["gate"] for c in out["checks"] if not c["primary"])
    assert len(out["checks"]) > len(names)                        # the per-point ones too


# ------------------------------------------- head vs base from a live pair, per block pair

TTFT = "off mean_ttft_ms at all concurrencies (geometric mean) vs base"


def _pair_run(tmp_path: Path, *, live: bool, head_factor: float, drift_sd: float = 0.25,
              seed: int = 3, **judge: float) -> Path:
    table = judge_table(family=["ab-aggregate"], run_to_run_cv=0.02, run_to_run_cv_dof=0,
                        **judge)
    run_dir = write_block_run(
        tmp_path / ("live" if live else "serial"), arms=("base", "head"), modes=("off",),
        starts=1, blocks=8, block_sd=0.01, start_sd=0.0, table=table, seed=seed,
        effect=lambda label, *_: head_factor if label.startswith("head-") else 1.0)
    path = run_dir / "run.json"
    run = json.loads(path.read_text())
    drift = np.exp(np.random.default_rng(seed).normal(0.0, drift_sd, 8))   # per block round
    for point in run["points"]:
        point["metrics"] = {k: v * float(drift[point["block"]])
                            for k, v in point["metrics"].items()}
    run["design"]["live_pair"] = live
    path.write_text(json.dumps(run))
    return run_dir


def _ttft(run_dir: Path):
    judgement = judge(run_dir, baselines_root=run_dir.parent / "none")
    return next(c for c in judgement.checks if c.name == TTFT), judgement


def test_block_pairs_cancel_shared_drift_that_would_drown_independent_sides(
        tmp_path: Path) -> None:
    live, judgement = _ttft(_pair_run(tmp_path, live=True, head_factor=1.3))
    assert live.verdict == "regression" and live.primary and judgement.exit_code == 1
    assert live.current_value / live.reference_value == pytest.approx(1.3, rel=0.02)
    serial, _ = _ttft(_pair_run(tmp_path, live=False, head_factor=1.3))
    assert serial.verdict == "inconclusive"           # the same numbers, sides independent
    assert live.interval is not None and serial.interval is not None
    assert live.interval.high / live.interval.low < serial.interval.high / serial.interval.low


def test_the_two_servers_start_difference_comes_from_the_prior_and_says_so(
        tmp_path: Path) -> None:
    check, judgement = _ttft(_pair_run(tmp_path, live=True, head_factor=1.0))
    assert check.verdict != "regression" and judgement.exit_code == 0
    prior_sd = math.sqrt(2) * 0.02
    assert f"start level from the prior (log-sd {prior_sd:.3f}; 1 start)" in check.reason
    assert "blocks paired between the two live servers" in " ".join(judgement.notes)


def test_a_live_pair_takes_the_suites_live_pair_cv_and_other_designs_its_run_to_run_cv(
        tmp_path: Path) -> None:
    live, _ = _ttft(_pair_run(tmp_path, live=True, head_factor=1.0, live_pair_cv=0.06))
    assert f"start level from the prior (log-sd {math.sqrt(2) * 0.06:.3f}; 1 start)" in live.reason
    serial, _ = _ttft(_pair_run(tmp_path, live=False, head_factor=1.0, live_pair_cv=0.06))
    assert f"log-sd {math.sqrt(2) * 0.06:.3f}" not in serial.reason          # run_to_run_cv's


# ------------------------------------------------- every check's fields, as the report reads them

def _fields(check: Check) -> tuple[Any, ...]:
    return (check.kind, check.metric, check.mode, check.concurrency, check.reference,
            check.gate, check.primary)


def test_noop_checks_name_what_they_compare(tmp_path: Path) -> None:
    checks = by_name(run_judge(write_block_run(tmp_path / "run")))
    assert _fields(checks[PREFILL]) == ("claim", "aligned_fraction", "on", None, "off", True,
                                        True)
    assert checks[PREFILL].verdict == "pass"
    for metric in ("mean_ttft_ms", "median_tpot_ms"):
        assert _fields(checks[noop(metric)]) == ("claim", metric, "on", None, "off", True, True)
        for conc in (2, 4):
            check = checks[f"no-op: on {metric} at c{conc} equivalent to off within ±5.0%"]
            assert _fields(check) == ("claim", metric, "on", conc, "off", False, False)
            assert check.floor == 0.05 and check.verdict == "pass"


def test_forced_blocks_are_reported_as_experiments_against_off(tmp_path: Path) -> None:
    run_dir = write_block_run(tmp_path / "run", modes=("off", "on", "forced"),
                              effect=slower("forced", 2.0))
    checks = by_name(run_judge(run_dir))
    for conc in (2, 4):
        for metric in ("mean_ttft_ms", "median_tpot_ms"):
            check = checks[f"experiment: forced@c{conc} {metric} vs off"]
            assert _fields(check) == ("experiment", metric, "forced", conc, "off", False, False)
            assert check.floor == 0.05 and check.verdict == "regression"
            assert check.interval.estimate == pytest.approx(2.0, rel=0.03)
            assert "interaction level" in check.reason


def test_on_gfx95_the_claim_concurrency_gates_and_the_others_are_reported_effects(
        tmp_path: Path) -> None:
    table = judge_table(claims={"noop_margin": 0.05, "gated_min_ttft_improvement": 0.05})
    judgement = run_judge(write_block_run(tmp_path / "run", runner_class="mi355x",
                                          effect=slower("on", 0.85), table=table))
    checks = by_name(judgement)
    claim = checks["claim: on vs off mean_ttft_ms at c4 improves >= 5.0%"]
    assert _fields(claim) == ("claim", "mean_ttft_ms", "on", 4, "off", True, True)
    assert (claim.floor, claim.boundaries, claim.verdict) == (0.05, (0.95,), "pass")
    assert claim.reason.startswith("whole one-sided interval at or below 0.950; ")
    effect = checks["effect: on vs off mean_ttft_ms at c2 (claim size 5.0%, reported)"]
    assert _fields(effect) == ("experiment", "mean_ttft_ms", "on", 2, "off", False, False)
    assert effect.verdict == "pass" and claim.name in judgement.family["checks"]
    assert effect.name not in judgement.family["checks"]


# ------------------------------------------------ every check's reason, as the verdict prints it

def _power_in(check: Check) -> float:
    """The TOST power the reason states, from the check's own interval (built at TOST level)."""
    from servegate.judge.stats import tost_power

    iv = check.interval
    return float(tost_power(iv.standard_error(), iv.df, iv.confidence, check.floor))


def test_a_gating_noop_tost_states_its_test_its_power_and_its_margins(tmp_path: Path) -> None:
    check = by_name(run_judge(write_block_run(tmp_path / "run")))[noop("mean_ttft_ms")]
    assert check.gate and check.boundaries == (0.95, 1.05) and check.noise["one_sided"] is True
    test, power, *_ = check.reason.split("; ")
    assert test == "TOST equivalence, blocks paired within starts"
    assert power == f"TOST power {100 * _power_in(check):.0f}%"


def test_an_underpowered_noop_tost_is_reported_with_its_power_and_the_rule(tmp_path: Path) -> None:
    table = judge_table(claims={"noop_margin": 0.1})
    run_dir = write_block_run(tmp_path / "run", block_sd=0.2, table=table)
    check = by_name(run_judge(run_dir))[
        "no-op: on mean_ttft_ms at all concurrencies (geometric mean) equivalent to off within "
        "±10.0%"]
    power = _power_in(check)
    assert 0.05 < power < 0.9 and check.gate is False
    assert check.reason.startswith(
        "TOST equivalence, blocks paired within starts; reported, not gating: TOST power "
        f"{100 * power:.0f}% < 80% at +-10.0%; ")


def test_a_noop_tost_outside_its_margin_says_so(tmp_path: Path) -> None:
    check = by_name(run_judge(write_block_run(tmp_path / "run", effect=slower("on", 1.3))))[
        noop("mean_ttft_ms")]
    assert check.reason.startswith(
        "TOST equivalence, blocks paired within starts: demonstrably outside the margin; ")


def test_a_gated_claim_with_no_improvement_names_the_stated_size(tmp_path: Path) -> None:
    table = judge_table(claims={"noop_margin": 0.05, "gated_min_ttft_improvement": 0.1})
    judgement = run_judge(write_block_run(tmp_path / "run", runner_class="mi355x",
                                          block_sd=0.002, start_sd=0.0, table=table))
    claim = by_name(judgement)["claim: on vs off mean_ttft_ms at c4 improves >= 10.0%"]
    assert claim.verdict == "regression" and claim.noise["one_sided"] is True
    assert claim.reason.startswith("improvement demonstrably smaller than the stated 10.0%; ")


def test_the_prefill_noop_compares_on_blocks_with_off_blocks_only(tmp_path: Path) -> None:
    def align_one_of_three(point: dict[str, Any]) -> None:
        if point["mode"] != "off":          # on (and forced) align 1 of their 3 batches
            point["alignment"]["aligned_fraction"] = 1 / 3

    run_dir = edit_points(write_block_run(tmp_path / "run", modes=("off", "on", "forced")),
                          align_one_of_three)
    check = by_name(run_judge(run_dir))[PREFILL]
    assert (check.current_value, check.reference_value) == (pytest.approx(1 / 3), 0.0)


def test_an_experiment_uses_its_metrics_floor_and_a_two_sided_interval(tmp_path: Path) -> None:
    table = judge_table(floors={"mean_ttft_ms": 0.05, "median_tpot_ms": 0.08})
    run_dir = write_block_run(tmp_path / "run", modes=("off", "on", "forced"), table=table)
    checks = by_name(run_judge(run_dir))
    tpot = checks["experiment: forced@c2 median_tpot_ms vs off"]
    ttft = checks["experiment: forced@c2 mean_ttft_ms vs off"]
    assert (tpot.floor, ttft.floor) == (0.08, 0.05)
    assert tpot.noise["one_sided"] is False


# ------------------------------------------------ baseline checks: what exists, and its fields

def test_a_baseline_point_the_run_lacks_is_a_reported_integrity_error(tmp_path: Path) -> None:
    doc = baseline_doc(tmp_path, concurrencies=(2, 4, 8))
    judgement = run_judge(write_block_run(tmp_path / "run"), baseline_doc=doc)
    check = by_name(judgement)["off@c8 present in run"]
    assert (check.kind, check.metric, check.verdict, check.mode, check.concurrency) == (
        "integrity", "points", "error", "off", 8)
    assert check.reason == "point is in the baseline but missing from the run"
    assert check.primary is False and check.name not in judgement.family["checks"]


def test_a_mode_the_run_did_not_measure_is_not_judged_against_the_baseline(
        tmp_path: Path) -> None:
    """``bench --modes off`` against a baseline of off and on: on is not an error (the run
    chose its modes); off is judged as usual."""
    doc = baseline_doc(tmp_path)
    judgement = run_judge(write_block_run(tmp_path / "run", modes=("off",)), baseline_doc=doc)
    assert not [c for c in judgement.checks if c.mode == "on" and c.kind != "claim"]
    assert not [c for c in judgement.checks if c.verdict == "error"]
    assert aggregate("off", "mean_ttft_ms") in by_name(judgement)


def test_a_point_new_to_the_run_is_reported_not_gating(tmp_path: Path) -> None:
    doc = baseline_doc(tmp_path, concurrencies=(2,))
    check = by_name(run_judge(write_block_run(tmp_path / "run"), baseline_doc=doc))[
        "off@c4 vs baseline"]
    assert (check.kind, check.verdict, check.gate, check.primary, check.concurrency) == (
        "baseline", "inconclusive", False, False, 4)
    assert check.reason == "new point: not in the baseline (update baselines to gate it)"


def test_baseline_checks_exist_only_where_the_baseline_has_the_metric(tmp_path: Path) -> None:
    table = judge_table(aggregate_metrics=["mean_ttft_ms"])
    doc = baseline_doc(tmp_path, table=table)
    for point in doc["points"]:
        if point["mode"] == "off" and point["concurrency"] == 2:
            del point["metrics"]["mean_ttft_ms"]
    checks = by_name(run_judge(write_block_run(tmp_path / "run", table=table),
                               baseline_doc=doc))
    assert aggregate("off", "mean_ttft_ms") not in checks        # not at every concurrency
    assert aggregate("on", "mean_ttft_ms") in checks
    assert "off@c2 mean_ttft_ms vs baseline" not in checks
    point = checks["off@c2 median_tpot_ms vs baseline"]           # the next metric still is
    assert (point.kind, point.mode, point.concurrency, point.reference) == (
        "baseline", "off", 2, "baseline")


def test_with_one_shared_concurrency_only_the_aggregate_metrics_lose_their_point_check(
        tmp_path: Path) -> None:
    table = judge_table(aggregate_metrics=["mean_ttft_ms"])
    doc = baseline_doc(tmp_path, concurrencies=(4,), table=table)
    checks = by_name(run_judge(write_block_run(tmp_path / "run", concurrencies=(4,),
                                               table=table), baseline_doc=doc))
    # the aggregate over c4 is named as c4's check and stands once (by_name: names unique)
    assert checks["off@c4 mean_ttft_ms vs baseline"].concurrency == 4
    assert checks["off@c4 median_tpot_ms vs baseline"].concurrency == 4


def test_a_baseline_aggregate_carries_its_blocks_levels_and_noise_notes(tmp_path: Path) -> None:
    table = judge_table(family=["claims", "baseline-aggregate"])
    doc = baseline_doc(tmp_path, starts=1, blocks=4, table=table)
    checks = by_name(run_judge(write_block_run(tmp_path / "run", starts=2, blocks=3, table=table),
                               baseline_doc=doc))
    agg = checks[aggregate("off", "mean_ttft_ms")]
    iv = agg.interval
    assert (iv.n_current, iv.n_reference, iv.n_starts) == (6, 4, 2)
    assert iv.method.startswith("blocks (2x3 vs 1x4 starts x blocks")
    # run_var: the start level of both sides (pooled: one level, 2 starts here, 1 there)
    assert iv.run_var == pytest.approx(agg.noise["between_var"] * (1 / 2 + 1 / 1), rel=1e-9)
    assert agg.noise["level"] == "start" and agg.noise["one_sided"] is False
    current, current_blocks, reference, reference_blocks = agg.reason.split("; ")
    assert current.startswith("start level measured+prior over 2 starts (log-sd 0.0")
    assert reference.startswith("start level measured+prior over 1 starts (log-sd 0.0")
    assert current_blocks.startswith("block log-sd 0.00") and current_blocks.endswith("(df 2)")
    assert reference_blocks.startswith("block log-sd 0.00")
    assert checks[noop("mean_ttft_ms")].noise["level"] == "interaction"


@pytest.mark.parametrize("runner_class", ["mi300x", "mi355x"])
def test_every_pending_is_named_as_the_check_it_becomes(tmp_path: Path, runner_class: str) -> None:
    from servegate.judge.block_checks import block_pendings
    from servegate.judge.evidence import evidence_from_baseline, evidence_from_run

    doc = baseline_doc(tmp_path, concurrencies=(2, 4, 8), runner_class=runner_class)
    run_dir = write_block_run(tmp_path / "run", modes=("off", "on", "forced"),
                              runner_class=runner_class)
    run = load_run(run_dir)
    # gfx95: a stated claim concurrency the run lacks is its own (error) check
    config = parse_judge_table(judge_table(claims={"noop_margin": 0.05,
                                                   "gated_claim_concurrency": 64}), "test table")
    pendings = block_pendings(run, evidence_from_run(run), config,
                              baseline=evidence_from_baseline(doc))
    kinds = set()
    for pending in pendings:
        check = pending.evaluate(0.95)
        assert pending.name == check.name
        kinds.add(check.kind)
    assert {"integrity", "baseline", "claim", "experiment"} <= kinds


@pytest.mark.parametrize(("runner_class", "expected"), [
    ("mi300x", {PREFILL: "noop-prefill", noop("mean_ttft_ms"): "noop",
                noop("median_tpot_ms"): "noop",
                **{f"no-op: on {m} at c{c} equivalent to off within ±5.0%": "noop"
                   for m in ("mean_ttft_ms", "median_tpot_ms") for c in (2, 4)}}),
    ("mi355x", {"claim: on vs off mean_ttft_ms at c4 improves >= 4.0%": "improvement",
                "claim: on vs off GSM8K non-inferior within 2.0 pp": "accuracy"})])
def test_each_claim_says_what_it_states_and_no_other_check_does(
        tmp_path: Path, runner_class: str, expected: dict[str, str]) -> None:
    """A claim's statement is a field (verdict.json's ``claim``), never read from its name: the
    gated claims and the no-op's parts (its reported per-concurrency TOSTs too) carry theirs;
    the reported effects at other concurrencies, experiments and baseline checks carry none."""
    table = judge_table(family=["claims", "baseline-aggregate"])
    judgement = run_judge(write_block_run(tmp_path / "run", runner_class=runner_class,
                                          modes=("off", "on", "forced"), table=table),
                          baseline_doc=baseline_doc(tmp_path, runner_class=runner_class,
                                                    table=table))
    claims = {c.name: c.claim for c in judgement.checks if c.claim is not None}
    assert claims == expected
    assert {c.kind for c in judgement.checks if c.claim is None} >= {"baseline", "experiment"}
    entries = {e["name"]: e["claim"] for e in verdict_json.build(judgement)["checks"]}
    assert {name: entries[name] for name in expected} == expected
    # a stated claim concurrency the run lacks: its error still states the improvement
    missing = judge_table(family=["claims"], claims={"noop_margin": 0.05,
                                                     "gated_claim_concurrency": 64})
    error = by_name(run_judge(write_block_run(tmp_path / "c64", runner_class="mi355x",
                                              table=missing)))["claim: on vs off mean_ttft_ms at c64"]
    assert (error.verdict, error.claim) == ("error", "improvement")


@pytest.mark.parametrize(("runner_class", "gate_open", "claim"), [
    ("mi300x", True, "improvement"),    # a tree that opens the gate on gfx942: on is claimed
    ("mi355x", False, "noop"),          # a tree that closes it on gfx95: on must be a no-op
    ("mi300x", None, "noop"),           # no gate_open recorded (older runs): released sglang's
    ("mi355x", None, "improvement")])
def test_the_recorded_gate_decides_claim_or_no_op(tmp_path: Path, runner_class: str,
                                                 gate_open: bool | None, claim: str) -> None:
    """run.json's ``gate_open`` (the tree's gate as bench read it) makes a class's ``on`` a claim
    or a no-op, whatever the registry says for released sglang."""
    run_dir = write_block_run(tmp_path / "run", runner_class=runner_class)
    if gate_open is not None:
        data = json.loads((run_dir / "run.json").read_text())
        data["gate_open"] = gate_open
        (run_dir / "run.json").write_text(json.dumps(data))
    run = load_run(run_dir)
    claims = {p.evaluate(0.95).claim for p in block_pendings(run, evidence_from_run(run),
                                                             JudgeConfig())}
    assert claim in claims
    assert ({"improvement", "noop"} - {claim}).isdisjoint(claims)


def test_without_a_stated_claim_concurrency_the_highest_gates(tmp_path: Path) -> None:
    judgement = run_judge(write_block_run(tmp_path / "run", runner_class="mi355x",
                                          concurrencies=(2, 4, 8)))
    gated = [c.name for c in judgement.checks if c.primary and c.metric == "mean_ttft_ms"]
    assert gated == ["claim: on vs off mean_ttft_ms at c8 improves >= 4.0%"]


def test_claims_outside_the_family_are_reported_not_gated(tmp_path: Path) -> None:
    table = judge_table(family=["baseline-aggregate"])
    checks = by_name(run_judge(write_block_run(tmp_path / "run", runner_class="mi355x",
                                               table=table)))
    accuracy = [c for c in checks.values() if c.metric == "accuracy"]
    assert accuracy and not any(c.primary for c in accuracy)


def test_one_concurrency_keeps_the_noop_of_a_metric_outside_the_aggregates(
        tmp_path: Path) -> None:
    table = judge_table(aggregate_metrics=["mean_ttft_ms"])
    checks = by_name(run_judge(write_block_run(tmp_path / "run", concurrencies=(4,),
                                               table=table)))
    assert "no-op: on mean_ttft_ms at c4 equivalent to off within ±5.0%" in checks
    assert "no-op: on median_tpot_ms at c4 equivalent to off within ±5.0%" in checks


def test_a_check_whose_run_lacks_the_blocks_is_inconclusive_and_says_which(
        tmp_path: Path) -> None:
    table = judge_table(family=["claims", "baseline-aggregate"])
    doc = baseline_doc(tmp_path, table=table)
    def drop_off_c2_ttft(point: dict[str, Any]) -> None:
        if (point["mode"], point["concurrency"]) == ("off", 2):
            del point["metrics"]["mean_ttft_ms"]

    run_dir = edit_points(write_block_run(tmp_path / "run", table=table), drop_off_c2_ttft)
    check = by_name(run_judge(run_dir, baseline_doc=doc))[aggregate("off", "mean_ttft_ms")]
    assert (check.verdict, check.reason) == (
        "inconclusive", "mean_ttft_ms: no blocks for off at concurrency [2]")
    assert check.interval is None


def _with_throughput(run_dir: Path, factor: Any) -> Path:
    """Every point also reports output_throughput (higher is better): 1000 tok/s x factor."""
    def add(point: dict[str, Any]) -> None:
        point["metrics"]["output_throughput"] = 1000.0 * factor(point) * (
            1 + 0.001 * point["block"])

    return edit_points(run_dir, add)


def test_a_higher_is_better_metric_that_rises_is_an_improvement(tmp_path: Path) -> None:
    table = judge_table(family=["claims", "baseline-aggregate"],
                        metrics=["mean_ttft_ms", "median_tpot_ms", "output_throughput"],
                        floors={"mean_ttft_ms": 0.05, "median_tpot_ms": 0.05,
                                "output_throughput": 0.05},
                        claims={"noop_margin": 0.05, "experiment_metrics": ["output_throughput"]})
    doc_dir = _with_throughput(write_block_run(tmp_path / "baseline-run", seed=99, table=table,
                                               started_at="2026-11-30T12:00:00+00:00"),
                               lambda _p: 1.0)
    doc = baseline_from_run(load_run(doc_dir), doc_dir)
    run_dir = _with_throughput(write_block_run(tmp_path / "run", table=table,
                                               modes=("off", "on", "forced")),
                               lambda p: 1.5 if p["mode"] == "forced" else 1.3)
    checks = by_name(run_judge(run_dir, baseline_doc=doc))
    assert checks["off@c2 output_throughput vs baseline"].verdict == "improvement"
    assert checks["experiment: forced@c2 output_throughput vs off"].verdict == "improvement"


# ------------------------------------------------- runs from before [design]: one block per start
# Each repeat started every mode's server anew: the run is read as one block per start (start =
# repeat), and on vs off compares two server starts per pair (two start levels: the prior is
# 2 x run_to_run_cv^2 with run_to_run_cv_dof, measured too from two repeats or more).


def legacy_checks(run_dir: Path, config: JudgeConfig | None = None,
                  confidence: float = 0.95) -> dict[str, Check]:
    """Every block check of a run from before [design], each at ``confidence``."""
    run = load_run(run_dir)
    pendings = block_pendings(run, evidence_from_run(dict(run)), config or JudgeConfig())
    return {c.name: c for c in (p.evaluate(confidence) for p in pendings)}


CLAIM64 = "claim: on vs off mean_ttft_ms at c64 improves >= 4.0%"


def _legacy_gfx95(tmp_path: Path, factor: float, **kw: Any) -> Path:
    kw.setdefault("concurrencies", (4, 64))
    kw.setdefault("n_requests", 200)
    kw.setdefault("request_cv", 0.03)
    return make_run(tmp_path / f"gfx95-{factor}-{kw.get('seed', 0)}", runner_class="mi355x",
                    model_profile="glm-5.2-mxfp4",
                    effect=lambda m, c: factor if m == "on" else 1.0, **kw)


def _legacy_alignment(run_dir: Path, mode: str, aligned: float, saturated: int,
                      effective: bool = False) -> Path:
    def change(point: dict[str, Any]) -> None:
        if point["mode"] == mode:
            point["alignment"].update(aligned_fraction=aligned, saturated_batches=saturated)
            point["exact_fill_effective"] = effective
    return edit_points(run_dir, change)


def test_a_legacy_runs_on_vs_off_keeps_two_start_levels(tmp_path: Path) -> None:
    """One repeat (one start per mode): the on-vs-off difference carries both modes' start
    levels, 2 x run_to_run_cv^2 from the prior; the same values marked as blocks inside one
    shared start keep only the start x mode interaction (interaction_cv^2)."""
    config = JudgeConfig(run_to_run_cv=0.04, run_to_run_cv_dof=0, interaction_cv=0.01,
                         interaction_cv_dof=0, gated_min_ttft_improvement=0.04)
    legacy_dir = _legacy_gfx95(tmp_path, 0.9, concurrencies=(64,), n_requests=50)
    legacy = legacy_checks(legacy_dir, config)[CLAIM64]
    assert legacy.interval.se == pytest.approx(math.sqrt(2) * 0.04, rel=1e-12)
    assert legacy.noise["level"] == "start" and legacy.noise["between_source"] == "prior"
    assert legacy.reason.endswith("start level from the prior (log-sd 0.057; 1 start); one "
                                  "block per start: its spread is inside the start level")

    def in_server(point: dict[str, Any]) -> None:
        point.update(start=0, block=0)
    raw = json.loads((legacy_dir / "run.json").read_text())
    raw["design"] = {"in_server": True, "starts": 1, "blocks": 1, "unit": "block"}
    shared_dir = tmp_path / "shared"
    shared_dir.mkdir()
    (shared_dir / "run.json").write_text(json.dumps(raw))
    shared = legacy_checks(edit_points(shared_dir, in_server), config)[CLAIM64]
    assert shared.interval.se == pytest.approx(0.01, rel=1e-12)
    assert shared.noise["level"] == "interaction"
    # the same estimate, a wider interval: two start levels are not an interaction
    assert shared.interval.estimate == pytest.approx(legacy.interval.estimate, rel=1e-12)
    assert legacy.interval.low < shared.interval.low < shared.interval.high < \
        legacy.interval.high
    assert legacy.verdict == "inconclusive" and shared.verdict == "pass"


def test_a_legacy_runs_repeats_measure_the_start_level(tmp_path: Path) -> None:
    """Three repeats, no prior: the paired t on the per-repeat log differences (scipy)."""
    run_dir = _legacy_gfx95(tmp_path, 0.9, concurrencies=(64,), repeats=3, run_cv=0.03,
                            n_requests=50)
    config = JudgeConfig(run_to_run_cv=0.05, run_to_run_cv_dof=0)
    check = legacy_checks(run_dir, config)[CLAIM64]
    points = json.loads((run_dir / "run.json").read_text())["points"]
    on = [math.log(p["metrics"]["mean_ttft_ms"]) for p in points if p["mode"] == "on"]
    off = [math.log(p["metrics"]["mean_ttft_ms"]) for p in points if p["mode"] == "off"]
    ttest = sps.ttest_rel(on, off)
    assert check.interval.method.startswith("blocks-paired (3 start(s) x 1 block pair(s)")
    assert check.interval.n_starts == 3 and check.interval.df == pytest.approx(2)
    assert math.log(check.interval.estimate) == pytest.approx(statistics.mean(on) -
                                                              statistics.mean(off))
    assert check.interval.se == pytest.approx(abs(math.log(check.interval.estimate)
                                                  / ttest.statistic), rel=1e-9)
    assert "start level measured over 3 starts" in check.reason


def test_legacy_gfx95_ttft_claim_pass_regression_inconclusive(tmp_path: Path) -> None:
    config = JudgeConfig(gated_min_ttft_improvement=0.04, run_to_run_cv=0.0)
    good = legacy_checks(_legacy_gfx95(tmp_path, 0.90, repeats=3), config)[CLAIM64]
    assert (good.verdict, good.concurrency, good.gate, good.claim) == ("pass", 64, True,
                                                                        "improvement")
    weak = legacy_checks(_legacy_gfx95(tmp_path, 0.995, repeats=3), config)[CLAIM64]
    assert weak.verdict == "regression"                       # demonstrably < 4 % better
    # a true effect right at the stated 4 % with noisy repeats and no prior to lean on: the
    # one-sided interval at 1 - 2 alpha straddles 0.96 but for ~2 alpha (10 %) of nights
    noisy = JudgeConfig(gated_min_ttft_improvement=0.04, run_to_run_cv=0.0,
                        run_to_run_cv_dof=0)
    verdicts = [legacy_checks(_legacy_gfx95(tmp_path, 0.96, concurrencies=(64,), repeats=3,
                                            n_requests=20, request_cv=0.1, seed=seed),
                              noisy)[CLAIM64].verdict for seed in range(20)]
    assert verdicts.count("inconclusive") >= 15, verdicts


def test_legacy_single_repeat_leans_on_the_assumed_run_to_run_noise(tmp_path: Path) -> None:
    """One repeat per mode cannot show run-to-run noise: the suite's assumed CV (two start
    levels) makes the interval, so a 10 % on/off gap stays undecided at 5 % per start."""
    run_dir = _legacy_gfx95(tmp_path, 0.90)
    tight = legacy_checks(run_dir, JudgeConfig(run_to_run_cv=0.0))[CLAIM64]
    honest = legacy_checks(run_dir, JudgeConfig(run_to_run_cv=0.05))[CLAIM64]
    assert tight.verdict == "pass" and honest.verdict == "inconclusive"
    assert "start level from the prior (log-sd 0.071; 1 start)" in honest.reason
    assert honest.interval.high - honest.interval.low > tight.interval.high - tight.interval.low


def test_legacy_noop_claims_on_other_runners(tmp_path: Path) -> None:
    same = make_run(tmp_path / "same", runner_class="mi300x", n_requests=3000, request_cv=0.05,
                    concurrencies=(8,), repeats=3)
    checks = legacy_checks(same, JudgeConfig(metrics=("mean_ttft_ms",), noop_margin=0.05,
                                             run_to_run_cv=0.005))
    assert checks[PREFILL].verdict == "pass" and checks[PREFILL].claim == "noop-prefill"
    eq = checks["no-op: on mean_ttft_ms at c8 equivalent to off within ±5.0%"]
    assert (eq.verdict, eq.gate, eq.claim) == ("pass", True, "noop")
    assert eq.interval.confidence == pytest.approx(0.90)          # TOST: 1 - 2 alpha
    assert eq.reason.startswith("TOST equivalence, each mode in its own starts, paired by start")
    assert not [c for c in checks.values() if c.name.startswith("claim:")]   # no gfx95 claims


def test_legacy_noop_metrics_not_equivalent(tmp_path: Path) -> None:
    slow = make_run(tmp_path / "slow", runner_class="cpu", n_requests=400, request_cv=0.03,
                    repeats=3, effect=lambda m, c: 1.3 if m == "on" else 1.0)
    check = legacy_checks(slow, JudgeConfig(metrics=("mean_ttft_ms",)))[
        "no-op: on mean_ttft_ms at all concurrencies (geometric mean) equivalent to off within "
        "±5.0%"]
    assert check.verdict == "regression" and check.interval.low > 1.05


def test_legacy_noop_tost_gates_only_with_adequate_power(tmp_path: Path) -> None:
    """The rule: a no-op equivalence check gates only when its TOST could show identical arms
    equivalent with >= noop_min_power at the margin; an underpowered one reports (gate false)."""
    name = "no-op: on mean_ttft_ms at c8 equivalent to off within ±2.0%"
    noisy = make_run(tmp_path / "noisy", runner_class="mi300x", repeats=3, n_requests=30,
                     request_cv=0.3, run_cv=0.04, concurrencies=(8,))
    config = JudgeConfig(metrics=("mean_ttft_ms",), noop_margin=0.02, run_to_run_cv=0.04)
    check = legacy_checks(noisy, config, confidence=0.999)[name]
    assert not check.gate and "TOST power" in check.reason
    assert check.interval.method.startswith("blocks-paired (3 start(s) x 1 block pair(s)")
    quiet = make_run(tmp_path / "quiet", runner_class="mi300x", repeats=3, n_requests=3000,
                     request_cv=0.02, concurrencies=(8,))
    config = JudgeConfig(metrics=("mean_ttft_ms",), noop_margin=0.05, run_to_run_cv=0.002,
                         run_to_run_cv_dof=50)
    check = legacy_checks(quiet, config)[name.replace("2.0%", "5.0%")]
    assert check.gate and check.verdict == "pass", check.describe()


def test_three_repeat_legacy_noop_on_identical_arms_rarely_fails(tmp_path: Path) -> None:
    """Issue 11: the 3-repeat TOST called identical arms 'regression' 4-6 % of the time. With
    t intervals and the power rule, 40 identical nights give no gating no-op failure."""
    config = JudgeConfig(metrics=("mean_ttft_ms", "median_tpot_ms"), noop_margin=0.02,
                         run_to_run_cv=0.02)
    failures = 0
    for seed in range(40):
        run = make_run(tmp_path / f"n{seed}", runner_class="mi300x", repeats=3, n_requests=64,
                       request_cv=0.3, run_cv=0.02, concurrencies=(4, 64), seed=seed)
        checks = legacy_checks(run, config, confidence=per_check_confidence(0.95, 4))
        failures += any(c.gate and c.verdict == "regression" for c in checks.values())
    assert failures == 0


def test_legacy_prefill_order_from_timing_is_not_a_failure(tmp_path: Path) -> None:
    """At concurrency > 1 arrival timing reorders batches: reported, not a regression."""
    diff = make_run(tmp_path / "diff", runner_class="h200",
                    prefill_tokens={"off": [256, 236, 256], "on": [256, 256, 236]})
    _legacy_alignment(diff, "off", 0.25, 12)
    _legacy_alignment(diff, "on", 0.25, 12)
    check = legacy_checks(diff)[PREFILL]
    assert check.verdict == "pass"
    assert "aligned on 6/24 vs off 6/24" in check.reason       # pooled over c2 and c4
    assert "(c2 start 0 block 0: batch 1: off=236 on=256)" in check.reason   # still reported


def test_legacy_exact_fill_leak_is_a_regression(tmp_path: Path) -> None:
    """Exact fill leaking off gfx95 aligns every saturated batch at the chunk."""
    leak = make_run(tmp_path / "leak", runner_class="mi325x", concurrencies=(4,), repeats=3)
    _legacy_alignment(leak, "off", 0.25, 12)
    _legacy_alignment(leak, "on", 1.0, 12)
    check = legacy_checks(leak)[PREFILL]
    assert check.verdict == "regression" and "exact fill leaked" in check.reason
    assert (check.current_value, check.reference_value) == (1.0, 0.25)


def test_legacy_read_back_of_the_gate_decides_first(tmp_path: Path) -> None:
    """A point read back with exact fill active names its (concurrency, start, block): a run
    from before [design] has no start or block field, its repeat is the start."""
    run = make_run(tmp_path / "eff", runner_class="mi300x", repeats=2)
    _legacy_alignment(run, "off", 0.25, 12)
    edit_points(run, lambda p: p.update(exact_fill_effective=p["mode"] == "on"
                                        and p["repeat"] == 1 and p["concurrency"] == 4))
    check = legacy_checks(run)[PREFILL]
    assert (check.verdict, check.p_value) == ("regression", 0.0)
    assert check.reason == "exact fill read back effective in on blocks [(4, 1, 0)]"


def test_legacy_noop_without_saturated_batches_is_inconclusive(tmp_path: Path) -> None:
    run = make_run(tmp_path / "none", runner_class="mi300x")
    _legacy_alignment(run, "on", 0.0, 0)
    _legacy_alignment(run, "off", 0.0, 0)
    check = legacy_checks(run)[PREFILL]
    assert check.verdict == "inconclusive" and "no saturated prefill batches" in check.reason


def test_legacy_forced_is_an_experiment_never_a_gate(tmp_path: Path) -> None:
    run = make_run(tmp_path / "forced", runner_class="cpu", modes=("off", "on", "forced"),
                   n_requests=300, request_cv=0.03, repeats=3,
                   effect=lambda m, c: 0.8 if m == "forced" else 1.0)
    experiments = [c for name, c in legacy_checks(
        run, JudgeConfig(metrics=("mean_ttft_ms",), run_to_run_cv=0.01)).items()
        if name.startswith("experiment: forced")]
    assert len(experiments) == 2 and all(not c.gate for c in experiments)
    assert {c.verdict for c in experiments} == {"improvement"}


@pytest.mark.parametrize("mode", ["on", "off"])
def test_a_legacy_claim_names_the_mode_that_lacks_its_metric(tmp_path: Path, mode: str) -> None:
    run_dir = make_run(tmp_path / mode, runner_class="mi355x", concurrencies=(4,), repeats=3)
    edit_points(run_dir, lambda p: p["metrics"].pop("mean_ttft_ms") if p["mode"] == mode
                else None)
    check = legacy_checks(run_dir)["claim: on vs off mean_ttft_ms at c4 improves >= 4.0%"]
    assert check.verdict == "inconclusive" and check.interval is None
    assert check.reason == f"mean_ttft_ms: no blocks for {mode} at concurrency [4]"


# ------------------------------------------- a one-night check's resolution (issue 41)


def test_a_healthy_night_passes_at_its_designs_resolution_and_says_so(tmp_path: Path) -> None:
    """Three starts a side under run_to_run_cv 4 %: the interval cannot rule out the 2 %
    floor, but it rules out the regression the design resolves, so the night reads PASS and
    names that resolution; a 40 % slower night is still a regression."""
    from servegate.report.headline import check_line

    table = judge_table(family=["baseline-aggregate"], run_to_run_cv=0.04,
                        floors={"mean_ttft_ms": 0.02, "median_tpot_ms": 0.01})
    kwargs = {"starts": 3, "blocks": 4, "start_sd": 0.01, "block_sd": 0.005, "table": table}
    doc = baseline_doc(tmp_path, **kwargs)
    healthy = run_judge(write_block_run(tmp_path / "run", seed=3, **kwargs), baseline_doc=doc)
    check = by_name(healthy)[aggregate("off", "mean_ttft_ms")]
    assert check.verdict == "pass" and healthy.overall == "pass"
    assert check.interval is not None and check.interval.high > 1.02        # not the floor
    assert check.resolution is not None and 0.1 < check.resolution < 0.25
    assert check.interval.high <= 1 + check.resolution
    assert check.reason.startswith(f"no regression > {100 * check.resolution:.1f}% (this "
                                   "design's resolution")
    assert f"no regression > {100 * check.resolution:.1f} % (this design's resolution)" \
        in check_line(check).replace(".0 %", " %")
    assert check.to_dict()["resolution"] == round(check.resolution, 6)
    slow = run_judge(write_block_run(tmp_path / "slow", seed=3, effect=lambda *_: 1.4,
                                     **kwargs), baseline_doc=doc)
    assert by_name(slow)[aggregate("off", "mean_ttft_ms")].verdict == "regression"
    # reported (not gated) per-point checks keep the floor: no resolution of their own
    point = by_name(healthy)["off@c2 mean_ttft_ms vs baseline"]
    assert point.resolution is None and point.verdict == "inconclusive"
