"""The suite's [judge] table: defaults, metrics from floors, errors naming file and key."""

from __future__ import annotations

import pytest

from servegate.judge.config import JudgeConfigError, load_judge_config


def _suite(tmp_path, body: str) -> None:
    (tmp_path / "suites").mkdir(exist_ok=True)
    (tmp_path / "suites" / "s.toml").write_text(body)


def test_missing_file_or_table_gives_defaults(tmp_path):
    assert load_judge_config("s", tmp_path).metrics[0] == "mean_ttft_ms"
    _suite(tmp_path, "[suite]\nname = 's'\n")
    config = load_judge_config("s", tmp_path)
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
    config = load_judge_config("s", tmp_path)
    assert config.metrics == ("mean_ttft_ms", "output_throughput")
    assert config.floor("mean_ttft_ms") == 0.1 and config.floor("p99_ttft_ms") == 0.05
    assert (config.gfx95_min_ttft_improvement, config.noop_margin) == (0.05, 0.08)


@pytest.mark.parametrize(("body", "needle"), [
    ("[judge]\nfloors = { mean_ttft_ms = 5 }\n", "[judge].floors.mean_ttft_ms"),
    ("[judge]\nmetrics = ['mean_vibes']\n", "mean_vibes"),
    ("[judge]\nflors = {}\n", "[judge].flors: unknown key"),
    ("[judge.claims]\nnoop_margin = 'tight'\n", "[judge.claims].noop_margin"),
    ("[judge]\nconfidence = 95\n", "[judge].confidence"),
])
def test_malformed_names_file_and_key(tmp_path, body, needle):
    _suite(tmp_path, body)
    with pytest.raises(JudgeConfigError) as err:
        load_judge_config("s", tmp_path)
    assert needle in str(err.value) and "s.toml" in str(err.value)


def test_repository_suites_parse():
    from servegate.envbuild import REPO_ROOT

    for path in sorted((REPO_ROOT / "suites").glob("*.toml")):
        load_judge_config(path.stem)
