"""servegate.history.profile: the noise profile learned from stored nights, and the judge using
it in place of the suite's typed interaction prior (naming it), through ``compare``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from unit.judge.block_runs import judge_table, write_block_run

from servegate.commands.compare import compare_run
from servegate.history.noise_profile import pool
from servegate.history.profile import learn_profile, profile_from_store
from servegate.history.store import add_run, read_store
from servegate.judge.evaluate import judge
from servegate.report.headline import is_routine

RUNNER = "mi355x"


def _interaction(sd: float, seed: int) -> Any:
    """A start x mode interaction of log-sd ``sd`` per (mode, start), shared by concurrencies."""
    draws = np.random.default_rng(seed).normal(0.0, sd, (2, 8))
    modes = {"off": 0, "on": 1}

    def effect(label: str, conc: int, start: int, block: int) -> float:
        return float(np.exp(draws[modes[label], start]))
    return effect


def _store(tmp: Path, nights: int, sd: float = 0.02, broken: int | None = None) -> Path:
    """``nights`` stored nights of 2 starts x 6 blocks (night ``broken``: interaction x25)."""
    store = tmp / "store"
    for night in range(nights):
        run_dir = write_block_run(
            tmp / f"night-{night:02d}", runner_class=RUNNER, seed=night, block_sd=0.005,
            effect=_interaction(sd * (25 if night == broken else 1), 1000 + night),
            table=judge_table(interaction_cv=0.003, interaction_cv_dof=4),
            started_at=f"2026-11-{night + 1:02d}T12:00:00+00:00")
        add_run(run_dir, store)
    return store


def test_fourteen_nights_measure_the_interaction_with_fourteen_dof(tmp_path: Path) -> None:
    store = _store(tmp_path, 14)
    profile = learn_profile(read_store(store).records, RUNNER, "smollm2-135m",
                            "blocks-synthetic")
    assert profile is not None and len(profile.nights) == 14
    prior = profile.interaction("on", "off", "mean_ttft_ms", (4,))
    assert prior is not None and prior.learned and prior.dof == 14
    # the on-off difference's interaction: 2 x 0.02^2 (14 dof: within a factor of ~2.5)
    assert 2 * 0.02 ** 2 / 2.5 < prior.var < 2 * 0.02 ** 2 * 2.5
    assert prior.source == "14 nights of mi355x history"
    assert prior.text().endswith("(14 dof) from 14 nights of mi355x history")
    assert profile.start("on", "mean_ttft_ms", (2, 4)) is not None
    assert profile.notes()[0].startswith("learned interaction on off mean_ttft_ms 4: log-sd")
    fewer = learn_profile(read_store(store).records, RUNNER, "smollm2-135m",
                          "blocks-synthetic", nights=5, exclude_run_ids=["night-13"])
    assert fewer is not None and [n.run_id for n in fewer.nights] == [
        f"night-{i:02d}" for i in range(8, 13)]


def test_a_night_out_of_profile_is_named_and_not_averaged_in(tmp_path: Path) -> None:
    store = _store(tmp_path, 15, broken=6)
    profile = profile_from_store(store, RUNNER, "smollm2-135m", "blocks-synthetic")
    assert profile is not None
    prior = profile.interaction("on", "off", "mean_ttft_ms", (4,))
    assert prior is not None and prior.dof == 14
    assert "1 out of profile left out: night-06" in prior.source
    assert prior.var < 2 * 0.02 ** 2 * 2.5
    # a mode apart in a start is left out of the learned interaction, not a runner-health
    # signal (that is a start level out of profile: bursts do not make it, runner_health)
    assert any(n.startswith("left out of the learned interaction on off mean_ttft_ms 4: "
                            "night-06") for n in profile.notes())
    assert not profile.out_of_profile


def test_pooling_by_hand_and_too_few_nights_name_nothing() -> None:
    pooled = pool(np.array([1e-4, 2e-4, 4e-4, 1e-4, 5.0]), np.ones(5), np.zeros(5))
    assert pooled.out.tolist() == [False, False, False, False, True]
    assert float(pooled.var) == pytest.approx(2e-4) and float(pooled.dof) == 4
    three = pool(np.array([1e-4, 2e-4, 5.0]), np.ones(3), np.zeros(3))
    assert not three.out.any() and float(three.dof) == 3


def test_no_store_or_no_nights_is_no_profile(tmp_path: Path) -> None:
    assert profile_from_store(tmp_path / "missing", RUNNER, "m", "s") is None
    assert learn_profile([], RUNNER, "m", "s") is None
    with pytest.raises(ValueError, match="nights must be >= 1"):
        learn_profile([], RUNNER, "m", "s", nights=0)


def test_the_judge_takes_the_learned_interaction_and_names_it(tmp_path: Path) -> None:
    """A first night rests on the suite's prior and says so; with 14 nights of history the
    claim's interaction prior is the learned one, named in its reason and the notes."""
    store = _store(tmp_path, 14)
    run_dir = write_block_run(tmp_path / "tonight", runner_class=RUNNER, seed=99,
                              block_sd=0.005, effect=_interaction(0.02, 99),
                              table=judge_table(interaction_cv=0.003, interaction_cv_dof=4),
                              started_at="2026-12-01T12:00:00+00:00")
    claim = "claim: on vs off mean_ttft_ms at c4 improves >= 4.0%"
    first = {c.name: c for c in judge(run_dir).checks}[claim]
    assert "[judge] interaction_cv in suites/blocks-synthetic.toml" in first.reason
    assert "(4 dof)" in first.reason
    profile = profile_from_store(store, RUNNER, "smollm2-135m", "blocks-synthetic")
    learned = judge(run_dir, priors=profile)
    check = {c.name: c for c in learned.checks}[claim]
    assert "(14 dof) from 14 nights of mi355x history" in check.reason
    # tonight's two starts refute the typed 0.003 (the interval widens to their 1 dof); the
    # learned prior holds and is pooled with them (15 dof)
    assert first.noise["between_source"] == "measured, prior refuted"
    assert "far above its prior" in first.reason and first.interval.df < 2
    assert check.noise["between_source"] == "measured+prior" and check.interval.df > 10
    assert any(n.startswith("learned interaction on off mean_ttft_ms 4")
               for n in learned.notes)
    # compare with the store: the same priors, in verdict.json's check reasons
    # a first night whose two starts agree with the typed prior: its claim rests on it, named
    quiet = write_block_run(tmp_path / "quiet", runner_class=RUNNER, seed=7, block_sd=0.005,
                            start_sd=0.05,
                            table=judge_table(interaction_cv=0.003, interaction_cv_dof=4))
    rests = {c.name: c for c in judge(quiet).checks}[claim]
    assert rests.noise["between_source"] == "measured+prior"
    assert ": rests on the prior, log-sd 0.0030 (4 dof) from [judge] interaction_cv in " \
        "suites/blocks-synthetic.toml" in rests.reason
    # ... and the verdict says so first, in the notes the verdict block prints
    quiet_notes = judge(quiet).notes
    assert quiet_notes[0] == (
        f"{claim}: rests on the prior log-sd 0.0030 (4 dof) from [judge] interaction_cv in "
        "suites/blocks-synthetic.toml (as recorded in run.json) (a typed figure: a history "
        "store's nights would replace it)")
    assert not is_routine(quiet_notes[0])
    assert judge(run_dir).notes[0].startswith(f"{claim}: this run's starts refute its prior ")
    assert learned.notes[0] == (f"{claim}: rests on the prior "
                                f"{check.noise['prior']['text']}")     # the learned one
    assert check.noise["prior"]["learned"] and "14 nights of mi355x" in learned.notes[0]
    assert compare_run(run_dir, history_store=store, plots=False) in (0, 1)
    verdict = json.loads((run_dir / "verdict.json").read_text())
    reasons = {c["name"]: c["reason"] for c in verdict["checks"]}
    assert "from 14 nights of mi355x history" in reasons[claim]
    assert compare_run(run_dir, history_store=store, plots=False, profile_nights=0) in (0, 1)
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert "history" not in {c["name"]: c["reason"] for c in verdict["checks"]}[claim]


