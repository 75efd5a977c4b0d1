"""Baselines matched by hardware (issue 39 items 1 and 2; servegate.judge.evaluate and
servegate.judge.baselines): a baseline of other hardware is named in one line and not judged
against; one of unknown hardware (written before fingerprints carried it) is judged with a note,
except a stored file on the CPU tier, where this machine's own local baseline takes its place.

Runs are synthetic run.json files (:func:`judge_runs.make_run`) with the fingerprint fields the
judge reads; the committed CPU baseline is the repository's own file."""

from __future__ import annotations

from pathlib import Path

from judge_runs import cpu_run, make_run, on, store
from judge_runs import hardware_fields as machine

from servegate.core.paths import BASELINES_DIR
from servegate.core.results import load_run
from servegate.judge.baselines import local_baseline_path, stored_baseline_path
from servegate.judge.evaluate import judge
from servegate.report.headline import verdict_block

COMMITTED_CPU = BASELINES_DIR / "cpu" / "smollm2-135m" / "cpu.json"


def test_the_committed_cpu_baseline_is_named_in_one_line_and_not_judged_against(
        tmp_path: Path) -> None:
    """The acceptance on this machine: the committed baseline (another VM, hardware unknown,
    its recorded cpu name and cores the same as here) gates nothing and lists no baseline
    check; the verdict names it once, in the reference line."""
    run_dir = cpu_run(tmp_path / "run")
    judgement = judge(run_dir)
    assert judgement.baseline is None and judgement.baseline_file is None
    assert not [c for c in judgement.checks if c.kind == "baseline"]
    assert judgement.reference == (
        f"baseline {COMMITTED_CPU} not judged against, hardware unknown (recorded before "
        'servegate recorded it; it records cpu "AMD EPYC", cores 2, gpus 0)')
    block = verdict_block(judgement, verbose=False)
    assert [line for line in block if str(COMMITTED_CPU) in line] == [
        f"  reference: {judgement.reference}"]
    assert judgement.reference in judgement.notes          # verdict.json and summary.md keep it


def test_a_baseline_of_other_hardware_names_the_fields_and_gates_nothing(tmp_path: Path) -> None:
    baseline = store(on(make_run(tmp_path / "zen2", runner_class="mi355x", seed=2),
                        machine("23")), tmp_path / "b.json")
    run_dir = on(make_run(tmp_path / "run", runner_class="mi355x", seed=3,
                          effect=lambda _m, _c: 5.0), machine())
    judgement = judge(run_dir, baseline_file=baseline)
    assert not [c for c in judgement.checks if c.kind == "baseline"]
    assert judgement.reference == (f"baseline {baseline} not judged against, other hardware: "
                                   "cpu family 23 -> 25")
    assert judgement.exit_code == 0                        # x5 slower, but nothing to judge by


def test_a_gpu_baseline_of_unknown_hardware_is_still_judged_with_a_note(tmp_path: Path) -> None:
    baseline = store(make_run(tmp_path / "old", runner_class="mi355x", seed=2),
                     tmp_path / "b.json")                  # its fingerprint: no hardware
    run_dir = on(make_run(tmp_path / "run", runner_class="mi355x", seed=3,
                          effect=lambda _m, _c: 5.0), machine())
    judgement = judge(run_dir, baseline_file=baseline)
    assert judgement.reference is None and judgement.baseline_file == baseline
    assert [c for c in judgement.checks if c.kind == "baseline" and c.verdict == "regression"]
    assert f"baseline {baseline}: hardware unknown (recorded before servegate recorded it); " \
           "judged as comparable" in judgement.notes


def test_a_cpu_run_is_judged_against_this_machines_local_baseline_first(tmp_path: Path) -> None:
    first = cpu_run(tmp_path / "first", seed=1)
    run = load_run(first)
    local = local_baseline_path(run)
    assert local is not None and stored_baseline_path(run) == COMMITTED_CPU   # none kept yet
    store(first, local)
    assert stored_baseline_path(run) == local
    # another machine's run does not see it; a GPU class or an unknown hardware has none
    assert stored_baseline_path(load_run(cpu_run(tmp_path / "b", **machine("23")))) == \
        COMMITTED_CPU
    assert local_baseline_path(load_run(make_run(tmp_path / "old", suite="cpu"))) is None
    assert local_baseline_path(load_run(on(make_run(tmp_path / "g", runner_class="mi355x"),
                                           machine()))) is None
    judgement = judge(cpu_run(tmp_path / "second", seed=2))
    assert judgement.baseline_file == local and judgement.reference is None
    baseline_checks = [c for c in judgement.checks if c.kind == "baseline"]
    assert baseline_checks and not [c for c in baseline_checks if c.verdict == "regression"]
