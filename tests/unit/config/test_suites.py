"""Suites' ``[design]`` (starts x blocks, every mode inside each start) against the older
``[suite].repeats``, and the ``[judge]`` keys of the primary family and the blocks design."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from suite_files import load, write_suite

from servegate.config import ConfigError, Design


def test_design_table_is_parsed(tmp_path: Path) -> None:
    suite = load(write_suite(tmp_path, tail="[design]\nstarts = 3\nblocks = 6\n"))
    assert suite.design == Design(starts=3, blocks=6, in_server=True)
    assert suite.effective_design is suite.design
    assert suite.repeats == 1 and suite.notes == ()
    assert suite.design.record() == {"in_server": True, "starts": 3, "blocks": 6,
                                     "warmup_blocks": 0, "looks": [], "halves": False,
                                     "unit": "block"}


def test_warmup_blocks_are_read_and_never_negative(tmp_path: Path) -> None:
    suite = load(write_suite(tmp_path, tail="[design]\nstarts = 1\nblocks = 2\n"
                                            "warmup_blocks = 1\n"))
    assert suite.design is not None and suite.design.warmup_blocks == 1
    with pytest.raises(ConfigError, match=r"s\.toml: design\.warmup_blocks: expected an "
                                          r"integer >= 0, got -1"):
        load(write_suite(tmp_path, tail="[design]\nstarts = 1\nblocks = 2\n"
                                        "warmup_blocks = -1\n"))


@pytest.mark.parametrize("repeats", [1, 3])
def test_legacy_repeats_are_read_as_starts_of_one_block_with_a_note(tmp_path: Path,
                                                                    repeats: int) -> None:
    """The design before [design] (a server start per mode and repeat) is retired: an older
    suite's repeats become that many starts of one block, every mode inside each start."""
    path = write_suite(tmp_path, repeats=f"repeats = {repeats}")
    suite = load(path)
    assert suite.design == Design(starts=repeats, blocks=1, in_server=True)
    assert suite.effective_design is suite.design and suite.repeats == 1
    assert suite.design.record() == {"in_server": True, "starts": repeats, "blocks": 1,
                                     "warmup_blocks": 0, "looks": [], "halves": False,
                                     "unit": "block"}
    assert suite.notes == (f"{path}: suite.repeats = {repeats} read as [design] starts = "
                           f"{repeats}, blocks = 1 (every mode inside each start); write a "
                           "[design] table instead",)


def test_design_and_repeats_are_exclusive(tmp_path: Path) -> None:
    path = write_suite(tmp_path, repeats="repeats = 2", tail="[design]\nstarts = 1\nblocks = 4\n")
    with pytest.raises(ConfigError) as err:
        load(path)
    message = str(err.value)
    assert str(path) in message and "suite.repeats" in message and "[design]" in message


def test_neither_design_nor_repeats_is_an_error(tmp_path: Path) -> None:
    path = write_suite(tmp_path)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: [design] (starts, blocks) or "
                                                    "suite.repeats is required")):
        load(path)


@pytest.mark.parametrize(("body", "key", "value"), [
    ("starts = 0\nblocks = 4", "design.starts", "0"),
    ("starts = 2\nblocks = -1", "design.blocks", "-1"),
])
def test_non_positive_starts_or_blocks_name_the_key(tmp_path: Path, body: str, key: str,
                                                     value: str) -> None:
    path = write_suite(tmp_path, tail=f"[design]\n{body}\n")
    with pytest.raises(ConfigError, match=re.escape(f"{path}: {key}: expected positive "
                                                    f"integers, got {value}")):
        load(path)


@pytest.mark.parametrize(("body", "needle"), [
    ("starts = 2", "missing required key 'design.blocks'"),
    ("starts = 2\nblocks = 3\nrepeats = 1", "[design]: unknown key 'repeats'"),
    ('starts = "2"\nblocks = 3', "design.starts: expected integer"),
])
def test_malformed_design_table(tmp_path: Path, body: str, needle: str) -> None:
    path = write_suite(tmp_path, tail=f"[design]\n{body}\n")
    with pytest.raises(ConfigError, match=re.escape(needle)):
        load(path)


