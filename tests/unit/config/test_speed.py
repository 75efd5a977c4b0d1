"""The speed model: every figure has a source, decode steps join in log2(batch), bad tables are
named by file and key."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from servegate.config._schema import ConfigError
from servegate.config.profiles import load_profile
from servegate.config.speed import FIGURES, parse_speed
from servegate.config.suites import MODELS_DIR

SOURCES = {name: f"where {name} comes from" for name in FIGURES}


def _table(**changes: object) -> dict[str, object]:
    table: dict[str, object] = {
        "prefill_tokens_per_s": 1000, "decode_step_ms": {"2": 10.0, "8": 30.0},
        "model_load_s": 60, "block_overhead_s": 1.0, "gsm8k_output_tokens": 100,
        "sources": dict(SOURCES)}
    table.update(changes)
    return table


def test_decode_step_joins_points_in_log2_batch_and_holds_flat_beyond_the_ends() -> None:
    speed = parse_speed(Path("p.toml"), "runners.x.speed", _table())
    assert speed.decode_step_ms(1) == 10.0 and speed.decode_step_ms(2) == 10.0
    assert speed.decode_step_ms(4) == pytest.approx(20.0)      # halfway in log2: 1 of 2 doublings
    assert speed.decode_step_ms(8) == 30.0 and speed.decode_step_ms(64) == 30.0
    assert speed.decode_step_ms(3) == pytest.approx(10 + 20 * math.log2(1.5) / 2)


def test_every_figure_is_printed_with_its_source() -> None:
    figures = parse_speed(Path("p.toml"), "runners.x.speed", _table()).figures()
    assert set(figures) == set(FIGURES)
    assert figures["decode_step_ms"] == {"value": {"2": 10.0, "8": 30.0},
                                         "source": "where decode_step_ms comes from"}


@pytest.mark.parametrize(("changes", "message"), [
    ({"sources": {k: v for k, v in SOURCES.items() if k != "model_load_s"}},
     "p.toml: runners.x.speed.sources: no source for model_load_s"),
    ({"sources": {**SOURCES, "block_overhead_s": "  "}}, "no source for block_overhead_s"),
    ({"sources": {**SOURCES, "typo_s": "x"}}, "unknown figure(s) typo_s"),
    ({"decode_step_ms": {"two": 10.0}}, "runners.x.speed.decode_step_ms: expected batch size"),
    ({"decode_step_ms": {"0": 10.0}}, "decode_step_ms: expected batch size"),
    ({"decode_step_ms": {}}, "needs at least one batch size"),
    ({"prefill_tokens_per_s": 0}, "runners.x.speed.prefill_tokens_per_s: expected a positive"),
    ({"block_overhead_s": -1}, "block_overhead_s: expected >= 0"),
    ({"model_load_s": "1 min"}, "runners.x.speed.model_load_s: expected float"),
])
def test_a_bad_speed_table_is_refused_naming_file_and_key(changes: dict[str, object],
                                                           message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_speed(Path("p.toml"), "runners.x.speed", _table(**changes))


def test_shipped_profiles_price_every_runner_section_with_sourced_figures() -> None:
    for path in sorted(MODELS_DIR.glob("*.toml")):
        profile = load_profile(path)
        for key, runner in profile.runners.items():
            assert runner.speed is not None, f"{path}: [runners.{key}] has no speed table"
            assert all(len(f["source"]) > 20 for f in runner.speed.figures().values())
