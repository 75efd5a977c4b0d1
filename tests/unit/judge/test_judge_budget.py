"""servegate.judge.budget: the noise budget (Kalibera & Jones) by hand, and on real checks of
the block judge (run folders as bench writes them, judged by ``servegate.judge.evaluate``)."""

from __future__ import annotations

import copy
import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pytest
from scipy import stats as sps
from unit.judge.block_runs import judge_table, write_block_run

from servegate.core.results import load_run
from servegate.judge import budget
from servegate.judge.baselines import baseline_from_run
from servegate.judge.checks import Check
from servegate.judge.evaluate import judge
from servegate.judge.judgement import Judgement

# quantiles from the tables (scipy: norm.ppf, t.ppf), written out
Z_80 = 0.8416212335729143          # norm.ppf(0.80)


Z_975 = 1.959963984540054          # norm.ppf(0.975)


Z_95 = 1.6448536269514722          # norm.ppf(0.95)


T_975_5 = 2.570581835636314        # t.ppf(0.975, 5)


T_95_5 = 2.0150483733330233        # t.ppf(0.95, 5)


T_90_5 = 1.4758840488244815        # t.ppf(0.90, 5)

T_975_1 = 12.706204736174694       # t.ppf(0.975, 1): one degree of freedom is still a t


START_S, BLOCK_S = 120.0, 6.0


def noise(between: float, block: float, fixed: float = 0.0, **extra: Any) -> dict[str, Any]:
    return {"between_var": between, "block_var": block, "fixed_var": fixed, **extra}


# ------------------------------------------------------------------------------ variance


def test_variance_by_hand() -> None:
    """between/S + block/(0.6 S B) + fixed: 4e-4/2 + 9e-4/(0.6*10) + 1e-4 = 4.5e-4."""
    assert budget.variance(noise(4e-4, 9e-4, 1e-4), 2, 5) == pytest.approx(4.5e-4, rel=1e-12)
    assert budget.variance({"between_var": 4e-4, "block_var": 9e-4}, 2, 5) == \
        pytest.approx(3.5e-4, rel=1e-12)                # no reference side: fixed 0
    assert budget.variance(noise(0.0, 6e-4), 1, 10) == pytest.approx(1e-4, rel=1e-12)


# ------------------------------------------------------------------------------ cheapest


def test_no_start_level_one_start_and_the_fewest_blocks() -> None:
    """between 0: se^2 = 0.00117 / (0.6 S B) <= 1e-4 needs S B >= 19.5; a start costs far more
    than a block round, so 1 start x 20 blocks (1 x 19 falls short)."""
    plan = budget.cheapest(noise(0.0, 0.00117), 0.01, 300.0, 10.0)
    assert plan is not None
    assert (plan.starts, plan.blocks, plan.seconds) == (1, 20, 500.0)
    assert plan.se == pytest.approx(math.sqrt(0.00117 / 12.0), rel=1e-12)
    assert math.sqrt(budget.variance(noise(0.0, 0.00117), 1, 19)) > 0.01
    # a tiny block noise: the grid's smallest design (two blocks)
    tiny = budget.cheapest(noise(0.0, 1e-9), 0.01, 300.0, 10.0)
    assert tiny is not None and (tiny.starts, tiny.blocks) == (1, 2)


@pytest.mark.parametrize(("start_s", "round_s", "expected"), [
    # by hand, se^2 = 2.4e-4/S + 5.5e-4/(S B) <= 1e-4: S = 3 needs B >= 9.17 (10), S = 4: 3.44
    # (4), S = 5: 2.12 (3), S >= 6: 2; costs S (start + B round)
    (300.0, 10.0, (3, 10, 1200.0)),      # 1200 | 1360 | 1650 | 1920: blocks are cheap
    (30.0, 10.0, (4, 4, 280.0)),         # 390 | 280 | 300 | 300: starts are cheap
])
def test_a_large_start_level_forces_more_starts(start_s: float, round_s: float,
                                                expected: tuple[int, int, float]) -> None:
    plan = budget.cheapest(noise(2.4e-4, 0.00033), 0.01, start_s, round_s)
    assert plan is not None
    assert (plan.starts, plan.blocks, plan.seconds) == pytest.approx(expected)
    # 2 starts cannot reach 0.01 whatever the blocks (2.4e-4 / 2 alone exceeds 1e-4)
    assert budget.variance(noise(2.4e-4, 0.0), 2, 10 ** 6) > 1e-4


