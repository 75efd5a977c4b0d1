"""``[profile]``: defaults, the suite key, validation naming file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from servegate.config import ConfigError, load_suite
from servegate.config.profiling import ProfileSettings, parse_profile_table
from servegate.core.paths import SUITES_DIR


def test_defaults_and_the_steps_a_wave_needs() -> None:
    settings = parse_profile_table(Path("s.toml"), None)
    assert settings == ProfileSettings() and not settings.enabled
    # 2 x 300 tokens through a 256 chunk: 3 prefill rounds, one more, 4 decode steps
    assert settings.num_steps(2, 300, 256) == 8
    assert parse_profile_table(Path("s.toml"), {}).enabled      # a table asks for it
    table = parse_profile_table(Path("s.toml"), {"enabled": False, "floor": 0.25,
                                                 "decode_steps": 2, "keep_traces": True})
    assert (table.enabled, table.floor, table.decode_steps, table.keep_traces) == (
        False, 0.25, 2, True)


@pytest.mark.parametrize(("table", "message"), [
    ({"flor": 0.1}, "unknown key 'flor'"), ({"floor": 1.5}, "profile.floor"),
    ({"decode_steps": -1}, "profile.decode_steps"), ({"enabled": 1}, "profile.enabled"),
    ({"block_cv": -0.1}, "profile.block_cv: expected a log-sd"),
])
def test_bad_tables_name_the_key(table: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_profile_table(Path("s.toml"), table)


def test_the_cpu_suite_states_its_floor_and_block_spread_without_profiling_by_default() -> None:
    suite = load_suite(SUITES_DIR / "cpu.toml")
    assert not suite.profile.enabled and suite.profile.floor == 0.4
    assert suite.profile.block_cv == 0.15 and ProfileSettings().block_cv == 0.05
    assert suite.profile.decode_steps == 8
