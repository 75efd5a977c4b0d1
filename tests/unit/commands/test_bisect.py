"""``servegate bisect`` without sglang: its price and cap (from ``plan``'s own speed model), its
range (a real git repository), the suite a served step runs, the served step's decision rule
(calibrated through the judge's live-pair estimator), and the search over steps."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from servegate.commands import bisect, plan

# The judge's verdict checks a served step reads (verdict.json's keys), as a regression, a pass
# and an undecided pair report them.
REGRESSION = {"verdict": "regression", "ratio": 3.1, "interval": [2.4, 4.0], "midpoint": 1.732}
PASS = {"verdict": "pass", "ratio": 1.02, "interval": [0.85, 1.22], "midpoint": 1.732}
UNDECIDED = {"verdict": "inconclusive", "ratio": 1.6, "interval": [1.1, 2.3], "midpoint": 1.732}


def _args(*argv: str) -> object:
    return bisect._parser().parse_args(list(argv))


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
    assert "over --max-gpu-minutes 300" in err and "at up to 613.2 GPU-minutes" in err
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