def test_kalibera_jones_optimum() -> None:
    """Cost S (c_s + B c_r) at se^2 = v_s/S + v_b/(S B) is lowest at B* = sqrt(c_s v_b /
    (c_r v_s)) whatever the target: v_s = 1e-4, v_b = 6e-4 / 0.6, c_s = 300, c_r = 10 give
    B* = sqrt(300); with the target whose continuous optimum is S* = 4, the grid's plan is 4
    starts of ceil(B*) = 18 blocks (3 starts would need 55 > 40 blocks, 5 starts x 11 cost more)."""
    v_s, v_b, c_s, c_r = 1e-4, 6e-4, 300.0, 10.0
    b_star = math.sqrt(c_s * (v_b / budget.EFFICIENCY) / (c_r * v_s))
    assert b_star == pytest.approx(math.sqrt(300.0))
    target = math.sqrt((v_s + v_b / budget.EFFICIENCY / b_star) / 4)
    plan = budget.cheapest(noise(v_s, v_b), target, c_s, c_r)
    assert plan is not None
    assert (plan.starts, plan.blocks, plan.seconds) == (4, 18, 1920.0)
    assert abs(plan.blocks - b_star) < 1
    assert plan.se <= target


def test_more_starts_than_max_starts_is_none() -> None:
    """between/12 alone must fit: 1.15e-3/12 < 1e-4 fits at 12 starts, 1.25e-3/12 does not."""
    fits = budget.cheapest(noise(1.15e-3, 1e-6), 0.01, 100.0, 5.0)
    assert fits is not None and fits.starts == budget.MAX_STARTS == 12
    assert budget.cheapest(noise(1.25e-3, 1e-6), 0.01, 100.0, 5.0) is None
    # the reference side alone above the target: nothing this run does helps
    assert budget.cheapest(noise(0.0, 1e-6, fixed=2e-4), 0.01, 100.0, 5.0) is None


@pytest.mark.parametrize(("block_var", "expected"), [
    (0.6 * 39.5e-4, (1, 40, 700.0)),     # 1 x 40 reaches 0.01 (1 x 39 does not): the grid's edge
    (0.6 * 40.5e-4, (2, 21, 1020.0)),    # would need 1 x 41: beyond the grid, so two starts
])
def test_one_start_may_take_up_to_max_blocks(block_var: float,
                                             expected: tuple[int, int, float]) -> None:
    plan = budget.cheapest(noise(0.0, block_var), 0.01, 300.0, 10.0)
    assert plan is not None and (plan.starts, plan.blocks, plan.seconds) == expected
    assert budget.MAX_BLOCKS == 40


def test_a_design_exactly_at_the_target_reaches_it() -> None:
    levels = noise(1e-5, 1e-3)
    target = math.sqrt(budget.variance(levels, 1, 10))
    plan = budget.cheapest(levels, target, 300.0, 10.0)
    assert plan is not None and (plan.starts, plan.blocks) == (1, 10)


def test_on_a_cost_tie_the_fewest_starts_win() -> None:
    """Free restarts: 1 x 20, 2 x 10, 4 x 5 and 10 x 2 all cost 200 s; the first found, the
    fewest starts, is kept (fewer server starts, less to go wrong)."""
    plan = budget.cheapest(noise(0.0, 0.6 * 19.5e-4), 0.01, 0.0, 10.0)
    assert plan is not None and (plan.starts, plan.blocks, plan.seconds) == (1, 20, 200.0)


def test_cheapest_is_the_cheapest_feasible_design_on_the_grid() -> None:
    """Against every (S, B) of the grid: nothing cheaper reaches the target."""
    levels = noise(3e-4, 2e-3, 1e-5)
    target, start_s, round_s = 0.009, 200.0, 15.0
    plan = budget.cheapest(levels, target, start_s, round_s)
    assert plan is not None
    assert plan.se == pytest.approx(math.sqrt(budget.variance(levels, plan.starts, plan.blocks)))
    assert plan.se <= target
    for starts in range(1, budget.MAX_STARTS + 1):
        for blocks in range(2, budget.MAX_BLOCKS + 1):
            if starts * (start_s + blocks * round_s) < plan.seconds:
                assert budget.variance(levels, starts, blocks) > target ** 2, (starts, blocks)