def test_history_health_names_the_levels_an_out_of_profile_night_and_a_sustained_shift(
        tmp_path: Path) -> None:
    """20 nights, the last 5 with off 6 % slower, night 3 with a broken interaction:
    ``history health`` lists the learned levels, names night 03 out of profile (and leaves
    it out of the aggregates: in the reference nights it would hide the shift) and flags the
    sustained shift of off's mean TTFT, not on's."""
    import io

    from servegate.history.cli import main

    store = tmp_path / "store"
    draws = np.random.default_rng(5)
    for night in range(20):
        inter = draws.normal(0.0, 0.02 * (25 if night == 3 else 1), (2, 2))
        slow = 1.06 if night >= 15 else 1.0

        def effect(label: str, conc: int, start: int, block: int,
                   inter: Any = inter, slow: float = slow) -> float:
            factor = float(np.exp(inter[{"off": 0, "on": 1}[label], start]))
            return factor * (slow if label == "off" else 1.0)

        add_run(write_block_run(tmp_path / f"night-{night:02d}", runner_class=RUNNER,
                                seed=night, block_sd=0.005, start_sd=0.01, effect=effect,
                                started_at=f"2026-11-{night + 1:02d}T12:00:00+00:00"), store)
    out = io.StringIO()
    assert main(["health", "--store", str(store), "--json", "--metric", "mean_ttft_ms"],
                out=out) == 0
    (entry,) = json.loads(out.getvalue())["identities"]
    assert entry["nights"] == 20
    assert {a["mode"]: a["nights"] for a in entry["aggregates"]} == {"off": 19, "on": 19}
    flagged = {a["mode"]: a["flagged"] for a in entry["aggregates"]}
    assert flagged["on"] == [] and flagged["off"] and flagged["off"][0] in (
        "night-15", "night-16", "night-17")
    assert any("night-03" in runs for runs in entry["out_of_profile"].values())
    levels = {(lv["level"], lv["of"]) for lv in entry["levels"]}
    assert ("interaction", "on-off") in levels and ("start", "off") in levels
    text = io.StringIO()
    assert main(["health", "--store", str(store)], out=text) == 0
    assert "off mean_ttft_ms (c[2, 4]): 19 nights, sustained shift flagged at night-1" in \
        text.getvalue()
    assert main(["health", "--store", str(store), "--nights", "0"], out=io.StringIO()) == 2


