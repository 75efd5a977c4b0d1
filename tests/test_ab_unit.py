"""Head vs base: the interleaved plan, and the judge pairing head with base inside one run."""

from __future__ import annotations

import json
from pathlib import Path

from judge_runs import make_run

from servegate import compare
from servegate.judge.evaluate import judge
from servegate.plan import build_plan


def test_plan_interleaves_trees_per_mode_with_the_same_prompts() -> None:
    slots = build_plan(["off", "on"], [2, 4], [8, 12], repeats=4, seed=7, arms=("base", "head"))
    assert len(slots) == 4 * 2 * 2
    for repeat in range(4):
        mine = [s for s in slots if s.repeat == repeat]
        for i in range(0, len(mine), 2):       # each mode's two servers run back to back
            assert mine[i].mode == mine[i + 1].mode
            assert {mine[i].arm, mine[i + 1].arm} == {"base", "head"}
            seeds = [[p.seed for p in s.points] for s in (mine[i], mine[i + 1])]
            assert seeds[0] == seeds[1]         # same prompts: paired point by point
    first = [s.arm for s in slots if s.repeat == 0]
    assert first == ["base", "head"] * 2
    later = [(s.mode, s.arm) for s in slots if s.repeat > 0 and slots.index(s) % 2 == 0]
    assert {arm for _, arm in later} == {"base", "head"}    # the first arm varies (seeded)
    again = build_plan(["off", "on"], [2, 4], [8, 12], repeats=4, seed=7, arms=("base", "head"))
    assert [(s.arm, s.mode) for s in again] == [(s.arm, s.mode) for s in slots]
    assert [s.label for s in slots[:2]] == ["base-off", "head-off"]
    assert [p.order for s in slots for p in s.points] == list(range(4 * 2 * 2 * 2))


def ab_run(tmp_path: Path, head_factor: float, *, seed: int = 1,
           drop_head_point: bool = False) -> Path:
    """One head-vs-base run.json, as bench writes it: points tagged with their arm."""
    base = json.loads((make_run(tmp_path / "b", modes=("off", "on"), repeats=3, seed=seed,
                                run_cv=0.01) / "run.json").read_text())
    head = json.loads((make_run(tmp_path / "h", modes=("off", "on"), repeats=3, seed=seed + 50,
                                run_cv=0.01, effect=lambda m, c: head_factor)
                       / "run.json").read_text())
    for point in base["points"]:
        point["arm"] = "base"
    for point in head["points"]:
        point["arm"] = "head"
    if drop_head_point:
        head["points"] = [p for p in head["points"] if (p["mode"], p["concurrency"]) != ("on", 4)]
    run = {**base, "points": base["points"] + head["points"], "run_id": "ab",
           "ab": {"base": {"path": "/t/base", "version": "0.5.23"},
                  "head": {"path": "/t/head", "version": "0.5.23"}}}
    run_dir = tmp_path / "ab"
    run_dir.mkdir()
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


def test_a_a_has_no_regression_and_claims_use_the_head_arm(tmp_path: Path) -> None:
    judgement = judge(ab_run(tmp_path, 1.0), baselines_root=tmp_path / "none")
    ab = [c for c in judgement.checks if c.kind == "ab"]
    assert len(ab) == 2 * 2 * len(judgement.config.metrics)     # modes x concurrencies x metrics
    assert all(c.reference == "base" and "head vs base" in c.name for c in ab)
    assert not [c for c in judgement.checks if c.verdict in ("regression", "error")]
    assert not [c for c in judgement.checks if c.kind == "baseline"]   # not vs a stored one
    claims = [c for c in judgement.checks if c.kind == "claim"]
    assert claims, "the head arm's no-op claims must be judged"
    assert any("head vs base" in note for note in judgement.notes)


def test_slower_head_is_a_regression_naming_the_metrics(tmp_path: Path,
                                                        capsys) -> None:
    run_dir = ab_run(tmp_path, 1.5)
    assert compare.main([str(run_dir), "--no-plots"]) == 1
    out = capsys.readouterr().out
    assert "mean_ttft_ms head vs base" in out and "REGRESSION" in out
    verdict = json.loads((run_dir / "verdict.json").read_text())
    slowed = {c["metric"] for c in verdict["checks"] if c["verdict"] == "regression"}
    assert {"mean_ttft_ms", "median_tpot_ms"} <= slowed


def test_a_point_missing_from_one_tree_is_an_error(tmp_path: Path) -> None:
    judgement = judge(ab_run(tmp_path, 1.0, drop_head_point=True))
    errors = [c for c in judgement.checks if c.verdict == "error"]
    assert [c.name for c in errors] == ["on@c4 measured on both trees"]
    assert "missing from the head arm" in errors[0].reason
    assert judgement.exit_code == 2