# ------------------------------------------------------------------------------ target_se


@pytest.mark.parametrize(("alpha", "df", "one_sided", "quantile"), [
    (0.05, math.inf, False, Z_975),
    (0.05, math.inf, True, Z_95),
    (0.05, 5.0, False, T_975_5),
    (0.05, 0.0, False, Z_975),           # no degrees of freedom known: the normal
    (0.05, 1.0, False, T_975_1),
    (0.05, math.nan, False, Z_975),
    (0.10, 5.0, False, T_95_5),
    (0.10, 5.0, True, T_90_5),
])
def test_target_se_by_hand(alpha: float, df: float, one_sided: bool, quantile: float) -> None:
    """distance / (t_{1 - tail, df} + z_{0.8}), tail alpha one-sided, alpha / 2 two-sided."""
    assert budget.target_se(0.03, alpha, df, one_sided) == \
        pytest.approx(0.03 / (quantile + Z_80), rel=1e-9)


def test_target_se_values() -> None:
    assert budget.target_se(0.03, 0.05, math.inf, False) == pytest.approx(0.0107082, abs=1e-7)
    assert budget.target_se(0.03, 0.05, math.inf, True) == pytest.approx(0.0120653, abs=1e-7)


# ------------------------------------------------------------------------------ costs


def test_costs_from_the_run() -> None:
    points = [{"mode": m, "concurrency": c, "start": s, "block": b}
              for s in range(2) for b in range(3) for m in ("off", "on") for c in (4, 8)]
    run = {"design": {"start_seconds": [100.0, 130.0], "block_seconds": 5.0}, "points": points}
    assert budget.costs(run) == (115.0, 20.0)           # a round: 2 modes x 2 concurrencies
    ab = {**run, "points": [{**p, "arm": arm} for p in points for arm in ("base", "head")]}
    assert budget.costs(ab) == (115.0, 40.0)
    assert budget.costs({"design": {"start_seconds": [], "block_seconds": 5.0}}) is None
    assert budget.costs({"design": {"start_seconds": [90.0], "block_seconds": None}}) is None
    assert budget.costs({"points": points}) is None
    assert budget.costs({"design": {"start_seconds": [90.0], "block_seconds": 2.0},
                         "points": []}) == (90.0, 2.0)


# ------------------------------------------------------------------------------ plan_for


def unrounded_target(check: Check) -> float:
    """The target standard error before plan_for rounds it: the distance from the estimate to
    the nearest decision boundary (log scale) at the interval's own two-sided alpha."""
    iv = check.interval
    assert iv is not None
    distance = min(abs(math.log(iv.estimate) - math.log(b))
                   for b in check.decision_boundaries())
    return budget.target_se(distance, 1.0 - iv.confidence, iv.df, one_sided=False)


def with_costs(run_dir: Path, starts: int) -> Path:
    """What bench records after the run: each server start's and the mean block's seconds."""
    path = run_dir / "run.json"
    run = json.loads(path.read_text())
    run["design"]["start_seconds"] = [START_S] * starts
    run["design"]["block_seconds"] = BLOCK_S
    path.write_text(json.dumps(run))
    return run_dir


@pytest.fixture(scope="module")
def claim_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Judgement, dict[str, Any]]:
    """gfx95 night, 2 starts x 4 blocks at concurrencies 2 and 4, on 5 % faster than off against
    a claim of 4 %: the claim is not decided."""
    run_dir = write_block_run(tmp_path_factory.mktemp("claim") / "run", runner_class="mi355x",
                              starts=2, blocks=4, concurrencies=(2, 4), block_sd=0.02,
                              effect=lambda m, *_: 0.95 if m == "on" else 1.0, seed=0)
    with_costs(run_dir, 2)
    judgement = judge(run_dir, baselines_root=run_dir.parent / "no-baselines")
    return judgement, dict(load_run(run_dir))


def claim_check(judgement: Judgement) -> Check:
    [check] = [c for c in judgement.checks
               if c.primary and c.name.startswith("claim: on vs off mean_ttft_ms")]
    return check


