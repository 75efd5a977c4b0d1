"""``servegate bisect`` without sglang: its price and cap (from ``plan``'s own speed model), its
range (a real git repository), the suite a served step runs, the served step's decision rule
(calibrated through the judge's live-pair estimator), and the search over steps."""

from __future__ import annotations

import json
import math
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from servegate.admission import classify
from servegate.admission.classify import (
    DOES_NOT_IMPORT,
    IDENTICAL,
    INVARIANT_FAILED,
    MOVED,
    Classification,
)
from servegate.commands import bench, bisect, plan

# The judge's verdict checks a served step reads (verdict.json's keys), as a regression, a pass
# and an undecided pair report them.
REGRESSION = {"verdict": "regression", "ratio": 3.1, "interval": [2.4, 4.0], "midpoint": 1.732}
PASS = {"verdict": "pass", "ratio": 1.02, "interval": [0.85, 1.22], "midpoint": 1.732}
UNDECIDED = {"verdict": "inconclusive", "ratio": 1.6, "interval": [1.1, 2.3], "midpoint": 1.732}


def _args(*argv: str) -> object:
    return bisect.build_parser().parse_args(list(argv))


def test_dry_run_prices_a_bisect_of_16_commits_on_mi355x_as_plan_prices_its_pair(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVEGATE_HISTORY", raising=False)
    assert plan.main(["--suite", "premerge", "--runner", "mi355x", "--workflow", "premerge",
                      "--modes", "off", "--skip-accuracy", "--json"]) == 0
    [pair] = json.loads(capsys.readouterr().out)["cells"]
    assert bisect.main(["--dry-run", "--runner", "mi355x", "--json"]) == 0
    price = json.loads(capsys.readouterr().out)
    # the bad end, then log2(16) = 4 candidates: 5 live pairs at most, each plan's pair
    assert price["commits"] == 16 and price["served_pairs_max"] == 5
    assert price["pair"]["gpu_minutes"] == pair["gpu_minutes"] > 0 and pair["live_pair"]
    assert price["gpu_minutes_max"] == pytest.approx(5 * pair["gpu_minutes"], abs=0.1)
    assert bisect.main(["--dry-run", "--runner", "mi355x"]) == 0
    line = capsys.readouterr().out
    assert "16 commits on mi355x" in line and f"= {price['gpu_minutes_max']} GPU-minutes" in line


@pytest.mark.parametrize(("commits", "pairs"), [(1, 1), (2, 2), (3, 3), (16, 5), (17, 6)])
def test_the_price_counts_the_bad_end_and_log2_of_the_commits(commits: int, pairs: int) -> None:
    runner = bisect.Bisect(_args("--dry-run", "--runner", "mi355x"), [])
    assert runner.price(commits)["served_pairs_max"] == pairs


def test_a_bisect_priced_over_its_cap_refuses_before_any_step(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trees = [str(tmp_path / name) for name in "ABCD"]      # never read: refused before
    code = bisect.main(["--trees", *trees, "--runner", "mi355x", "--max-gpu-minutes", "300",
                        "--out", str(tmp_path / "out")])
    assert code == 2
    err = capsys.readouterr().err
    pair = bisect.Bisect(_args("--dry-run", "--runner", "mi355x"), []).pair["gpu_minutes"]
    assert "over --max-gpu-minutes 300" in err and f"at up to {3 * pair:.1f} GPU-minutes" in err
    assert not (tmp_path / "out").exists()


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                           *args], capture_output=True, text=True, check=True).stdout.strip()


def _commit(repo: Path, name: str) -> str:
    (repo / f"{name}.txt").write_text(name)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", f"commit {name}")
    return _git(repo, "rev-parse", "HEAD")


