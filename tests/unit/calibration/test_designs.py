"""calibration.designs: the design a calibration simulates is the one bench runs on the machine
asked for (issue 39: sized in time, a slower machine fitting fewer rounds in the cap), with the
looks' alpha spent as the suite says."""

from __future__ import annotations

from servegate.calibration import designs
from servegate.config import load_suite, suite_path
from servegate.judge import sequential


def test_a_slower_machine_fits_fewer_rounds_judged_at_the_planned_spending() -> None:
    suite = load_suite(suite_path("cpu"))
    planned = suite.effective_design
    here = designs.block_design(suite, "cpu")
    slower = designs.block_design(suite, "cpu", slower=2.0)
    assert here.blocks == planned.blocks and here.look_levels == ()    # every round fits
    assert slower.blocks < here.blocks and slower.looks == tuple(
        k for k in planned.looks if k < slower.blocks)
    assert here.spending_power == slower.spending_power == planned.spending_power == 1.25
    # the capped schedule keeps the planned looks' levels (alpha t^1.25, not O'Brien-Fleming's)
    assert slower.look_levels == tuple(sequential.nominal_levels(
        planned.looks, planned.blocks, 1 - suite.judge.confidence, 1.25)[:len(slower.looks)])
    assert slower.look_levels != tuple(sequential.nominal_levels(
        planned.looks, planned.blocks, 1 - suite.judge.confidence)[:len(slower.looks)])
    # uncapped, every look's level is the schedule's own at that spending; capped, the
    # planned looks' levels and the rest of alpha at the final look
    assert here.levels() == sequential.nominal_levels(planned.looks, planned.blocks,
                                                      1 - suite.judge.confidence, 1.25)
    assert slower.levels()[:-1] == list(slower.look_levels) and len(slower.levels()) == len(
        slower.looks) + 1


def test_gsm8k_questions_per_mode_are_the_suites_count_all_of_the_split_or_none() -> None:
    import dataclasses

    cpu = load_suite(suite_path("cpu"))
    assert cpu.gsm8k is not None and designs.suite_questions(cpu) == cpu.gsm8k.questions == 4
    every = dataclasses.replace(cpu, gsm8k=dataclasses.replace(cpu.gsm8k, questions="all"))
    assert designs.suite_questions(every) == 1319
    assert designs.suite_questions(dataclasses.replace(cpu, gsm8k=None)) == 0
