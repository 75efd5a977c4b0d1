"""bench's server start-up: the environment each server inherits."""

from __future__ import annotations

from servegate.commands.bench_servers import server_base_env


def test_injected_slowdowns_reach_only_the_arms_named() -> None:
    environ = {"SERVEGATE_INJECT_DELAY_MS": "40", "SERVEGATE_INJECT_ARMS": "head",
               "HF_TOKEN": "x"}
    assert server_base_env("head", environ)["SERVEGATE_INJECT_DELAY_MS"] == "40"
    base = server_base_env("base", environ)
    assert not [k for k in base if k.startswith("SERVEGATE_INJECT_")]
    assert base["HF_TOKEN"] == "x"
    unscoped = {"SERVEGATE_INJECT_DELAY_MS": "40"}
    assert server_base_env("base", unscoped) == unscoped == server_base_env("", unscoped)