def test_the_range_is_the_first_parent_commits_after_good_up_to_bad(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    a, b = _commit(repo, "a"), _commit(repo, "b")
    _git(repo, "checkout", "-qb", "side")
    side = _commit(repo, "side")
    _git(repo, "checkout", "-q", "main")
    _git(repo, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    merge = _git(repo, "rev-parse", "HEAD")
    c = _commit(repo, "c")
    points = bisect._range(_args("--repo", str(repo), "--good", a[:8], "--bad", "main"))
    assert [ref for ref, _ in points] == [a, b, merge, c]          # the side commit is not
    assert side not in [ref for ref, _ in points]
    assert points[0][1] == a[:8] and points[3][1] == f"{c[:10]} commit c"
    with pytest.raises(bisect.BisectError, match="no commits in between"):
        bisect._range(_args("--repo", str(repo), "--good", "main", "--bad", "main"))
    with pytest.raises(bisect.BisectError, match=r"--repo .*: --good nope or --bad main is not"):
        bisect._range(_args("--repo", str(repo), "--good", "nope", "--bad", "main"))


def test_a_served_step_runs_one_mode_judged_against_the_midpoint_of_the_alarmed_effect() -> None:
    runner = bisect.Bisect(_args("--trees", "a", "b", "--suite", "cpu", "--runner", "cpu",
                                 "--metric", "mean_ttft_ms=3", "--metric",
                                 "mean_e2e_latency_ms=9"), [("a", "a"), ("b", "b")])
    floors = runner.floors()
    assert floors == {"mean_ttft_ms": round(math.sqrt(3) - 1, 4),
                      "mean_e2e_latency_ms": bisect.MAX_FLOOR}     # x9's midpoint x3 capped
    served = runner.served(floors)
    assert served.name == "bisect-cpu" and served.modes == ("off",) and served.gsm8k is None
    assert served.judge.family == ("ab-aggregate",)
    assert served.judge.aggregate_metrics == ("mean_ttft_ms", "mean_e2e_latency_ms")
    assert served.judge.floor("mean_ttft_ms") == floors["mean_ttft_ms"]
    assert served.judge.pair_cv == 0.08                 # the cpu suite's live-pair start level
    assert served.design.looks == (2, 4, 6) and served.design.blocks == 8
    assert served.judge_table["floors"] == floors       # recorded in run.json, re-judged alike


@pytest.mark.parametrize("text", ["mean_ttft_ms=0.8", "output_throughput=1.2", "nope=2"])
def test_a_metric_that_is_not_a_registered_regression_is_refused(
        text: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        _args("--metric", text)
    assert exit_info.value.code == 2
    assert "--metric" in capsys.readouterr().err


@pytest.mark.parametrize(("checks", "verdict"), [
    ({"mean_ttft_ms": REGRESSION, "mean_e2e_latency_ms": PASS}, bisect.BAD),
    ({"mean_ttft_ms": PASS, "mean_e2e_latency_ms": {**PASS, "verdict": "improvement"}},
     bisect.GOOD),
    ({"mean_ttft_ms": PASS, "mean_e2e_latency_ms": UNDECIDED}, bisect.SKIP),
    ({"mean_ttft_ms": {"verdict": "error", "midpoint": 1.7}}, bisect.SKIP),
])
def test_a_served_step_is_bad_on_one_regression_good_when_every_metric_passes(
        checks: dict, verdict: str) -> None:
    got, why = bisect._served_verdict({"metrics": checks, "blocks": 4})
    assert got == verdict
    assert why.endswith("after 4 blocks")
    if checks["mean_ttft_ms"].get("interval"):
        assert "mean_ttft_ms x" in why and "vs x1.732" in why


def test_the_served_rule_calls_the_alarmed_effect_bad_and_no_change_never() -> None:
    """The served step's rule (the judge's live-pair interval against the midpoint, at the
    looks) simulated through the real estimator: a tree like good called bad (false alarm) and
    a tree with the alarmed x3 TTFT called bad (power), at the cpu suite's noise."""
    from servegate.calibration import Noise
    from servegate.calibration.pairs import live_pair_calibration

    runner = bisect.Bisect(_args("--trees", "a", "b", "--suite", "cpu", "--runner", "cpu",
                                 "--metric", "mean_ttft_ms=3"), [("a", "a"), ("b", "b")])
    served = runner.served(runner.floors())
    design = served.design
    found = live_pair_calibration(served.judge, design.starts, design.blocks, 1,
                                  Noise(0.08, 0.065, 0.0), nights=2000, seed=20261204,
                                  looks=design.looks, slowdowns=(2.0,))
    print(f"\nbisect served step, x3 alarmed: like-good called bad {found['aa_false_alarm']}, "
          f"like-bad called bad {found['power_curve']['2.00']}, blocks run "
          f"{found['blocks_run_fraction']}")
    assert found["aa_false_alarm"] <= 0.005
    assert found["power_curve"]["2.00"] >= 0.98
    assert found["blocks_run_fraction"]["2.00"] < 0.8          # the looks stop it early


# ------------------------------------------------------- the search, over given stage outcomes
# The unit tier has no sglang: the two stages are doubles here (what the admission replay and a
# served live pair would report), the search, the pricing and the served step's reading of
# run.json and verdict.json are the real code. tests/real_sglang/serving/test_bisect_e2e.py
# runs the stages for real.

@dataclass
class Stages:
    """Per tree name: its admission verdict and, when served, its pair's verdict and ratio."""

    admission: dict[str, str]
    served: dict[str, tuple[str, float]]
    pairs: list[tuple[str, str]] = field(default_factory=list)      # (head, base) served
    caches: list[int] = field(default_factory=list)     # the replay cache each step was given

    def classify_tree(self, good: Path, candidate: Path, **kw: object) -> Classification:
        self.caches.append(id(kw["cache"]))
        verdict = self.admission.get(Path(candidate).name, IDENTICAL)
        if verdict == DOES_NOT_IMPORT:
            return Classification(verdict, reason=f"--head {candidate}: does not import")
        return Classification(verdict, moved=("s [forced]",) if verdict == MOVED else ())

    def bench(self, argv: list[str], suite: object) -> int:
        head, base = Path(argv[argv.index("--head") + 1]), Path(argv[argv.index("--base") + 1])
        self.pairs.append((head.name, base.name))
        assert "--skip-accuracy" in argv and suite.modes == ("off",)     # type: ignore[attr-defined]
        verdict, ratio = self.served[head.name]
        run_dir = Path(argv[argv.index("--results-dir") + 1]) / "bisect-cpu-cpu-ab-x"
        run_dir.mkdir(parents=True)
        (run_dir / "run.json").write_text(json.dumps(
            {"design": {"blocks": 8}, "sequential": {"stopped_at_blocks": 4}}))
        checks = [{"kind": "ab", "primary": True, "metric": metric, "verdict": verdict,
                   "ratio": ratio, "interval": [ratio / 1.3, ratio * 1.3], "confidence": 0.99}
                  for metric in suite.judge.aggregate_metrics]      # type: ignore[attr-defined]
        (run_dir / "verdict.json").write_text(json.dumps({"checks": checks}))
        if "--profile" in argv:                 # the report writer's attribution.json
            (run_dir / "attribution.json").write_text(json.dumps({"comparisons": [
                {"line": "head-off vs base-off: moved beyond noise: attention x3.0"}]}))
        print(run_dir)
        return 1 if verdict == "regression" else 0


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stages: Stages, *extra: str,
         suite: str = "cpu") -> tuple[int, dict]:
    monkeypatch.setattr(classify, "classify_tree", stages.classify_tree)
    monkeypatch.setattr(bench, "main", stages.bench)
    code = bisect.main(["--trees", *[str(tmp_path / t) for t in "ABCDE"], "--suite", suite,
                        "--out", str(tmp_path / "out"), *extra])
    return code, json.loads((tmp_path / "out" / "bisect.json").read_text())


def _steps(result: dict) -> list[tuple[str, str, str]]:
    return [(s["tree"], s["stage"], s["verdict"]) for s in result["steps"]]


BAD_PAIR, GOOD_PAIR, UNDECIDED_PAIR = ("regression", 3.0), ("pass", 1.0), ("inconclusive", 1.7)


def test_a_tree_that_does_not_import_is_skipped_and_the_culprit_still_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stages = Stages({"C": DOES_NOT_IMPORT}, {"B": BAD_PAIR})
    code, result = _run(tmp_path, monkeypatch, stages, "--runner", "cpu",
                        "--metric", "mean_ttft_ms=3")
    assert code == 0
    assert _steps(result) == [("C", "admission", "skip"), ("B", "serving", "bad")]
    assert result["culprit"]["tree"] == "B" and result["culprit"]["stage"] == "serving"
    assert result["culprit"]["effect"]["mean_ttft_ms"]["ratio"] == 3.0
    assert stages.pairs == [("B", "A")]                         # served against the good tree
    assert result["conclusion"].startswith("first bad commit: B (mean_ttft_ms x3.000")
    assert len(stages.caches) >= 2 and len(set(stages.caches)) == 1   # good end replayed once
    assert result["bad_end_admission"]["verdict"] == IDENTICAL


def test_skipped_trees_beside_the_first_bad_one_leave_it_among_several(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stages = Stages({"C": DOES_NOT_IMPORT, "D": DOES_NOT_IMPORT},
                    {"B": GOOD_PAIR, "E": BAD_PAIR})
    code, result = _run(tmp_path, monkeypatch, stages, "--runner", "cpu",
                        "--metric", "mean_ttft_ms=3")
    assert code == 3 and result["culprit"] is None
    # B good, C and D skipped: the bad end, never served, is served last to confirm it
    assert _steps(result)[-1] == ("E", "serving", "bad")
    assert result["first_bad_among"] == ["C", "D", "E"]


def test_a_bad_end_like_the_good_tree_names_no_culprit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stages = Stages({}, dict.fromkeys("BCDE", GOOD_PAIR))
    code, result = _run(tmp_path, monkeypatch, stages, "--runner", "cpu",
                        "--metric", "mean_ttft_ms=3")
    assert code == 0 and result["culprit"] is None
    assert [t for t, *_ in _steps(result)] == ["C", "D", "E"]
    assert result["conclusion"].startswith("no culprit: the bad end against the good tree")


def test_without_an_effect_the_bad_end_is_served_first_and_its_ratio_is_the_effect(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stages = Stages({}, {"E": ("regression", 2.5), "C": BAD_PAIR, "B": GOOD_PAIR})
    code, result = _run(tmp_path, monkeypatch, stages, "--runner", "cpu",
                        "--metric", "mean_ttft_ms")
    assert code == 0 and result["effects"] == {"mean_ttft_ms": 2.5}
    assert [t for t, *_ in _steps(result)] == ["E", "C", "B"]
    assert result["steps"][0]["served"]["metrics"]["mean_ttft_ms"]["midpoint"] == 1.1  # floor
    assert result["steps"][1]["served"]["metrics"]["mean_ttft_ms"]["midpoint"] == round(
        2.5 ** 0.5, 4)
    assert result["culprit"]["tree"] == "C"
    stages = Stages({}, {"E": GOOD_PAIR})
    code, result = _run(tmp_path / "flat", monkeypatch, stages, "--runner", "cpu")
    assert code == 0 and result["culprit"] is None and len(result["steps"]) == 1
    assert result["conclusion"].startswith("no culprit: the bad end is not shown to regress")


def test_when_the_bad_end_moved_in_admission_no_pair_is_served(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stages = Stages({"C": INVARIANT_FAILED, "D": MOVED, "E": MOVED}, {})
    code, result = _run(tmp_path, monkeypatch, stages, "--runner", "cpu")
    assert code == 0 and result["stage"] == "admission" and not stages.pairs
    assert _steps(result) == [("E", "admission", "bad"), ("C", "admission", "bad"),
                              ("B", "admission", "good")]
    assert result["culprit"]["tree"] == "C" and result["gpu_minutes_spent"] == 0


def test_a_bisect_stops_at_its_cap_when_undecided_pairs_cost_more_than_priced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stages = Stages({}, {"C": UNDECIDED_PAIR, "B": GOOD_PAIR, "D": UNDECIDED_PAIR,
                         "E": BAD_PAIR})
    pair = bisect.Bisect(_args("--dry-run", "--runner", "mi355x"), []).pair["gpu_minutes"]
    cap = 3.5 * pair                    # priced at 3 pairs for 4 commits; a 4th is past it
    code, result = _run(tmp_path, monkeypatch, stages, "--runner", "mi355x", "--metric",
                        "mean_ttft_ms=3", "--max-gpu-minutes", f"{cap:.1f}", suite="premerge")
    assert code == 2 and len(stages.pairs) == 3
    assert result["conclusion"].startswith(f"stopped: --max-gpu-minutes {cap:.1f}")
    assert result["gpu_minutes_spent"] == pytest.approx(3 * pair, abs=0.2)


def test_with_profile_the_culprit_is_served_once_more_against_its_parent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
        ) -> None:
    stages = Stages({}, {"C": BAD_PAIR, "B": GOOD_PAIR})
    code, result = _run(tmp_path, monkeypatch, stages, "--runner", "cpu", "--metric",
                        "mean_ttft_ms=3", "--profile")
    assert code == 0 and result["culprit"]["tree"] == "C"
    assert stages.pairs == [("C", "A"), ("B", "A"), ("C", "B")]     # the last: its parent
    parent = result["culprit"]["against_parent"]
    assert parent["metrics"]["mean_ttft_ms"]["midpoint"] == 1.1     # against 1, the suite's floor
    assert parent["attribution"] == ["head-off vs base-off: moved beyond noise: attention x3.0"]
    assert "attribution against its parent: head-off vs base-off" in capsys.readouterr().out
    assert result["price"]["served_pairs_max"] == 4                  # 1 + log2(4) + the profile
