"""The launch argv bench would use (:func:`servegate.serve.launch.build_launch`), parsed by the
installed sglang's own ``ServerArgs`` parser as ``prepare_server_args`` builds it, without the
model-dependent resolution. A rejected argument names the profile file and key it came from."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Any

from servegate.config.profiles import RunnerProfile
from servegate.config.suites import Suite
from servegate.serve.launch import build_launch

_LAUNCHER = 3                   # python -m sglang.launch_server
_FLAG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9_-]*")
# argv flags servegate sets from profile / suite keys, not from a profile's `args`
_MANAGED = {"--chunked-prefill-size": "chunked_prefill_size", "--page-size": "page_size"}
# argv flags a suite's [server] table may set (the profile's dtype, if any, is one of its args)
_SUITE_KEYS = {**_MANAGED, "--dtype": "dtype"}


class LaunchRejected(Exception):
    """sglang's parser rejected the launch argv; ``where`` names the file and key."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


@dataclass(frozen=True)
class Launch:
    argv: list[str]             # server arguments (after ``python -m sglang.launch_server``)
    server: RunnerProfile       # the effective runner settings (suite overrides applied)
    section: str                # which [runners.<section>] of the profile applies


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(message)


def section_for(suite: Suite, runner: str) -> str:
    """The profile section ``Suite.server_for(runner)`` reads: the runner's own, else its
    architecture's."""
    if runner in suite.model.runners:
        return runner
    from servegate.core import runner_classes

    if runner in runner_classes.REGISTRY and runner_classes.REGISTRY[runner].arch in suite.model.runners:
        return runner_classes.REGISTRY[runner].arch
    return runner


def launch_for(suite: Suite, runner: str) -> Launch:
    """The server argv bench builds for ``runner`` (mode does not change argv, only env)."""
    server = suite.server_for(runner)
    spec = build_launch(python="python", model_path=suite.model.path, runner=server, mode="off",
                        port=30000, revision=suite.model.revision, base_env={})
    return Launch(argv=spec.argv[_LAUNCHER:], server=server, section=section_for(suite, runner))


def _where(suite: Suite, launch: Launch, message: str) -> str:
    """File and key of the first flag the message names (profile args, or a managed key)."""
    profile = f"{suite.model.source}: runners.{launch.section}"
    for flag in _FLAG.findall(message):
        name = flag.split("=", 1)[0]
        if _SUITE_KEYS.get(name) in suite.server_overrides:
            return f"{suite.source}: server.{_SUITE_KEYS[name]}"
        if name in _MANAGED:
            return f"{profile}.{_MANAGED[name]}"
        if any(arg.split("=", 1)[0] == name for arg in launch.server.args):
            return f"{profile}.args ({name})"
    return f"{profile}.args"


def parse_server_args(suite: Suite, launch: Launch) -> Any:
    """sglang's ``ServerArgs`` for the argv, or :class:`LaunchRejected` naming file and key."""
    from sglang.srt.server_args import ServerArgs

    parser = _RaisingParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    try:
        namespace = parser.parse_args(launch.argv)
    except ValueError as err:
        raise LaunchRejected(_where(suite, launch, str(err)),
                             f"sglang rejects the launch argv: {err}") from err
    try:
        return ServerArgs.from_cli_args(namespace)
    except (TypeError, ValueError) as err:
        raise LaunchRejected(_where(suite, launch, str(err)),
                             f"sglang's ServerArgs rejects the launch argv: {err}") from err
