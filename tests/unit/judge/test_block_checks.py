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
from unit.judge.block_runs import edit_points, judge_table, slower, write_block_run

from servegate.config.judge import parse_judge_table
from servegate.core.results import load_run
from servegate.judge.baselines import baseline_from_run
from servegate.judge.checks import Check
from servegate.judge.evaluate import judge
from servegate.judge.family import holm_levels
from servegate.judge.judgement import Judgement
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
    assert judgement.family == {"method": "holm", "size": 2,
                                "checks": [claim_name, accuracy_name]}
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
    assert judgement.family == {"method": "holm", "size": 4, "checks": names}
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
        assert check.interval.n_repeats == 3


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
              seed: int = 3) -> Path:
    table = judge_table(family=["ab-aggregate"], run_to_run_cv=0.02, run_to_run_cv_dof=0)
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
    assert (iv.n_current, iv.n_reference, iv.n_repeats) == (6, 4, 2)
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
