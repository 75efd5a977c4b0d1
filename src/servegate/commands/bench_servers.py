"""Server start-up for ``servegate bench``: launch a slot's server with its environment, retry a
taken port on a fresh one, start several servers at once (a live pair) and stop every one of
them when any fails."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from servegate.commands import bench_timings
from servegate.commands.bench_context import Context
from servegate.plan.design import ServerSlot
from servegate.serve.launch import build_launch
from servegate.serve.modeswitch import ModeControl
from servegate.serve.process import PortInUse, Server, free_port

INJECT_PREFIX = "SERVEGATE_INJECT_"     # the hook's controlled-slowdown variables
INJECT_ARMS = "SERVEGATE_INJECT_ARMS"   # head vs base: the arms whose servers get them
PORT_ATTEMPTS = 3                        # fresh ports to try when the chosen one is taken


def server_base_env(arm: str, environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a server inherits: ``SERVEGATE_INJECT_ARMS`` (comma-separated arms)
    scopes the injected slowdowns (``SERVEGATE_INJECT_*``) to those trees' servers."""
    env = dict(os.environ if environ is None else environ)
    scope = {a.strip() for a in env.get(INJECT_ARMS, "").split(",") if a.strip()}
    if scope and arm not in scope:
        env = {k: v for k, v in env.items() if not k.startswith(INJECT_PREFIX)}
    return env


@dataclass(frozen=True)
class ServerRequest:
    """One server to start: its slot, log, mode control (in-server: launched with exact fill
    off, the hook's mode switch in charge) and device variables."""

    slot: ServerSlot
    log_rel: str
    control: ModeControl | None = None
    devices: dict[str, str] | None = None


def _launch(ctx: Context, request: ServerRequest) -> Server:
    slot, control = request.slot, request.control
    runner_profile = ctx.suite.server_for(ctx.detected.runner_class)
    if control is not None:
        # every launch attempt starts at seq 0 with no acknowledgement on file: a retried
        # start's killed schedulers (a port taken while loading) acked seq 0 too
        control.write(slot.mode, 0)
    extra = {} if control is None else {**control.env(), "SERVEGATE_REPORT_EXACT_FILL": ""}
    extra.update(request.devices or {})
    tree = ctx.trees.get(slot.arm)
    spec = build_launch(
        python=ctx.python, model_path=ctx.model_dir, runner=runner_profile,
        mode=slot.mode if control is None else "off", port=free_port(),
        revision=ctx.suite.model.revision, base_env=server_base_env(slot.arm),
        sglang_src=tree.import_root if tree else None, extra_env=extra)
    server = Server(spec, ctx.run_dir / request.log_rel)
    ctx.console.log(f"server {slot.index + 1}: {slot.label}, repeat {slot.repeat}: "
                    f"starting ({spec.display()})")
    server.start()
    return server


def start_servers(ctx: Context, requests: list[ServerRequest]) -> list[Server]:
    """Start every requested server at once, then wait until each is ready (a live pair loads
    both trees together: the devices do not idle through two loads in series). A taken port is
    retried on a fresh one, up to PORT_ATTEMPTS per server; on any failure every server
    started here is stopped before the error propagates."""
    ready: dict[int, Server] = {}
    attempts = dict.fromkeys(range(len(requests)), 0)
    launched: dict[int, Server] = {}
    launched_at: dict[int, float] = {}

    def timed(index: int, failed: bool = False) -> None:
        """run.json timings: this attempt's launch -> ready (or -> its failure)."""
        extra = {"failed": True} if failed else {}
        bench_timings.add(ctx.run, "server_starts", time.monotonic() - launched_at[index],
                          label=requests[index].slot.label, attempt=attempts[index], **extra)

    try:
        while len(ready) < len(requests):
            for index, request in enumerate(requests):
                if index in ready or index in launched:
                    continue
                attempts[index] += 1
                launched_at[index] = time.monotonic()
                try:
                    server = _launch(ctx, request)
                except PortInUse as err:
                    timed(index, failed=True)
                    _port_retry(ctx, err, attempts[index])
                    continue
                launched[index] = server
            for index in sorted(launched):
                server = launched.pop(index)
                try:
                    waited = server.wait_ready()
                except PortInUse as err:
                    timed(index, failed=True)
                    server.stop()
                    if server.log_path.is_file():   # keep the failed attempt's log
                        server.log_path.replace(
                            server.log_path.with_suffix(f".attempt{attempts[index]}.log"))
                    _port_retry(ctx, err, attempts[index])
                    continue
                except BaseException:
                    timed(index, failed=True)
                    server.stop()
                    raise
                timed(index)
                ctx.console.log(f"server ready after {waited:.0f} s at {server.base_url}")
                ctx.start_seconds.append(round(waited, 1))
                ready[index] = server
    except BaseException:
        for server in [*launched.values(), *ready.values()]:
            server.stop()
        raise
    return [ready[i] for i in range(len(requests))]


def _port_retry(ctx: Context, err: PortInUse, attempt: int) -> None:
    """Log a taken port and go on, or give up after PORT_ATTEMPTS fresh ports."""
    if attempt >= PORT_ATTEMPTS:
        raise PortInUse(f"{err} ({PORT_ATTEMPTS} ports tried)", err.log_tail) from err
    ctx.console.log(f"{err}; retrying on another port")

