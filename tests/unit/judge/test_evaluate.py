"""Every way `judge` can be handed its reference, and every way that can fail
(servegate.judge.evaluate, issue 15): a baseline document built by the caller (named by its
source run), an explicit baseline file, the stored-baseline lookup, and head vs base. Each
failure is one integrity error that keeps the run folder, the loaded run and the strictness, and
names the file and the run it is about."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from judge_runs import make_run, write_gsm8k_records
from unit.judge.block_runs import judge_table, write_block_run

from servegate.config.judge import JudgeConfig, JudgeConfigError
from servegate.judge.baselines import baseline_from_run
from servegate.judge.evaluate import judge, judge_config_for_run
from servegate.judge.stats import run_seed
from servegate.measure.interference import interference_note


def _raw(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "run.json").read_text())


def _rewrite(run_dir: Path, **changes: Any) -> Path:
    raw = {**_raw(run_dir), **changes}
    (run_dir / "run.json").write_text(json.dumps(raw))
    return run_dir


def _doc(tmp_path: Path, source: str = "results/night-7", **changes: Any) -> dict[str, Any]:
    """A baseline document from another run of the same suite, recorded as coming from `source`."""
    ref = make_run(tmp_path / "ref", seed=3)
    doc = baseline_from_run(_raw(ref), Path(source))   # type: ignore[arg-type]
    doc.update(changes)
    return doc


def _only_error(judgement: Any, run_dir: Path, strict: bool) -> str:
    (check,) = judgement.checks
    assert (check.kind, check.name, check.metric, check.verdict) == (
        "integrity", "inputs readable", "inputs", "error")
    assert judgement.run_dir == run_dir
    assert judgement.run is not None and judgement.run["suite"] == "synthetic"
    assert judgement.strict is strict
    return check.reason


# ------------------------------------------------------------- a baseline document from the caller

def test_a_given_document_is_named_by_its_source_run(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    doc = _doc(tmp_path)
    judgement = judge(run_dir, baseline_doc=doc, baselines_root=tmp_path / "none")
    assert judgement.baseline_file == Path("results/night-7")
    assert judgement.baseline is not None and judgement.baseline["suite"] == "synthetic"
    # make_run's default plan: modes off/on x concurrencies 2/4 = 4 points
    assert "baseline results/night-7: 4 points" in judgement.notes
    assert any(c.kind == "baseline" and c.reference == "baseline" for c in judgement.checks)
    assert judgement.strict is False                       # the default is not strict


def test_a_given_document_without_provenance_is_named_given(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    doc = _doc(tmp_path)
    del doc["provenance"]
    reason = _only_error(judge(run_dir, baseline_doc=doc, strict=True,
                               baselines_root=tmp_path / "none"), run_dir, True)
    assert reason == "<given>: provenance must be an object, got None"
    doc["provenance"] = {"created_at": "2026-11-30T00:00:00+00:00"}
    reason = _only_error(judge(run_dir, baseline_doc=doc, baselines_root=tmp_path / "none"),
                         run_dir, False)
    assert reason == "<given>: provenance.source_run must be a string, got None"


def test_a_malformed_given_document_names_its_source_run(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    doc = _doc(tmp_path, points="none")
    reason = _only_error(judge(run_dir, baseline_doc=doc, strict=True,
                               baselines_root=tmp_path / "none"), run_dir, True)
    assert reason == "results/night-7: points must be a list, got 'none'"


def test_a_given_document_of_another_suite_names_both_sides(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    doc = _doc(tmp_path, suite="nightly")
    reason = _only_error(judge(run_dir, baseline_doc=doc, baselines_root=tmp_path / "none"),
                         run_dir, False)
    assert reason == ("baseline does not belong to this run: suite 'nightly' (baseline "
                      f"results/night-7) vs 'synthetic' (run {run_dir})")


# ------------------------------------------------------------------ an explicit baseline file

def test_an_explicit_file_that_is_missing_is_an_error_not_a_skip(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    missing = tmp_path / "nowhere.json"
    reason = _only_error(judge(run_dir, baseline_file=missing, strict=True), run_dir, True)
    assert reason == f"{missing}: baseline file not found"


def test_an_explicit_file_of_another_suite_names_file_and_run(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    stored = tmp_path / "other.json"
    stored.write_text(json.dumps(_doc(tmp_path, suite="nightly")))
    reason = _only_error(judge(run_dir, baseline_file=stored), run_dir, False)
    assert reason == ("baseline does not belong to this run: suite 'nightly' (baseline "
                      f"{stored}) vs 'synthetic' (run {run_dir})")


def test_an_explicit_file_that_matches_is_the_judged_reference(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    stored = tmp_path / "good.json"
    stored.write_text(json.dumps(_doc(tmp_path)))
    judgement = judge(run_dir, baseline_file=stored, strict=True)
    assert judgement.baseline_file == stored and judgement.strict is True
    assert not [c for c in judgement.checks if c.kind == "integrity"]


# ------------------------------------------------------------------- the stored-baseline lookup

def test_a_run_whose_identity_cannot_name_a_file_is_an_error(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run", model_profile="../escape")
    judgement = judge(run_dir, strict=True, baselines_root=tmp_path)
    (check,) = judgement.checks
    assert check.reason == "run.json: model_profile '../escape' cannot name a baseline file"
    assert judgement.run_dir == run_dir and judgement.strict is True
    assert judgement.run is not None and judgement.run["model_profile"] == "../escape"


def test_a_stored_file_that_is_unreadable_is_an_error(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    stored = tmp_path / "cpu" / "smollm2-135m" / "synthetic.json"
    stored.parent.mkdir(parents=True)
    stored.write_text("{not json")
    reason = _only_error(judge(run_dir, baselines_root=tmp_path, strict=True), run_dir, True)
    assert reason.startswith(f"{stored}: not valid JSON (")


def test_a_bad_judge_table_error_keeps_run_folder_and_strictness(tmp_path: Path) -> None:
    run_dir = _rewrite(make_run(tmp_path / "run"), judge_table={"confidence": "high"})
    judgement = judge(run_dir, strict=True, baselines_root=tmp_path)
    (check,) = judgement.checks
    assert judgement.run_dir == run_dir and judgement.strict is True
    assert judgement.run is not None and "confidence" in check.reason


# ------------------------------------------------------------------------------ run integrity

def test_an_empty_run_is_one_integrity_error_per_cause(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run", concurrencies=())
    checks = judge(run_dir, baselines_root=tmp_path).checks
    assert [(c.kind, c.name, c.metric, c.verdict, c.reason) for c in checks] == [
        ("integrity", "run has points", "points", "error", "run.json has no points")]


def test_a_run_that_never_said_it_completed_is_incomplete(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    raw = _raw(run_dir)
    del raw["complete"]
    (run_dir / "run.json").write_text(json.dumps(raw))
    check = judge(run_dir, baselines_root=tmp_path).checks[0]
    assert (check.kind, check.name, check.metric, check.verdict, check.reason) == (
        "integrity", "run complete", "complete", "error",
        "run is incomplete: not every planned point finished")


# ------------------------------------------------------------------------------- head vs base

def _ab_run(tmp_path: Path) -> Path:
    """Head and base measured in one run, GSM8K answered identically by both trees."""
    base = _raw(make_run(tmp_path / "b", modes=("off", "on"), concurrencies=(2,), repeats=2))
    head = _raw(make_run(tmp_path / "h", modes=("off", "on"), concurrencies=(2,), repeats=2,
                         seed=5))
    for arm, doc in (("base", base), ("head", head)):
        for point in doc["points"]:
            point["arm"] = arm
    run_dir = tmp_path / "ab"
    run_dir.mkdir()
    answers = [True] * 180 + [False] * 20
    for label in ("head-off", "base-off"):
        write_gsm8k_records(run_dir, label, answers)
    run = {**base, "points": base["points"] + head["points"],
           "ab": {"head": {"path": "/src/pr", "version": "0.5.24.dev1"},
                  "base": {"path": "/src/main", "version": "0.5.23"}},
           "accuracy": {label: {"n": 200, "correct": 180, "accuracy": 0.9}
                        for label in ("head-off", "base-off")}}
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


def test_head_vs_base_names_both_trees_and_reads_the_answers(tmp_path: Path) -> None:
    run_dir = _ab_run(tmp_path)
    judgement = judge(run_dir, strict=True, baselines_root=tmp_path / "none")
    assert ("head vs base: head /src/pr (0.5.24.dev1) against base /src/main (0.5.23), each "
            "tree and mode in its own server start (a run from before [design])"
            in judgement.notes)
    assert judgement.strict is True and judgement.run_dir == run_dir
    assert judgement.baseline_file is None and judgement.baseline is None
    (gsm8k,) = [c for c in judgement.checks if "GSM8K" in c.name]
    assert gsm8k.verdict == "pass" and gsm8k.interval.n_current == 200    # read from run_dir
    assert judge(run_dir, baselines_root=tmp_path / "none").strict is False


# An unreadable run is one integrity error naming why (servegate.judge.evaluate, issue 15).


def test_unreadable_run_is_one_integrity_error(tmp_path: Path) -> None:
    judgement = judge(tmp_path / "missing", baselines_root=tmp_path / "none", strict=True)
    (check,) = judgement.checks
    assert (check.kind, check.name, check.metric, check.verdict) == (
        "integrity", "inputs readable", "inputs", "error")
    assert "run.json: not found" in check.reason
    assert judgement.run is None and judgement.strict is True
    assert judgement.overall == "error" and judgement.exit_code == 2


def test_bad_judge_table_keeps_the_run_and_strictness(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "run")
    raw = json.loads((run_dir / "run.json").read_text())
    raw["judge_table"] = {"default_floor": "five percent"}
    (run_dir / "run.json").write_text(json.dumps(raw))
    judgement = judge(run_dir, baselines_root=tmp_path / "none", strict=False)
    (check,) = judgement.checks
    assert check.kind == "integrity" and check.verdict == "error"
    assert "default_floor" in check.reason
    assert judgement.run is not None and judgement.run["suite"] == "synthetic"
    assert judgement.strict is False


# ------------------------------------------------------------------- the judged family (issue 15)

def _write(run_dir: Path, **changes: object) -> Path:
    raw = json.loads((run_dir / "run.json").read_text())
    raw.update(changes)
    (run_dir / "run.json").write_text(json.dumps(raw))
    return run_dir


TABLE = {"metrics": ["mean_ttft_ms"], "seed": 7, "confidence": 0.9}


def _judged(tmp_path: Path, **kw: object) -> tuple[Path, object]:
    run_dir = _write(make_run(tmp_path / "run", runner_class="mi300x", concurrencies=(4,),
                              n_requests=100), judge_table=TABLE,
                     suite_source={"path": "suites/x.toml"}, run_id="night-1")
    return run_dir, judge(run_dir, baselines_root=tmp_path / "none", **kw)  # type: ignore[arg-type]


def test_settings_seed_and_family_are_noted(tmp_path: Path) -> None:
    _, judgement = _judged(tmp_path)
    seed = run_seed(7, "night-1")
    assert judgement.config.seed == seed and seed != 7
    assert judgement.notes[0] == "judge settings from suites/x.toml (as recorded in run.json)"
    assert f"judge seed {seed} (suite seed mixed with run night-1)" in judgement.notes
    missing = tmp_path / "none" / "mi300x" / "smollm2-135m" / "synthetic.json"
    assert (f"no baseline at {missing}: only in-run A/B claims judged (store one with "
            "`servegate update-baselines RUN_DIR`)") in judgement.notes
    assert judgement.notes[2] == (
        "design: a server start per mode and repeat (a run from before [design]): each repeat "
        "read as one block of its own start; modes compared across their own starts (two start "
        "levels, run_to_run_cv)")
    # no-op claims (prefill test + a TOST per aggregate metric, here over c4 alone; a TOST may
    # report instead of gating, but it is counted): a family of 3 at a family-wise 90 %
    assert judgement.family_size == 3
    assert judgement.per_check_confidence == round(1 - 0.1 / 3, 8)
    assert judgement.notes[-1] == ("3 checks judged together: each interval at 96.667% "
                                   "(Bonferroni for a family-wise 90%)")
    assert judgement.baseline_file is None and judgement.baseline is None
    assert [c.name for c in judgement.checks] == [
        "no-op: on prefill batches not aligned beyond off (exact fill inactive)",
        "no-op: on mean_ttft_ms at c4 equivalent to off within ±5.0%",
        "no-op: on median_tpot_ms at c4 equivalent to off within ±5.0%"]


def test_the_run_key_falls_back_to_start_time_then_folder(tmp_path: Path) -> None:
    run_dir = _write(make_run(tmp_path / "folder-name"), judge_table=TABLE)
    assert judge(run_dir, baselines_root=tmp_path).config.seed == run_seed(
        7, "2026-11-30T12:00:00+00:00")
    raw = json.loads((run_dir / "run.json").read_text())
    del raw["started_at"]
    (run_dir / "run.json").write_text(json.dumps(raw))
    assert judge(run_dir, baselines_root=tmp_path).config.seed == run_seed(7, "folder-name")


def test_measured_run_spread_replaces_the_assumption(tmp_path: Path) -> None:
    _, judgement = _judged(tmp_path, measured_run_spread=True)
    assert judgement.config.run_to_run_cv_dof == 0.0
    assert ("run-to-run spread measured from the baseline's nights replaces the suite's "
            "assumed run_to_run_cv") in judgement.notes
    _, plain = _judged(tmp_path / "2")
    assert plain.config.run_to_run_cv_dof == 10.0


def test_incomplete_and_empty_runs_lead_with_integrity_errors(tmp_path: Path) -> None:
    run_dir = _write(make_run(tmp_path / "run"), complete=False, error="server died")
    checks = judge(run_dir, baselines_root=tmp_path).checks
    assert (checks[0].name, checks[0].kind, checks[0].metric, checks[0].verdict,
            checks[0].reason) == ("run complete", "integrity", "complete", "error",
                                  "run is incomplete: server died")
    empty = _write(make_run(tmp_path / "empty"), points=[], complete=False)
    del_error = judge(empty, baselines_root=tmp_path).checks
    assert [(c.name, c.reason) for c in del_error[:2]] == [
        ("run has points", "run.json has no points"),
        ("run complete", "run is incomplete: not every planned point finished")]
    done = judge(make_run(tmp_path / "ok"), baselines_root=tmp_path).checks
    assert not [c for c in done if c.kind == "integrity"]


def test_a_run_without_a_recorded_table_uses_its_suite_file(tmp_path: Path) -> None:
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "synthetic.toml").write_text('[judge]\nmetrics = ["mean_ttft_ms"]\nseed = 3\n')
    judgement = judge(make_run(tmp_path / "run"), suites_dir=suites, baselines_root=tmp_path)
    assert judgement.config.metrics == ("mean_ttft_ms",)
    assert judgement.notes[0].startswith("judge settings from ")
    assert str(suites / "synthetic.toml") in judgement.notes[0]


def test_a_recorded_null_table_means_defaults_and_says_so(tmp_path: Path) -> None:
    run_dir = _write(make_run(tmp_path / "run"), judge_table=None,
                     suite_source={"path": "my.toml"})
    judgement = judge(run_dir, baselines_root=tmp_path)
    assert judgement.notes[0] == "judge settings from <defaults: my.toml has no [judge] table>"
    with pytest.raises(JudgeConfigError) as info:   # (run.json validation refuses it first)
        judge_config_for_run({"judge_table": [1], "suite_source": {"path": "my.toml"}})
    assert str(info.value) == "run.json: judge_table must be a table (from my.toml)"
    with pytest.raises(JudgeConfigError, match=r"<unknown suite file>\)$"):
        judge_config_for_run({"judge_table": 1})
    assert judge_config_for_run({}).source == JudgeConfig().source


# ------------------------------------------------ in-server runs (every mode in each start)

DESIGN_NOTE = ("design: 2 server start(s) x 4 block(s) per mode and concurrency, every mode "
               "inside each start; judged on block values (20 % trimmed means, Yuen), modes "
               "paired within starts")


def test_an_in_server_run_notes_its_design_and_its_busy_blocks(tmp_path: Path) -> None:
    run_dir = write_block_run(tmp_path / "run", starts=2, blocks=4)
    raw = _raw(run_dir)
    raw["points"][5]["machine"] = {"other_cpu_pct": 20.0, "cpu_steal_pct": 1.0}
    # the costs a noise budget would be priced at: only undecided primary checks get one
    design = {**raw["design"], "start_seconds": [40.0, 42.0], "block_seconds": 3.0}
    _rewrite(run_dir, points=raw["points"], design=design)
    judgement = judge(run_dir, baselines_root=tmp_path / "none")
    assert DESIGN_NOTE in judgement.notes
    assert interference_note(raw["points"]) in judgement.notes
    # first: the gated no-op claims rest on the suite's typed interaction prior (one note)
    assert judgement.notes[0].endswith(
        "rests on the prior log-sd 0.0100 (10 dof) from [judge] interaction_cv in "
        "suites/blocks-synthetic.toml (as recorded in run.json) (a typed figure: a history "
        "store's nights would replace it)")
    assert judgement.notes[0].count("no-op: on ") == 2
    assert f"during 1 of {len(raw['points'])} blocks" in judgement.notes[3]
    assert judgement.baseline_file is None and judgement.baseline is None
    assert judgement.exit_code == 0 and judgement.budget == []   # nothing left undecided


def test_a_bonferroni_run_with_no_checks_keeps_the_plain_level(tmp_path: Path) -> None:
    judgement = judge(make_run(tmp_path / "run", modes=("off",)), baselines_root=tmp_path)
    assert judgement.family_size == 0 and judgement.per_check_confidence == 0.95
    assert judgement.notes[-1] == ("0 checks judged together: each interval at 95.000% "
                                   "(Bonferroni for a family-wise 95%)")


def test_the_holm_note_counts_the_reported_checks_but_not_integrity_errors(
        tmp_path: Path) -> None:
    source = write_block_run(tmp_path / "baseline-run", starts=2, blocks=4, concurrencies=(2, 4),
                             seed=99, started_at="2026-11-30T12:00:00+00:00")
    doc = baseline_from_run(_raw(source), source)        # type: ignore[arg-type]
    run_dir = write_block_run(tmp_path / "run", starts=2, blocks=4, concurrencies=(2,))
    judgement = judge(run_dir, baseline_doc=doc)
    kinds = [(c.kind, c.primary) for c in judgement.checks]
    # family: the prefill no-op and the two TOSTs (one concurrency: no aggregates); reported:
    # off/on x 2 metrics at c2 vs the baseline; not counted: the two points the run lacks
    # (off@c4, on@c4)
    assert kinds.count(("integrity", False)) == 2
    assert judgement.notes[-1] == (
        "gated family of 3 checks (Holm step-down, family-wise 95%, suite [judge] family = "
        "['claims']); 4 more reported at 95%, not gating")


def _in_server_ab(tmp_path: Path, table: dict[str, Any] | None = None, **design: Any) -> Path:
    """Head and base in one in-server run, GSM8K answered by both (30 head-only, 10 base-only)."""
    run_dir = write_block_run(tmp_path / "ab", arms=("base", "head"), modes=("off",), starts=1,
                              blocks=4, table=table,
                              accuracy={"head-off": {"n": 200, "correct": 170},
                                        "base-off": {"n": 200, "correct": 150}})
    write_gsm8k_records(run_dir, "head-off", [True] * 170 + [False] * 30)
    write_gsm8k_records(run_dir, "base-off", [True] * 140 + [False] * 30 + [True] * 10
                        + [False] * 20)
    raw = _raw(run_dir)
    return _rewrite(run_dir, design={**raw["design"], **design})


HEAD_VS_BASE = "head vs base: head /src/sglang-head (0.5.23) against base /src/sglang-base (0.5.23), "


@pytest.mark.parametrize(("design", "how"), [
    ({"live_pair": True, "pair_note": "head on GPUs 0-3, base on 4-7"},
     "blocks paired between the two live servers (head on GPUs 0-3, base on 4-7)"),
    ({"live_pair": True}, "blocks paired between the two live servers ()"),
    ({"live_pair": False, "pair_note": "one TP4 server fits"},
     "each tree in its own server start(s), one after the other (one TP4 server fits)"),
    ({}, "each tree in its own server start(s), one after the other (no live pair)"),
])
def test_an_in_server_head_vs_base_run_says_how_the_trees_were_paired(
        tmp_path: Path, design: dict[str, Any], how: str) -> None:
    judgement = judge(_in_server_ab(tmp_path, **design), baselines_root=tmp_path / "none")
    assert HEAD_VS_BASE + how in judgement.notes


@pytest.mark.parametrize(("family", "primary"), [(["ab-aggregate"], False), (None, True)])
def test_an_in_server_head_vs_base_run_pairs_gsm8k_per_question(
        tmp_path: Path, family: list[str] | None, primary: bool) -> None:
    run_dir = _in_server_ab(tmp_path, table=judge_table(family=family))
    judgement = judge(run_dir, baselines_root=tmp_path / "none", strict=True)
    assert judgement.run_dir == run_dir and judgement.strict is True
    (gsm8k,) = [c for c in judgement.checks if "GSM8K" in c.name]
    assert gsm8k.name == "off GSM8K head vs base (paired, non-inferior within 2.0 pp)"
    assert (gsm8k.current_value, gsm8k.reference_value) == (0.85, 0.75)   # read from run_dir
    assert gsm8k.primary is primary                 # gates only when the suite names no family


@pytest.mark.parametrize(("family", "primary"), [(["claims"], False), (None, True)])
def test_an_in_server_run_judges_gsm8k_against_its_baseline_per_question(
        tmp_path: Path, family: list[str] | None, primary: bool) -> None:
    table = judge_table(family=family)
    accuracy = {"off": {"n": 200, "correct": 150}}
    source = write_block_run(tmp_path / "baseline-run", table=table, accuracy=accuracy, seed=99,
                             started_at="2026-11-30T12:00:00+00:00")
    write_gsm8k_records(source, "off", [True] * 150 + [False] * 50)
    doc = baseline_from_run(_raw(source), source)        # type: ignore[arg-type]
    run_dir = write_block_run(tmp_path / "run", table=table, accuracy=accuracy)
    write_gsm8k_records(run_dir, "off", [True] * 150 + [False] * 50)
    judgement = judge(run_dir, baseline_doc=doc, strict=True)
    assert judgement.run_dir == run_dir and judgement.strict is True
    assert judgement.baseline_file == Path(str(source)) and judgement.baseline is not None
    (gsm8k,) = [c for c in judgement.checks if "GSM8K" in c.name]
    assert gsm8k.name == "off GSM8K accuracy vs baseline" and gsm8k.primary is primary
    assert gsm8k.reason.startswith("paired on 200 common questions (0 discordant)")
