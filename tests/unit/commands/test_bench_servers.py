"""bench's server start-up: the environment each server inherits, and each attempt's time."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from servegate.commands import bench_servers
from servegate.commands.bench_servers import ServerRequest, server_base_env, start_servers
from servegate.plan.design import ServerSlot
from servegate.serve.process import PortInUse


def test_injected_slowdowns_reach_only_the_arms_named() -> None:
    environ = {"SERVEGATE_INJECT_DELAY_MS": "40", "SERVEGATE_INJECT_ARMS": "head",
               "HF_TOKEN": "x"}
    assert server_base_env("head", environ)["SERVEGATE_INJECT_DELAY_MS"] == "40"
    base = server_base_env("base", environ)
    assert not [k for k in base if k.startswith("SERVEGATE_INJECT_")]
    assert base["HF_TOKEN"] == "x"
    unscoped = {"SERVEGATE_INJECT_DELAY_MS": "40"}
    assert server_base_env("base", unscoped) == unscoped == server_base_env("", unscoped)


class _Server:
    """A launched server whose readiness is scripted: a taken port, or ready."""

    def __init__(self, log_path: Path, port_taken: bool) -> None:
        self.log_path, self.port_taken, self.base_url = log_path, port_taken, "http://x:1"

    def wait_ready(self) -> float:
        if self.port_taken:
            raise PortInUse("server could not bind port 1: already in use")
        return 0.01

    def stop(self) -> None:
        pass


def test_every_port_attempt_is_timed_the_failed_ones_marked(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Attempt 1: the port is taken before launch; 2: taken while loading; 3: ready."""
    attempts: list[int] = []

    def launch(ctx: Any, request: ServerRequest) -> _Server:
        attempts.append(1)
        if len(attempts) == 1:
            raise PortInUse("port 1 on 127.0.0.1 is already in use")
        return _Server(tmp_path / request.log_rel, port_taken=len(attempts) == 2)

    monkeypatch.setattr(bench_servers, "_launch", launch)
    ctx = SimpleNamespace(run={"schema_version": 2, "points": []}, start_seconds=[],
                          console=Console(file=io.StringIO()))
    slot = ServerSlot(mode="off", repeat=0, index=0, points=(), in_server=True)
    start_servers(ctx, [ServerRequest(slot, "server/s0.log")])  # type: ignore[arg-type]
    starts = ctx.run["timings"]["server_starts"]
    assert [(s["label"], s["attempt"], s.get("failed", False)) for s in starts] == [
        ("s0", 1, True), ("s0", 2, True), ("s0", 3, False)]
    assert all(s["seconds"] >= 0 for s in starts)
    assert ctx.start_seconds == [0.0]               # design.start_seconds: ready starts only