def test_legacy_non_positive_repeats_still_an_error(tmp_path: Path) -> None:
    path = write_suite(tmp_path, repeats="repeats = 0")
    with pytest.raises(ConfigError, match=re.escape("suite.repeats: expected positive")):
        load(path)


DESIGN = "[design]\nstarts = 2\nblocks = 4\n"


def test_family_keys_are_read(tmp_path: Path) -> None:
    suite = load(write_suite(tmp_path, tail=DESIGN + """[judge]
family = ["claims", "baseline-aggregate"]
family_method = "bonferroni"
aggregate_metrics = ["mean_ttft_ms"]
interaction_cv = 0.02
interaction_cv_dof = 4
"""))
    judge = suite.judge
    assert judge.family == ("claims", "baseline-aggregate")
    assert judge.family_method == "bonferroni"
    assert judge.aggregate_metrics == ("mean_ttft_ms",)
    assert (judge.interaction_cv, judge.interaction_cv_dof) == (0.02, 4.0)
    assert suite.judge_table is not None and suite.judge_table["family"] == [
        "claims", "baseline-aggregate"]


def test_family_defaults(tmp_path: Path) -> None:
    judge = load(write_suite(tmp_path, tail=DESIGN + "[judge]\nconfidence = 0.9\n")).judge
    assert judge.family == () and judge.family_method == "holm"
    assert judge.aggregate_metrics == ("mean_ttft_ms", "median_tpot_ms")
    assert (judge.interaction_cv, judge.interaction_cv_dof) == (0.01, 10.0)


def test_looks_are_read_and_recorded(tmp_path: Path) -> None:
    suite = load(write_suite(tmp_path, tail="[design]\nstarts = 1\nblocks = 6\nlooks = [2, 4]\n"))
    assert suite.design.looks == (2, 4) and suite.design.record()["looks"] == [2, 4]


def test_halves_are_read_and_recorded(tmp_path: Path) -> None:
    suite = load(write_suite(tmp_path, tail="[design]\nstarts = 4\nblocks = 3\nhalves = true\n"))
    assert suite.design.halves and suite.design.record()["halves"] is True


@pytest.mark.parametrize("design", ["starts = 3\nblocks = 4\nhalves = true",
                                    "starts = 2\nblocks = 4\nhalves = true\nlooks = [2]"])
def test_halves_need_even_starts_and_no_looks(tmp_path: Path, design: str) -> None:
    with pytest.raises(ConfigError, match=r"design.halves: expected an even design.starts"):
        load(write_suite(tmp_path, tail=f"[design]\n{design}\n"))


def test_a_design_sized_in_time_is_read_and_recorded_under_sizing(tmp_path: Path) -> None:
    suite = load(write_suite(tmp_path, tail="[design]\nstarts = 1\nblocks = 40\nlooks = [8, 16]"
                                            "\nmin_block_seconds = 2.5\nmax_minutes = 4.5\n"
                                            "spending_power = 1.25\n"))
    assert (suite.design.min_block_seconds, suite.design.max_minutes) == (2.5, 4.5)
    record = suite.design.record()
    assert record["sizing"] == {"min_block_seconds": 2.5, "max_minutes": 4.5}
    assert record["spending_power"] == 1.25
    assert "block_seconds" not in record        # run.json's measured mean block wall
    plain = load(write_suite(tmp_path, tail="[design]\nstarts = 1\nblocks = 2\n"))
    assert "sizing" not in plain.design.record()


@pytest.mark.parametrize("design", [
    "starts = 1\nblocks = 8\nmax_minutes = 4",                       # a cap needs its looks
    "starts = 1\nblocks = 8\nlooks = [4]\nmax_minutes = 0",
    "starts = 1\nblocks = 8\nmin_block_seconds = -1",
    "starts = 2\nblocks = 8\nhalves = true\nmin_block_seconds = 3"])
def test_a_bad_time_sizing_is_refused_naming_the_keys(tmp_path: Path, design: str) -> None:
    with pytest.raises(ConfigError, match=r"design.min_block_seconds / max_minutes: expected"):
        load(write_suite(tmp_path, tail=f"[design]\n{design}\n"))


