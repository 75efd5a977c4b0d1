"""Nightly alerts (issue 40): one GitHub issue per regressed series, opened, commented, closed.

The acceptance runs the nightly workflow's own alert step (its `run:` script, read from
ci/workflows/nightly.yml) night after night on a synthetic history, against a recording
stand-in for `gh` (tests/unit/history/gh_standin.py: GitHub cannot be reached here) that keeps
the repository's issues between nights. The one-night check's verdict.json comes from the real
judge (`servegate compare --baseline history:5`), as the nightly judge job writes it.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from gh_standin import calls, install, issues
from repo_files import REPO_ROOT, SRC
from synthetic_nights import night_run

from servegate.commands import compare
from servegate.history.alert_issues import Gh, Issue, apply, plan
from servegate.history.alerts import (
    MAX_LINES,
    Alert,
    Links,
    Range,
    bisect_request,
    marker_key,
    night_alerts,
    render,
)
from servegate.history.cli import main
from servegate.history.store import HistoryError

yaml = pytest.importorskip("yaml", reason="PyYAML is in the `test` extra: pip install -e .[test]")

REPO = "acme/servegate"
IDENTITY = "cpu/smollm2-135m/nightly-synthetic"
MUTATING = {"create", "comment", "edit", "reopen", "close"}


def alert_step() -> dict[str, Any]:
    steps = yaml.safe_load((REPO_ROOT / "ci" / "workflows" / "nightly.yml").read_text())[
        "jobs"]["judge"]["steps"]
    [step] = [s for s in steps if s.get("name") == "Open, update or close the alert issues"]
    return step


class Nightly:
    """A synthetic nightly on one CPU cell: each night's run folder gathered as the judge job
    gathers it (renamed after its cell), judged or not, added to the store, then the alert
    step run as the workflow runs it."""

    def __init__(self, tmp_path: Path, slow: Any, seed: int = 7) -> None:
        self.tmp, self.slow, self.seed = tmp_path, slow, seed
        self.store, self.work, self.gh = tmp_path / "store", tmp_path / "work", tmp_path / "gh"
        self.script = tmp_path / "alert-step.sh"
        self.script.write_text(alert_step()["run"])
        self.summary = tmp_path / "summary.md"
        self.env = {**os.environ, **install(tmp_path / "bin", self.gh), "PYTHONPATH": str(SRC),
                    "SERVEGATE_HISTORY": str(self.store), "GITHUB_REPOSITORY": REPO,
                    "GITHUB_REPOSITORY_OWNER": "acme", "HISTORY_URL": "",
                    "GITHUB_STEP_SUMMARY": str(self.summary)}
        # the workflow step runs outside the checkout: under mutmut it runs the unmutated code
        self.env.pop("MUTANT_UNDER_TEST", None)

    def night(self, night: int, *, judge: bool = False) -> Path:
        run_dir = night_run(self.tmp / "runs", night, self.seed, factor=1.3, slow=self.slow)
        run = json.loads((run_dir / "run.json").read_text())
        run["run_id"] = run_dir.name                    # bench records its folder's name
        (run_dir / "run.json").write_text(json.dumps(run))
        shutil.rmtree(self.work / "gathered", ignore_errors=True)
        cell = shutil.copytree(run_dir, self.work / "gathered" / "nightly-run-gate-cpu-cell")
        if judge:                                       # ci/lib/judge-runs.sh's order
            compare.main([str(cell), "--baseline", "history:5", "--history-store",
                          str(self.store), "--no-plots"])
        assert main(["add", str(cell), "--store", str(self.store)], out=io.StringIO()) == 0
        return cell

    def alert_step(self, night: int) -> str:
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(self.script)],
            cwd=self.work, capture_output=True, text=True, timeout=300,
            env={**self.env, "RUN_URL": f"https://github.com/{REPO}/actions/runs/{night}"})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    def issues(self) -> dict[str, dict[str, Any]]:
        found = [(marker_key(i["body"]), i) for i in issues(self.gh)]
        keys = [key for key, _ in found]
        assert len(keys) == len(set(keys)), f"two issues for one series: {keys}"
        return {str(key): issue for key, issue in found}

    def mutations(self) -> list[list[str]]:
        return [c["argv"] for c in calls(self.gh) if c["argv"][1] in MUTATING]


def test_alert_step_opens_on_the_confirmed_night_comments_closes_and_reopens_the_same_issue(
        tmp_path: Path) -> None:
    """`off` 30 % slower on nights 10-12 and again from 15 (no one-night check: the change
    points alone): nothing on the step night (suspected), one issue per regressed series on the
    night the step is confirmed, a comment on the next, held while the way back is suspected,
    closed once it holds, reopened (the same issue) when the step comes back."""
    nightly = Nightly(tmp_path, slow=lambda n: 10 <= n < 13 or n >= 15)
    for night in range(10):
        nightly.night(night)
    states: dict[int, dict[str, dict[str, Any]]] = {}
    outs: dict[int, str] = {}
    for night in range(10, 17):
        nightly.night(night)
        outs[night] = nightly.alert_step(night)
        states[night] = {key: {"state": i["state"], "comments": len(i["comments"]),
                               "number": i["number"]} for key, i in nightly.issues().items()}
        if night == 10:
            assert states[10] == {} and nightly.mutations() == [], outs[10]

    opened = states[11]
    assert f"{IDENTITY} off mean_ttft_ms" in opened and f"{IDENTITY} off median_tpot_ms" in opened
    assert not [key for key in opened if " on " in key], "the `on` mode did not move"
    assert all(s == {**s, "state": "OPEN", "comments": 0} for s in opened.values())
    assert "opened https://github.com/acme/servegate/issues/" in outs[11]
    assert states[12] == {k: {**s, "comments": 1} for k, s in opened.items()}
    assert states[13] == {k: {**s, "comments": 2} for k, s in opened.items()}   # held
    assert states[14] == {k: {**s, "comments": 3, "state": "CLOSED"} for k, s in opened.items()}
    assert states[15] == states[14]                                 # the step's first night back
    assert states[16] == {k: {**s, "comments": 4, "state": "OPEN"} for k, s in opened.items()}
    assert len(issues(nightly.gh)) == len(opened)

    ttft = nightly.issues()[f"{IDENTITY} off mean_ttft_ms"]
    first = next(c["stdin"] for c in calls(nightly.gh) if c["argv"][:2] == ["issue", "create"]
                 and f"{IDENTITY} off mean_ttft_ms" in c["stdin"])
    assert len(first.splitlines()) <= MAX_LINES
    assert "confirmed tonight" in first and "from night `nightly-cpu-7-010`" in first
    assert "- sglang `sg0009` -> `sg0010`" in first                # the step's own two nights
    assert "actions/runs/11)" in first
    assert ("(https://acme.github.io/servegate/series/cpu__smollm2-135m__nightly-synthetic__off-"
            in first)
    assert bisect_request(first) == {"good": "sg0009", "bad": "sg0010", "runner_class": "cpu",
                                     "suite": "nightly-synthetic"}
    assert "back toward the old level" in ttft["comments"][1]       # night 13: suspected way back
    assert "Recovered on night `nightly-cpu-7-014`" in ttft["comments"][2]
    assert "- sglang `sg0014` -> `sg0015`" in ttft["body"]          # refreshed on reopening
    for argv in nightly.mutations():
        assert argv[-2:] == ["--repo", REPO], argv
    assert "reopened #" in nightly.summary.read_text()


def test_a_red_one_night_check_opens_and_a_one_off_night_closes(tmp_path: Path) -> None:
    """The real judge's verdict.json: night 10 judged 30 % slower against history:5 opens the
    series' issue with the check's interval the same night; night 11 back to normal makes night
    10 a one-off (no change point), so the issue is closed."""
    nightly = Nightly(tmp_path, slow=lambda n: n == 10)
    for night in range(10):
        nightly.night(night)
    cell = nightly.night(10, judge=True)
    checks = json.loads((cell / "verdict.json").read_text())["checks"]
    assert any(c["verdict"] == "regression" and c["mode"] == "off" for c in checks)
    nightly.alert_step(10)
    opened = nightly.issues()
    ttft = opened[f"{IDENTITY} off mean_ttft_ms"]
    assert ttft["state"] == "OPEN"
    intervals = re.findall(r"^- one-night check off\S* mean_ttft_ms .*: ratio (\d\.\d+) "
                           r"\[(\d\.\d+), (\d\.\d+)\] \(.*\); baseline history:5", ttft["body"], re.M)
    assert intervals and all(1 < float(low) < float(ratio) < float(high)
                             for ratio, low, high in intervals), ttft["body"]
    assert "- sglang `sg0009` -> `sg0010`" in ttft["body"] and "[since the last night]" in \
        ttft["body"]
    nightly.night(11, judge=True)
    nightly.alert_step(11)
    after = nightly.issues()
    assert set(after) == set(opened)
    assert {i["state"] for i in after.values()} == {"CLOSED"}


def test_the_sustained_rule_raises_the_night_it_flags(tmp_path: Path) -> None:
    """19 nights, `off` 15 % slower on the last: the change point is only suspected, the
    sustained rule (history health, 14 reference nights) flags the night and raises the
    series, with tonight and the night before as the range; `on` raises nothing."""
    store = tmp_path / "store"
    for night in range(19):
        cell = night_run(tmp_path / "runs", night, 1, factor=1.15, slow=lambda n: n >= 18)
        assert main(["add", str(cell), "--store", str(store)], out=io.StringIO()) == 0
    alerts, judged, notes = night_alerts(store, [cell])
    assert judged == {IDENTITY: "nightly-cpu-1-018"} and notes == []
    ttft = alerts[f"{IDENTITY} off mean_ttft_ms"]
    assert [line.split(":")[0] for line in ttft.raised] == ["sustained rule"]
    assert "shift flagged tonight" in ttft.raised[0] and ttft.held == []
    assert "- sglang `sg0017` -> `sg0018` [since the last night]" in render(ttft, Links())
    assert not [a for key, a in alerts.items() if " on " in key and a.raised]


# ------------------------------------------------------------------ the decisions


def _alert(key: str = f"{IDENTITY} off mean_ttft_ms", *, raised: bool = False,
           held: bool = False) -> Alert:
    alert = Alert(key, "night-5", "2026-12-05T02:00:00+00:00")
    if raised:
        alert.raised.append("one-night check off@c2 mean_ttft_ms: ratio 1.300 [1.2, 1.4]")
    if held:
        alert.held.append("change point off@c2 mean_ttft_ms: 100 -> 130, 4 nights")
    return alert


def _plan(alerts: list[Alert], issues_: list[Issue], judged: tuple[str, ...] = (IDENTITY,)
          ) -> list[tuple[str, int | None]]:
    actions = plan({a.key: a for a in alerts}, dict.fromkeys(judged, "night-5"), issues_,
                   Links())
    return [(a.verb, a.number) for a in actions]


def test_held_alone_never_opens_nor_reopens_an_issue_a_person_closed() -> None:
    key = f"{IDENTITY} off mean_ttft_ms"
    assert _plan([_alert(held=True)], []) == []
    assert _plan([_alert(held=True)], [Issue(3, False, key)]) == []
    assert _plan([_alert(held=True)], [Issue(3, True, key)]) == [("update", 3)]
    assert _plan([_alert(raised=True)], [Issue(3, False, key)]) == [("reopen", 3)]
    assert _plan([_alert(raised=True)], []) == [("open", None)]


def test_only_series_judged_tonight_are_closed() -> None:
    other = "mi355x/glm/nightly off mean_ttft_ms"
    mine = f"{IDENTITY} on median_tpot_ms"
    found = [Issue(1, True, other), Issue(2, True, mine)]
    assert _plan([], found) == [("close", 2)]
    assert _plan([], found, judged=()) == []


def test_one_issue_per_series_the_oldest_open_one_else_the_newest_closed() -> None:
    key = f"{IDENTITY} off mean_ttft_ms"
    assert _plan([_alert(raised=True)], [Issue(9, True, key), Issue(4, True, key),
                                         Issue(2, False, key)]) == [("update", 4)]
    assert _plan([_alert(raised=True)], [Issue(2, False, key), Issue(7, False, key)]) == \
        [("reopen", 7)]


def test_body_fits_forty_lines_however_many_series_moved() -> None:
    alert = _alert()
    alert.raised += [f"change point off@c{c} mean_ttft_ms: 100 -> 130 (x1.300), confirmed "
                     "tonight" for c in range(1, 41)]
    alert.ranges += [Range(f"change point off@c{c}", (f"good{c}", f"bad{c}"), ("0.5.22", "0.5.23"),
                           ("aiter 0.1.9 -> 0.1.10",)) for c in range(5)]
    alert.attribution = [f"on vs off: moved beyond noise: GEMM x{c}" for c in range(6)]
    alert.page = "series/x.html"
    body = render(alert, Links("https://github.com/a/b/actions/runs/1", "https://a.github.io/b"))
    lines = body.splitlines()
    assert len(lines) <= MAX_LINES, body
    assert marker_key(body) == alert.key
    [hidden] = re.findall(r"^- \.\.\. and (\d+) more \(`servegate history report`", body, re.M)
    assert sum(line.startswith("- change point") for line in lines) + int(hidden) == 40
    assert "[history page](https://a.github.io/b/series/x.html)" in body
    assert "aiter 0.1.9 -> 0.1.10" in body
    assert bisect_request(body)["good"] == "good0"
    assert sum(line.startswith("- sglang") for line in lines) == 3
    assert sum("GEMM" in line for line in lines) == 3


def test_a_range_with_the_same_sglang_on_both_nights_offers_no_bisect() -> None:
    alert = _alert(raised=True)
    alert.ranges.append(Range("since the last night", ("abc", "abc"), ("0.5.23", "0.5.23"),
                              ("aiter 0.1.9 -> 0.1.10",)))
    body = render(alert, Links())
    assert "- sglang unchanged (`abc`); also changed: aiter 0.1.9 -> 0.1.10" in body
    assert "servegate-bisect" not in body


# ------------------------------------------------------------------ the bisect's input


@pytest.mark.parametrize("bad", ["$(touch x)", "a b", "-rf", ""])
def test_bisect_range_refuses_what_is_not_a_ref(bad: str) -> None:
    fields = {"good": "abc", "bad": bad, "runner_class": "cpu", "suite": "cpu"}
    body = f"<!-- servegate-bisect: {json.dumps(fields)} -->"
    with pytest.raises(HistoryError, match="'bad' must be a ref"):
        bisect_request(body)


def test_bisect_range_cli_prints_github_output_lines(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    alert = _alert(raised=True)
    alert.ranges.append(Range("change point off@c2", ("a1b2", "c3d4"), (None, None), ()))
    body = tmp_path / "body.md"
    body.write_text(render(alert, Links()))
    out = io.StringIO()
    assert main(["bisect-range", "--body-file", str(body)], out=out) == 0
    assert out.getvalue() == ("good=a1b2\nbad=c3d4\nrunner_class=cpu\n"
                              "suite=nightly-synthetic\n")
    body.write_text("an issue without a range")
    assert main(["bisect-range", "--body-file", str(body)], out=io.StringIO()) == 2
    assert "no `<!-- servegate-bisect" in capsys.readouterr().err


# ------------------------------------------------------------------ gh


def test_gh_missing_or_refusing_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(HistoryError, match="not found on PATH"):
        Gh(executable=str(tmp_path / "no-gh"))("issue", "list")
    for name, value in install(tmp_path / "bin", tmp_path / "gh").items():
        monkeypatch.setenv(name, value)
    action = plan({}, {IDENTITY: "night-5"}, [Issue(99, True, f"{IDENTITY} off x")], Links())
    with pytest.raises(HistoryError, match=r"gh issue close failed \(exit 1\): .*not found"):
        apply(action, Gh(REPO))


def test_dry_run_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nightly = Nightly(tmp_path, slow=lambda n: n >= 4)
    for night in range(6):
        cell = nightly.night(night)
    for name in ("PATH", "GH_STANDIN_DIR"):
        monkeypatch.setenv(name, nightly.env[name])
    out = io.StringIO()
    assert main(["alerts", "--store", str(nightly.store), "--run", str(cell), "--repo", REPO,
                 "--dry-run"], out=out) == 0
    assert f"would open a new issue for {IDENTITY} off mean_ttft_ms" in out.getvalue()
    assert [c["argv"][:2] for c in calls(nightly.gh)] == [["issue", "list"]]
