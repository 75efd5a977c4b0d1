"""The verdict block (servegate.report.headline): headline first, one line per gated check, one
line for the rest, guidance once, the notes that matter; on hand-built judgements."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from judge_runs import make_run
from report_builders import (
    BASE_FP,
    ROUTINE,
    RUN_FP,
    check,
    cpu_like,
    difference,
    judgement,
    ratio,
    undecided,
)

from servegate.commands import compare as command
from servegate.commands import update_baselines as update
from servegate.core.results import load_run
from servegate.report import headline as hl
from servegate.report import print_judgement


def _checks() -> list:
    return [
        check("a pass", "pass", interval=ratio(1.0, 0.98, 1.02)),
        check("a regression", "regression", mode="on", interval=ratio(1.2, 1.15, 1.25)),
        check("another regression", "regression", metric="output_throughput", mode="on",
              concurrency=8, interval=ratio(0.8, 0.75, 0.85)),
        check("an experiment", "regression", kind="experiment", mode="forced",
              reference="off", interval=ratio(1.1, 1.06, 1.14), gate=False, primary=False),
    ]


def test_regression_headline_names_the_first_regression(tmp_path: Path) -> None:
    j = judgement(tmp_path, _checks())
    block = hl.verdict_block(j)
    assert block[0] == ("REGRESSION (exit 1): a regression x1.200 [1.150, 1.250], floor 5 % "
                        "(+1 more regression)")
    assert hl.headline(j) == block[0]
    # one line per gated check, the experiment only in the summary line
    assert block[1] == "  gated: 3 checks (bonferroni over 3, 95 % family-wise):"
    assert block[2:5] == [
        "    PASS         a pass: x1.000 [0.980, 1.020], floor 5 %",
        "    REGRESSION   a regression: x1.200 [1.150, 1.250], floor 5 %",
        "    REGRESSION   another regression: x0.800 [0.750, 0.850], floor 5 %"]
    assert block[5] == ("  not gated: 1 reported (1 regression); beyond their floor: "
                        "an experiment (regression x1.100 [1.060, 1.140])")
    assert len(block) == 6


def test_one_regression_has_no_more_suffix(tmp_path: Path) -> None:
    j = judgement(tmp_path, _checks()[:2])
    assert hl.headline(j) == "REGRESSION (exit 1): a regression x1.200 [1.150, 1.250], floor 5 %"
    leak = check("no-op: on@c4 prefill batches not aligned beyond off", "regression",
                 kind="claim", interval=None, floor=None,
                 reason="aligned on 3/3 vs off 0/3: on aligns more than off; Fisher p=0.05")
    assert hl.headline(judgement(tmp_path, [leak])) == (
        "REGRESSION (exit 1): no-op: on@c4 prefill batches not aligned beyond off: aligned on "
        "3/3 vs off 0/3: on aligns more than off")


def test_pass_and_improvement_headlines_count_the_gated_checks(tmp_path: Path) -> None:
    passes = [check(f"p{i}", "pass", interval=ratio(1.0, 0.98, 1.02)) for i in range(4)]
    better = check("faster", "improvement", interval=ratio(0.8, 0.78, 0.82))
    info = check("info", "inconclusive", interval=ratio(1.0, 0.5, 2.0), gate=False,
                 primary=False)
    assert hl.headline(judgement(tmp_path, [*passes, info])) == (
        "PASS (exit 0): 4 gated checks: 4 pass")
    assert hl.headline(judgement(tmp_path, [*passes, better])) == (
        "IMPROVEMENT (exit 0): 5 gated checks: 1 improvement, 4 pass")
    assert hl.headline(judgement(tmp_path, [passes[0]])) == "PASS (exit 0): 1 gated check: 1 pass"
    assert hl.headline(judgement(tmp_path, [info])) == "PASS (exit 0): no gated checks"


def test_inconclusive_headline_says_which_gated_checks_and_why(tmp_path: Path) -> None:
    one = [check("p", "pass", interval=ratio(1.0, 0.98, 1.02)),
           check("wide", "inconclusive", interval=ratio(1.03, 0.9, 1.2))]
    assert hl.headline(judgement(tmp_path, one)) == (
        "INCONCLUSIVE (exit 0): wide x1.030 [0.900, 1.200] reaches past its floor 5 %; 1 pass")
    strict = judgement(tmp_path, one, strict=True)
    assert hl.headline(strict).startswith("INCONCLUSIVE (exit 3, --strict): wide x1.030")
    no_interval = check("itl", "inconclusive", interval=None,
                        reason="summary-only metric with one repeat per arm; nothing to pool")
    several = [*one, no_interval, check("wide2", "inconclusive", interval=ratio(1.0, 0.8, 1.3))]
    assert hl.headline(judgement(tmp_path, several)) == (
        "INCONCLUSIVE (exit 0): 3 of 4 gated checks undecided (2 intervals reach past their "
        "floors; 1 without an interval: summary-only metric with one repeat per arm); 1 pass")
    assert hl.headline(judgement(tmp_path, [no_interval])) == (
        "INCONCLUSIVE (exit 0): itl: summary-only metric with one repeat per arm")


def test_error_headline_gives_the_first_errors_reason(tmp_path: Path) -> None:
    err = check("inputs readable", "error", kind="integrity", metric="inputs", mode=None,
                interval=None, floor=None, reason="baseline.json: not valid JSON; line 1")
    j = judgement(tmp_path, [err])
    block = hl.verdict_block(j)
    assert block[0] == "ERROR (exit 2): inputs readable: baseline.json: not valid JSON; line 1"
    assert block[2] == "    ERROR        inputs readable: baseline.json: not valid JSON; line 1"
    two = judgement(tmp_path, [err, check("run complete", "error", kind="integrity",
                                          interval=None, reason="incomplete")])
    assert hl.headline(two) == ("ERROR (exit 2): 2 errors, first: inputs readable: "
                                "baseline.json: not valid JSON; line 1")


def test_guidance_once_with_the_largest_need_in_its_own_units(tmp_path: Path) -> None:
    small, large = undecided("small", 1.05, run_var=0.001), undecided("large", 1.08)
    acc = check("acc", "inconclusive", kind="accuracy", metric="accuracy",
                interval=difference(0.01, -0.05, 0.07), floor=0.02)
    info = undecided("reported", 1.2, primary=False)
    j = judgement(tmp_path, [small, large, acc, info])
    lines = hl.verdict_block(j)
    guide = [line for line in lines if "to decide" in line]
    assert len(guide) == 1                      # once, not per check
    assert large.samples_factor > small.samples_factor     # the largest need is named
    # the need in the guidance's own numbers: starts per side for a ratio, questions for GSM8K
    guide_large = large.guidance
    assert (guide_large.unit, guide_large.prompts_factor) == ("starts", None)
    need = f"~{guide_large.need} starts per side (x{guide_large.factor:.1f})"
    assert large.guidance.text.endswith(f"; {need} would decide at this estimate")
    assert guide[0] == (f"  to decide the 3 inconclusive gated checks: {need} for large, more "
                        f"prompts alone cannot; ~295 questions (x2.9) for acc")
    assert "reported" not in guide[0]           # reported checks are not what decides
    single = judgement(tmp_path, [small])
    assert hl.guidance_line(single).startswith("to decide it: ~")


def test_a_check_no_sample_size_decides_is_counted(tmp_path: Path) -> None:
    on_floor = check("on floor", "inconclusive", interval=ratio(1.05, 0.9, 1.2, se=0.05),
                     floor=0.05)
    assert hl.guidance_line(judgement(tmp_path, [on_floor])) == (
        "to decide it: 1 not decidable by more data at this estimate")


def test_noise_budget_replaces_the_repeat_guidance_when_the_judge_sets_one(
        tmp_path: Path) -> None:
    j = judgement(tmp_path, [undecided("u")])
    assert not any(line.strip().startswith("noise budget:") for line in hl.verdict_block(j))
    assert any(line.strip().startswith("to decide") for line in hl.verdict_block(j))
    j.budget_text = "noise budget: 2 start(s) x 8 blocks would decide u"
    block = hl.verdict_block(j)
    assert "  noise budget: 2 start(s) x 8 blocks would decide u" in block
    assert not any(line.strip().startswith("to decide") for line in block)


def test_notes_only_when_they_matter_and_every_note_when_verbose(tmp_path: Path) -> None:
    matter = [f"note {i} that matters" for i in range(4)]
    j = judgement(tmp_path, [check("p", "pass", interval=ratio(1.0, 0.98, 1.02))],
                  notes=ROUTINE + matter[:2])
    assert [line for line in hl.verdict_block(j) if "note:" in line] == [
        "  note: note 0 that matters", "  note: note 1 that matters"]
    many = judgement(tmp_path, [], notes=ROUTINE + matter)
    notes = [line for line in hl.verdict_block(many) if "note:" in line]
    assert notes == ["  note: note 0 that matters", "  note: note 1 that matters",
                     "  note: +2 more (--verbose, verdict.json)"]
    verbose = [line for line in hl.verdict_block(many, verbose=True) if "note:" in line]
    assert verbose == [f"  note: {note}" for note in ROUTINE + matter]


def test_verbose_prints_every_check_in_full(tmp_path: Path) -> None:
    j = cpu_like(tmp_path)
    out = io.StringIO()
    print_judgement(j, out, verbose=True)
    text = out.getvalue()
    for c in j.checks:
        assert f"    {c.describe()}\n" in text
    assert text.splitlines()[0] == hl.headline(j)
    assert "  not gated: 22 reported (1 regression, 18 inconclusive, 1 improvement, 2 pass):" \
        in text.splitlines()


def test_many_gated_checks_are_capped_with_the_undecided_first(tmp_path: Path) -> None:
    checks = [check(f"p{i}", "pass", interval=ratio(1.0, 0.98, 1.02)) for i in range(20)]
    checks.insert(15, check("slow", "regression", interval=ratio(1.2, 1.15, 1.25)))
    lines = hl.gated_lines(judgement(tmp_path, checks))
    assert len(lines) == hl.MAX_GATED_LINES
    assert any("REGRESSION   slow" in line for line in lines)
    assert lines[-1] == "... 10 more gated (10 pass): --verbose lists them"


def test_family_falls_back_to_bonferroni_over_the_gating_checks(tmp_path: Path) -> None:
    old = judgement(tmp_path, _checks(), family_size=5)
    assert hl.family(old) == {"method": "bonferroni", "size": 5,
                              "checks": ["a pass", "a regression", "another regression"]}
    new = cpu_like(tmp_path)
    assert hl.family(new)["method"] == "holm" and hl.family(new)["size"] == 8
    assert [c.name for c in hl.gated_checks(new)] == new.family["checks"]


def test_files_written_fold_into_one_line(tmp_path: Path) -> None:
    run = tmp_path / "results" / "cpu-cpu-1"
    paths = [run / "verdict.json", run / "summary.md", run / "junit.xml",
             run / "plots" / "a.png", run / "plots" / "b.png", tmp_path / "elsewhere.md"]
    assert hl.files_lines(paths, run, width=1000) == [
        f"wrote into {run}: verdict.json, summary.md, junit.xml, plots/ (2), "
        f"{tmp_path / 'elsewhere.md'}"]
    two = hl.files_lines(paths, run, width=40)
    assert two[0] == f"wrote into {run}:" and two[1].startswith("  verdict.json, ")
    assert hl.files_lines([], run) == []


def test_a_cpu_like_compare_prints_at_most_25_lines(tmp_path: Path, monkeypatch,
                                                    capsys) -> None:
    run_dir = make_run(tmp_path / "run", suite="cpu", modes=("off", "on", "forced"))
    run = dict(load_run(run_dir))
    run["fingerprint"] = RUN_FP
    important = ["no baseline points for forced@c8 (new in this run)",
                 "prior decided: median_tpot_ms's interval is the assumed run-to-run CV's"]
    j = cpu_like(run_dir, run=run, baseline={"provenance": {"fingerprint": BASE_FP}},
                 notes=important)
    assert len(j.checks) == 30 and len(hl.gated_checks(j)) == 8
    monkeypatch.setattr(command, "judge", lambda *a, **k: j)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert command.main([str(run_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) <= 25, "\n".join(lines)
    assert lines[0].startswith("INCONCLUSIVE (exit 0): 6 of 8 gated checks undecided")
    assert lines[1] == ('  reference: baseline from another machine: host vm -> ci-7, cpu '
                        '"AMD EPYC" -> "Intel Xeon Gold 6338", sglang 0.5.23 -> 0.5.24')
    start = lines.index("  gated: 8 checks (holm over 8, 95 % family-wise):")
    assert [line.split()[0] for line in lines[start + 1:start + 9]] == [
        "INCONCLUSIVE", "PASS", "INCONCLUSIVE", "INCONCLUSIVE", "INCONCLUSIVE", "INCONCLUSIVE",
        "PASS", "INCONCLUSIVE"]                                     # one line per gated check
    assert lines[start + 9].startswith("  not gated: 22 reported (1 regression, 18 "
                                       "inconclusive, 1 improvement, 2 pass); beyond their "
                                       "floor: off@c2 mean_ttft_ms vs baseline #0 (regression")
    assert [line for line in lines if "note:" in line] == [f"  note: {n}" for n in important]
    files = " ".join(line.strip() for line in lines[lines.index(next(
        line for line in lines if line.startswith("  wrote into "))):])
    assert files.startswith(f"wrote into {run_dir}: verdict.json, summary.md, junit.xml, "
                            "pytest_benchmark.json, plots/ (")
    assert sum("would decide" in line or "to decide" in line for line in lines) == 1
    # everything is still in verdict.json
    doc = json.loads((run_dir / "verdict.json").read_text())
    assert len(doc["checks"]) == 30 and doc["notes"] == j.notes
    assert doc["family"]["checks"] == [c.name for c in hl.gated_checks(j)]


def test_the_judges_own_cpu_run_stays_short(tmp_path: Path, capsys) -> None:
    """The real judge on a synthetic cpu-suite run (off/on/forced, 2 concurrencies, GSM8K):
    whatever the family, the printed block and the files line stay within 25 lines."""
    acc = {"off": {"n": 16, "correct": 8}, "on": {"n": 16, "correct": 8},
           "forced": {"n": 16, "correct": 9}}
    kw = dict(suite="cpu", modes=("off", "on", "forced"), n_requests=10, accuracy=acc)
    base = make_run(tmp_path / "base", seed=1, **kw)
    assert update.update(base, root=tmp_path / "baselines") == 0
    capsys.readouterr()
    cur = make_run(tmp_path / "cur", seed=2, **kw)
    file = tmp_path / "baselines" / "cpu" / "smollm2-135m" / "cpu.json"
    code = command.main([str(cur), "--baseline", str(file), "--no-plots"])
    lines = capsys.readouterr().out.splitlines()
    assert code in (0, 1) and len(lines) <= 25, "\n".join(lines)
    assert lines[0].split(" (exit ")[0] in ("PASS", "IMPROVEMENT", "INCONCLUSIVE", "REGRESSION")
    verbose = command.main([str(cur), "--baseline", str(file), "--no-plots", "--verbose"])
    assert verbose == code
    text = capsys.readouterr().out
    doc = json.loads((cur / "verdict.json").read_text())
    for entry in doc["checks"]:
        assert entry["name"] in text
    for note in doc["notes"]:
        assert f"note: {note}" in text


@pytest.mark.parametrize(("floor", "text"), [(0.05, "floor 5 %"), (0.025, "floor 2.5 %"),
                                             (None, "")])
def test_floor_text(floor: float | None, text: str) -> None:
    assert hl.floor_text(check("c", "pass", interval=ratio(1, 0.9, 1.1), floor=floor)) == text


def test_effect_and_floor_of_a_difference_and_a_margin() -> None:
    acc = check("acc", "pass", metric="accuracy", interval=difference(-0.004, -0.019, 0.011),
                floor=0.01)
    assert hl.measurement(acc) == "-0.4 pp [-1.9, +1.1], floor 1 pp"
    tost = check("tost", "pass", interval=ratio(1.0, 0.95, 1.05), floor=0.15)
    tost.boundaries = (1 / 1.15, 1.15)
    assert hl.floor_text(tost) == "margin ±15 %"
    long = check("claim", "pass", interval=None, reason="x" * 120 + "; more")
    assert hl.measurement(long) == "x" * 87 + "..."