def test_the_site_shows_each_groups_noise_profile(tmp_path: Path) -> None:
    from servegate.history.site import publish

    store = _store(tmp_path, 15, broken=6)
    result = publish(store, tmp_path / "site")
    index = result.index.read_text()
    assert "noise profile (learned from 15 night(s)) and sustained shifts" in index
    assert "<td>interaction</td><td>on-off</td><td>mean_ttft_ms</td>" in index
    assert "14 nights of mi355x history (1 out of profile left out: night-06)" in index
    assert "out of profile (a runner-health signal, not averaged in)" in index
    assert "no sustained shift flagged" in index


def _health_store(tmp_path: Path, night_sd: float) -> Path:
    """20 nights of 3 starts x 4 blocks (start log-sd 2 %), each night's every start and mode
    moved by one night-level factor of log-sd ``night_sd`` that the starts cannot see."""
    store = tmp_path / "store"
    draws = np.random.default_rng(11).normal(0.0, night_sd, 20)
    for night in range(20):
        def effect(label: str, conc: int, start: int, block: int,
                   factor: float = float(np.exp(draws[night]))) -> float:
            return factor

        add_run(write_block_run(tmp_path / f"night-{night:02d}", runner_class=RUNNER,
                                seed=100 + night, starts=3, blocks=4, block_sd=0.005,
                                start_sd=0.02, effect=effect,
                                started_at=f"2026-11-{night + 1:02d}T12:00:00+00:00"), store)
    return store


def test_history_health_spread_comes_from_the_nights_starts_unless_the_nights_refute_them(
        tmp_path: Path) -> None:
    """Each stored night's own starts measure its error (2 dof a night at 3 starts): with no
    night-level noise the rule's spread pools them with the 14 reference nights' spread (more
    than the nights' 13 dof, an F test that does not refute them); with a night-level factor
    of 3 % (2.6x the starts' predicted log-sd) the F test refutes the starts and the nights'
    spread alone standardises them, and flags nothing."""
    from servegate.history.health import health

    quiet = health(read_store(_health_store(tmp_path / "q", 0.0)).records,
                   metrics=("mean_ttft_ms",))
    (entry,) = quiet
    for agg in entry["aggregates"]:
        assert agg["nights"] == 20 and agg["flagged"] == []
        assert "the starts' spread within each night pooled with the nights'" in agg["spread"]
        dof = float(agg["spread"].split("(")[1].split(" dof")[0])
        assert dof > 13 + 20                   # 14 nights x ~2 dof of starts on top
    noisy_store = _health_store(tmp_path / "n", 0.03)
    (noisy,) = health(read_store(noisy_store).records, metrics=("mean_ttft_ms",))
    for agg in noisy["aggregates"]:
        assert "the nights vary more than their starts predict" in agg["spread"]
        assert "(13 dof)" in agg["spread"] and agg["flagged"] == []