def test_plan_for_an_undecided_claim(claim_run: tuple[Judgement, dict[str, Any]]) -> None:
    judgement, run = claim_run
    check = claim_check(judgement)
    assert (check.verdict, check.gate) == ("inconclusive", True)
    assert check.noise is not None and check.interval is not None
    assert (check.noise["starts"], check.noise["blocks"]) == (2, 4)
    assert check.noise["one_sided"] is True and check.noise["fixed_var"] == 0
    plan = budget.plan_for(check, run)
    assert plan is not None and plan["decidable"] is True
    assert plan["check"] == check.name
    assert plan["this_run"] == {"starts": 2, "blocks": 4}
    assert plan["start_level"] == check.noise["between_source"] == "measured+prior"
    # the target by hand: the distance to the claim's ratio 0.96 on the log scale, at the
    # check's one-sided level (its interval is at 1 - 2 level), 80 % power
    iv = check.interval
    level = (1.0 - iv.confidence) / 2
    distance = abs(math.log(iv.estimate) - math.log(0.96))
    target = distance / (float(sps.t.ppf(1 - level, iv.df)) + Z_80)
    assert plan["target_se"] == pytest.approx(target, abs=1e-5)
    starts, blocks = plan["starts"], plan["blocks"]
    assert math.sqrt(budget.variance(check.noise, starts, blocks)) <= target
    assert blocks == 2 or math.sqrt(budget.variance(check.noise, starts, blocks - 1)) > target
    # what it costs: 2 modes x 2 concurrencies per round, the run's own seconds
    assert plan["serving_minutes"] == pytest.approx(
        round(starts * (START_S + blocks * BLOCK_S * 4) / 60, 1))
    # the judge gives the same plan and its one line
    assert judgement.budget == [plan]
    assert judgement.budget_text == (
        f"noise budget: {starts} start(s) x {blocks} blocks (~{plan['serving_minutes']:g} "
        f"serving min) would decide {check.name} (this run 2 x 4; start level measured+prior)")


def test_plan_for_when_nothing_can_decide(claim_run: tuple[Judgement, dict[str, Any]]) -> None:
    judgement, run = claim_run
    check = claim_check(judgement)
    assert check.noise is not None and check.interval is not None
    # the interaction level too large for 12 starts
    loud = copy.copy(check)
    loud.noise = {**check.noise, "between_var": 0.01}
    record = budget.plan_for(loud, run)
    assert record is not None and record["decidable"] is False
    assert "needs more than 12 starts" in record["why"] and "log-sd 0.100" in record["why"]
    # the estimate exactly on the decision boundary
    on_boundary = copy.copy(check)
    on_boundary.interval = dataclasses.replace(check.interval, estimate=0.96)
    assert budget.plan_for(on_boundary, run) == {
        "check": check.name, "decidable": False,
        "why": "the estimate sits on the decision boundary"}
    # no costs recorded, no noise record, no interval: no plan
    design = {k: v for k, v in run["design"].items() if k != "start_seconds"}
    assert budget.plan_for(check, {**run, "design": design}) is None
    quiet = copy.copy(check)
    quiet.noise = None
    assert budget.plan_for(quiet, run) is None
    [accuracy] = [c for c in judgement.checks if c.primary and c.metric == "accuracy"]
    assert budget.plan_for(accuracy, run) is None


def test_a_one_start_baseline_under_a_large_prior_is_too_noisy(tmp_path: Path) -> None:
    """Baseline aggregates against a one-start baseline under run_to_run_cv 0.2: the reference
    side alone has se ~0.2, far above any target: re-record the baseline."""
    table = judge_table(family=["baseline-aggregate"], run_to_run_cv=0.2)
    source = write_block_run(tmp_path / "baseline-run", starts=1, blocks=4, table=table, seed=99,
                             started_at="2026-11-30T12:00:00+00:00")
    run_dir = with_costs(write_block_run(tmp_path / "run", starts=1, blocks=4, table=table,
                                         seed=3), 1)
    judgement = judge(run_dir, baseline_doc=baseline_from_run(load_run(source), source),
                      baselines_root=tmp_path / "no-baselines")
    primary = [c for c in judgement.checks if c.primary]
    assert len(primary) == 4 and all(c.verdict == "inconclusive" for c in primary)
    run = dict(load_run(run_dir))
    for check in primary:
        assert check.noise is not None and check.interval is not None
        assert check.noise["fixed_var"] == pytest.approx(0.04, rel=1e-3)   # 0.2^2 + blocks
        record = budget.plan_for(check, run)
        assert record is not None and record["decidable"] is False
        assert "the reference alone (se 0.200" in record["why"]
        assert "record the baseline from more server starts" in record["why"]
        assert record["target_se"] ** 2 < check.noise["fixed_var"]
        target = unrounded_target(check)
        assert record["target_se"] == round(target, 5) != round(target, 6)
    assert judgement.budget_text is not None
    assert judgement.budget_text.startswith(f"noise budget: {primary[0].name}: the reference alone")