@pytest.mark.parametrize("design", ["looks = [4]\nspending_power = 0", "spending_power = 1.5"])
def test_a_spending_power_needs_looks_and_a_positive_number(tmp_path: Path, design: str) -> None:
    with pytest.raises(ConfigError, match=r"design.spending_power: expected a number in \(0, "
                                          r"10\] with design.looks"):
        load(write_suite(tmp_path, tail=f"[design]\nstarts = 1\nblocks = 8\n{design}\n"))


@pytest.mark.parametrize("looks", ["[1, 3]", "[3, 2]", "[2, 2]", "[2, 6]", "[7]"])
def test_bad_looks_are_refused_naming_the_key(tmp_path: Path, looks: str) -> None:
    with pytest.raises(ConfigError, match=r"design.looks: expected increasing block counts"):
        load(write_suite(tmp_path, tail=f"[design]\nstarts = 1\nblocks = 6\nlooks = {looks}\n"))


def test_shaped_output_lengths_are_read_per_concurrency(tmp_path: Path) -> None:
    suite = load(write_suite(tmp_path, tail="shaped_output_len = [4, 16]\n" + DESIGN))
    load_ = suite.load
    assert (load_.output_len_at(2), load_.output_len_at(4)) == (4, 16)
    assert load_.reshaped == (2,) and load_.output_len == 16
    plain = load(write_suite(tmp_path, tail=DESIGN)).load
    assert plain.output_len_at(4) == 16 and plain.reshaped == ()


@pytest.mark.parametrize(("shaped", "needle"), [
    ("[4]", "load.shaped_output_len must list one output length per load.concurrency entry "
            "(2 concurrencies, 1 lengths)"),
    ("[4, 32]", "load.shaped_output_len: a shaped point runs at most the full load's "
                "load.output_len (16), got [4, 32]"),
    ("[0, 16]", "load.shaped_output_len: expected positive integers, got 0"),
    ('["4", 16]', "load.shaped_output_len[0]: expected integer"),
])
def test_bad_shaped_output_lengths_name_the_key(tmp_path: Path, shaped: str,
                                                needle: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(needle)):
        load(write_suite(tmp_path, tail=f"shaped_output_len = {shaped}\n" + DESIGN))


def test_aggregate_concurrency_is_read_and_checked_against_the_load(tmp_path: Path) -> None:
    judge = load(write_suite(tmp_path, tail=DESIGN + "[judge]\naggregate_concurrency = "
                                                     "{ median_tpot_ms = [2] }\n")).judge
    assert judge.aggregate_concurrency == {"median_tpot_ms": (2,)}
    assert judge.aggregate_concs("median_tpot_ms", [2, 4]) == [2]
    assert judge.aggregate_concs("mean_ttft_ms", [2, 4]) == [2, 4]
    for table, needle in [
            ("{ median_tpot_ms = [8] }", "[judge].aggregate_concurrency.median_tpot_ms: [8] "
                                         "must be concurrencies of load.concurrency [2, 4]"),
            ("{ p99_ttft_ms = [2] }", "[judge].aggregate_concurrency.p99_ttft_ms: not one of "
                                      "[judge].aggregate_metrics"),
            ("{ median_tpot_ms = [] }", "[judge].aggregate_concurrency.median_tpot_ms: "
                                        "expected a non-empty list of concurrencies")]:
        with pytest.raises(ConfigError, match=re.escape(needle)):
            load(write_suite(tmp_path, tail=DESIGN + f"[judge]\naggregate_concurrency = "
                                                     f"{table}\n"))


def test_head_vs_base_runs_a_timed_design_counted_as_its_first_look() -> None:
    """servegate ab and bisect interleave both trees' blocks: a design sized in time runs its
    first look's blocks there, unsized and without looks (the cpu suite: 8, as before)."""
    from servegate.config import load_suite, suite_path

    design = load_suite(suite_path("cpu")).design
    counted = design.counted()
    assert (counted.blocks, counted.looks, counted.max_minutes, counted.min_block_seconds,
            counted.forced_blocks) == (8, (), None, None, None)
    assert counted.counted() is counted and Design(starts=2, blocks=3).counted() == Design(
        starts=2, blocks=3)
