"""The suite's [judge] table: defaults, metrics from floors, errors naming file and key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from suite_files import load, write_suite

from servegate.config.judge import (
    FAMILY_METHODS,
    FAMILY_SELECTORS,
    JudgeConfigError,
    gated_floors,
    load_judge_table,
    parse_judge_table,
)


def _suite(tmp_path, body: str) -> None:
    (tmp_path / "suites").mkdir(exist_ok=True)
    (tmp_path / "suites" / "s.toml").write_text(body)


def test_missing_file_or_table_gives_defaults(tmp_path):
    assert load_judge_table(tmp_path / "suites" / "s.toml").metrics[0] == "mean_ttft_ms"
    _suite(tmp_path, "[suite]\nname = 's'\n")
    config = load_judge_table(tmp_path / "suites" / "s.toml")
    assert "no [judge] table" in config.source and config.confidence == 0.95


def test_floors_define_metrics_and_claims_table(tmp_path):
    _suite(tmp_path, """
[judge]
floors = { mean_ttft_ms = 0.1, output_throughput = 0.03 }
confidence = 0.9
[judge.claims]
gfx95_min_ttft_improvement = 0.05
noop_margin = 0.08
""")
    config = load_judge_table(tmp_path / "suites" / "s.toml")
    assert config.metrics == ("mean_ttft_ms", "output_throughput")
    assert config.floor("mean_ttft_ms") == 0.1 and config.floor("p99_ttft_ms") == 0.05
    assert (config.gated_min_ttft_improvement, config.noop_margin) == (0.05, 0.08)
    assert config.gated_claims is True
    _suite(tmp_path, "[judge.claims]\ngated_claims = false\n")
    assert load_judge_table(tmp_path / "suites" / "s.toml").gated_claims is False


@pytest.mark.parametrize(("body", "needle"), [
    ("[judge]\nfloors = { mean_ttft_ms = 5 }\n", "[judge].floors.mean_ttft_ms"),
    ("[judge]\nmetrics = ['mean_vibes']\n", "mean_vibes"),
    ("[judge]\nflors = {}\n", "[judge].flors: unknown key"),
    ("[judge.claims]\nnoop_margin = 'tight'\n", "[judge.claims].noop_margin"),
    ("[judge]\nconfidence = 95\n", "[judge].confidence"),
    ("[judge.claims]\ngated_claims = 'no'\n", "[judge.claims].gated_claims: expected true or false"),
])
def test_malformed_names_file_and_key(tmp_path, body, needle):
    _suite(tmp_path, body)
    with pytest.raises(JudgeConfigError) as err:
        load_judge_table(tmp_path / "suites" / "s.toml")
    assert needle in str(err.value) and "s.toml" in str(err.value)


def test_repository_suites_parse():
    from servegate.core.paths import SUITES_DIR

    for path in sorted(SUITES_DIR.glob("*.toml")):
        load_judge_table(path)


def test_gfx95_claim_keys_still_read_with_a_deprecation_note():
    config = parse_judge_table({"claims": {"gfx95_min_ttft_improvement": 0.07,
                                           "gfx95_claim_concurrency": 32}}, "old.toml")
    assert (config.gated_min_ttft_improvement, config.gated_claim_concurrency) == (0.07, 32)
    assert len(config.deprecations) == 2
    assert all("deprecated name, read as gated_" in note for note in config.deprecations)


def test_prior_dof_and_tost_power_keys():
    config = parse_judge_table({"run_to_run_cv": 0.04, "run_to_run_cv_dof": 4,
                                "claims": {"noop_min_power": 0.9}}, "s.toml")
    assert (config.run_to_run_cv_dof, config.noop_min_power) == (4.0, 0.9)
    with pytest.raises(JudgeConfigError, match="run_to_run_cv_dof"):
        parse_judge_table({"run_to_run_cv_dof": -1}, "s.toml")
    with pytest.raises(JudgeConfigError, match="noop_min_power"):
        parse_judge_table({"claims": {"noop_min_power": 1.5}}, "s.toml")


# Suites' ``[design]`` (starts x blocks, every mode inside each start) against the older
# ``[suite].repeats``, and the ``[judge]`` keys of the primary family and the blocks design.


DESIGN = "[design]\nstarts = 2\nblocks = 4\n"


def test_unknown_family_selector_names_the_key_and_the_selectors(tmp_path: Path) -> None:
    path = write_suite(tmp_path, tail=DESIGN + '[judge]\nfamily = ["claims", "everything"]\n')
    with pytest.raises(JudgeConfigError) as err:
        load(path)
    message = str(err.value)
    assert f"{path}: [judge].family" in message and "'everything'" in message
    assert all(selector in message for selector in FAMILY_SELECTORS)


@pytest.mark.parametrize("value", ['"claims"', "[1]"])
def test_family_must_be_a_list_of_selectors(tmp_path: Path, value: str) -> None:
    path = write_suite(tmp_path, tail=DESIGN + f"[judge]\nfamily = {value}\n")
    with pytest.raises(JudgeConfigError, match=re.escape("[judge].family: expected a list of")):
        load(path)


def test_family_method_validated(tmp_path: Path) -> None:
    path = write_suite(tmp_path, tail=DESIGN + '[judge]\nfamily_method = "sidak"\n')
    with pytest.raises(JudgeConfigError) as err:
        load(path)
    message = str(err.value)
    assert f"{path}: [judge].family_method" in message and "'sidak'" in message
    assert all(method in message for method in FAMILY_METHODS)


@pytest.mark.parametrize(("line", "needle"), [
    ("interaction_cv = 1.5", "[judge].interaction_cv"),
    ("interaction_cv_dof = -1", "[judge].interaction_cv_dof: expected a number of degrees"),
    ('aggregate_metrics = ["mean_nonsense_ms"]', "mean_nonsense_ms"),
])
def test_blocks_design_judge_keys_validated(tmp_path: Path, line: str, needle: str) -> None:
    path = write_suite(tmp_path, tail=DESIGN + f"[judge]\n{line}\n")
    with pytest.raises(JudgeConfigError, match=re.escape(needle)):
        load(path)


def test_gated_floors_reads_the_suite_by_name_and_names_why_when_it_does_not_parse(
        tmp_path: Path) -> None:
    _suite(tmp_path, "[judge]\nfloors = { mean_ttft_ms = 0.1 }\nmetrics = ['mean_ttft_ms', "
                     "'median_tpot_ms']\n")
    floors, why = gated_floors("s", tmp_path / "suites")
    assert floors == {"mean_ttft_ms": 0.1, "median_tpot_ms": 0.05} and why == ""
    defaults, _ = gated_floors("absent", tmp_path / "suites")      # no file: the defaults
    assert set(defaults) == set(load_judge_table(tmp_path / "none.toml").metrics)
    _suite(tmp_path, "[judge]\nconfidence = 'high'\n")
    floors, why = gated_floors("s", tmp_path / "suites")
    assert floors == {} and why.startswith("no floors: ") and "confidence" in why