# ------------------------------------------------------------------------------ budget_text


def test_budget_text_by_hand() -> None:
    small = {"check": "A", "decidable": True, "starts": 2, "blocks": 5, "serving_minutes": 10.0,
             "this_run": {"starts": 1, "blocks": 4}, "start_level": "prior"}
    large = {"check": "B", "decidable": True, "starts": 3, "blocks": 8, "serving_minutes": 30.5,
             "this_run": {"starts": 2, "blocks": 6}, "start_level": "measured+prior"}
    stuck = {"check": "C", "decidable": False, "why": "too noisy"}
    assert budget.budget_text([small, stuck, large]) == (
        "noise budget: 3 start(s) x 8 blocks (~30.5 serving min) would decide B "
        "(this run 2 x 6; start level measured+prior)")
    assert budget.budget_text([small]) == (
        "noise budget: 2 start(s) x 5 blocks (~10 serving min) would decide A "
        "(this run 1 x 4; start level prior)")
    assert budget.budget_text([stuck, {**stuck, "check": "D", "why": "other"}]) == \
        "noise budget: C: too noisy"
    assert budget.budget_text([]) is None


def test_no_plan_because_of_the_block_level_does_not_blame_the_start_level(
        claim_run: tuple[Judgement, dict[str, Any]]) -> None:
    judgement, run = claim_run
    check = claim_check(judgement)
    assert check.noise is not None
    blocky = copy.copy(check)
    blocky.noise = {**check.noise, "between_var": 0.0, "block_var": 1.0}
    record = budget.plan_for(blocky, run)
    assert record is not None and record["decidable"] is False
    assert "start level alone" not in record["why"]


def test_plan_for_rounds_as_verdict_json_prints_it(
        claim_run: tuple[Judgement, dict[str, Any]]) -> None:
    """target_se to 5 places, serving minutes to 1 (costs whose minutes have more places)."""
    judgement, run = claim_run
    check = claim_check(judgement)
    odd = {**run, "design": {**run["design"], "start_seconds": [121.3, 121.3],
                             "block_seconds": 6.07}}
    plan = budget.plan_for(check, odd)
    assert plan is not None and plan["decidable"] is True
    target = unrounded_target(check)
    assert plan["target_se"] == round(target, 5) != round(target, 6)
    cheapest = budget.cheapest(check.noise, target, *budget.costs(odd))
    assert cheapest is not None
    assert plan["serving_minutes"] == round(cheapest.seconds / 60.0, 1) \
        != round(cheapest.seconds / 60.0, 2)


def test_a_check_with_an_interval_but_no_decision_boundary_has_no_plan(
        claim_run: tuple[Judgement, dict[str, Any]]) -> None:
    judgement, run = claim_run
    unbounded = copy.copy(claim_check(judgement))
    unbounded.floor, unbounded.boundaries = None, None
    assert unbounded.interval is not None and not unbounded.decision_boundaries()
    assert budget.plan_for(unbounded, run) is None


@pytest.mark.parametrize(("between", "fixed", "blamed"), [
    (7.2, 0.5, "start level alone"),     # between/12 + fixed = 1.1 target^2: the start level
    (2.0, 0.0, "block level"),           # between/12 = 0.17 target^2: the blocks are why
    (7.2, 0.0, "block level"),           # without the reference side the start level fits
])
def test_no_plan_blames_the_start_level_only_when_it_alone_exceeds_the_target(
        claim_run: tuple[Judgement, dict[str, Any]], between: float, fixed: float,
        blamed: str) -> None:
    judgement, run = claim_run
    check = claim_check(judgement)
    first = budget.plan_for(check, run)
    assert first is not None
    target_sq = first["target_se"] ** 2
    stuck = copy.copy(check)
    stuck.noise = {**check.noise, "between_var": between * target_sq,
                   "fixed_var": fixed * target_sq, "block_var": 1.0}
    record = budget.plan_for(stuck, run)
    assert record is not None and record["decidable"] is False
    assert blamed in record["why"]