# ------------------------------------------------- a live pair learned from earlier pairs

PAIR_TTFT = "off mean_ttft_ms at all concurrencies (geometric mean) vs base"


def _pair(tmp: Path, name: str, seed: int, head: float = 1.0, day: int = 1) -> Path:
    """A premerge-style live pair: one start per tree (start log-sd 2 %), 4 block pairs."""
    run_dir = write_block_run(
        tmp / name, runner_class=RUNNER, arms=("base", "head"), modes=("off",), starts=1,
        blocks=4, start_sd=0.02, block_sd=0.005, seed=seed,
        table=judge_table(family=["ab-aggregate"], run_to_run_cv=0.04, run_to_run_cv_dof=10),
        effect=lambda label, *_: head if label.startswith("head-") else 1.0,
        started_at=f"2026-11-{day:02d}T12:00:00+00:00")
    run = json.loads((run_dir / "run.json").read_text())
    run["design"]["live_pair"] = True
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


def test_a_live_pair_learns_its_start_level_from_the_classs_earlier_pairs(
        tmp_path: Path) -> None:
    """20 stored pairs of the class (two of them real 25 % changes, left out) replace the
    typed 2 x 4 % prior: tonight's 15 % slowdown is a regression with the learned level and
    undecided on the typed one; with 5 pairs the prior stands and the verdict says so."""
    store = tmp_path / "store"
    for i in range(20):
        add_run(_pair(tmp_path, f"pair-{i:02d}", i, 1.25 if i in (3, 11) else 1.0, i + 1),
                store)
    records = read_store(store).records
    assert {r.arm for r in records} == {"base", "head"}             # each tree its own lines
    assert {r.identity[2] for r in records} == {"blocks-synthetic:base",
                                                "blocks-synthetic:head"}
    profile = profile_from_store(store, RUNNER, "smollm2-135m", "blocks-synthetic")
    assert profile is not None and not profile.nights and len(profile.pairs) == 20
    prior = profile.pair("off", "mean_ttft_ms", (2, 4))
    assert prior is not None and prior.learned and prior.dof == 18
    assert prior.source == ("18 live pairs of mi355x history (2 out of profile left out: "
                            "pair-03, pair-11)")
    assert 0.4 < math.sqrt(prior.var) / (math.sqrt(2) * 0.02) < 1.6
    assert not profile.out_of_profile          # a pair that moved is no runner-health signal
    tonight = _pair(tmp_path, "tonight", 99, head=1.15, day=28)
    typed = {c.name: c for c in judge(tonight).checks}[PAIR_TTFT]
    learned_judgement = judge(tonight, priors=profile)
    learned = {c.name: c for c in learned_judgement.checks}[PAIR_TTFT]
    assert typed.verdict == "inconclusive" and learned.verdict == "regression"
    assert "2 x [judge] run_to_run_cv^2" in typed.reason
    assert "(18 dof) from 18 live pairs of mi355x history" in learned.reason
    assert any(n.startswith("left out of the learned pair off mean_ttft_ms 2 4: pair-03, "
                            "pair-11") for n in learned_judgement.notes)
    few = learn_profile(records, RUNNER, "smollm2-135m", "blocks-synthetic", nights=5)
    assert few is not None and len(few.pairs) == 5
    stands = judge(tonight, priors=few)
    check = {c.name: c for c in stands.checks}[PAIR_TTFT]
    assert "2 x [judge] run_to_run_cv^2" in check.reason
    assert any(n.startswith("learned pair off mean_ttft_ms 2 4: log-sd") and n.endswith(
        "(taken once worth more dof than the suite's prior)") for n in stands.notes)
    assert stands.notes[0].startswith(PAIR_TTFT) and "rests on the prior log-sd 0.0566 (10 " \
        "dof) from 2 x [judge] run_to_run_cv^2" in stands.notes[0]
