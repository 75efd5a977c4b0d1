"""Build the sglang server's argument list and environment for one (profile, runner, mode).

Argument lists only (never a shell string). Secrets stay in the environment the server inherits
(e.g. HF_TOKEN for gated downloads) and are never put into argv or into anything logged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from servegate.config.profiles import RunnerProfile

HOOKS_DIR = Path(__file__).resolve().parents[1] / "hooks"
EXACTFILL_HOOK_DIR = HOOKS_DIR / "exactfill"          # sitecustomize.py (all runner classes)
CPU_STANDIN_DIR = HOOKS_DIR / "cpu_standin"           # sgl_kernel CPU stand-in (cpu only)
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|CREDENTIAL|_KEY$", re.I)

MODE_ENV: dict[str, dict[str, str]] = {
    "off": {"SGLANG_EXACT_CHUNK_FILL": "0"},
    "on": {"SGLANG_EXACT_CHUNK_FILL": "1"},
    "forced": {"SGLANG_EXACT_CHUNK_FILL": "1", "SERVEGATE_FORCE_EXACT_FILL": "1"},
}


@dataclass(frozen=True)
class LaunchSpec:
    argv: list[str]
    env: dict[str, str]             # full environment for the server process
    set_env: dict[str, str]         # what servegate set (safe to log: no inherited secrets)
    health_path: str
    timeout_s: int
    chunk_size: int
    page_size: int | None

    def display(self) -> str:
        """The command as it may be logged: servegate's own env settings plus argv."""
        shown = [f"{k}={v}" for k, v in sorted(self.set_env.items()) if not SECRET_NAME.search(k)]
        return " ".join([*shown, *self.argv])


def build_launch(
    *,
    python: str,
    model_path: str,
    runner: RunnerProfile,
    mode: str,
    port: int,
    host: str = "127.0.0.1",
    revision: str | None = None,
    base_env: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> LaunchSpec:
    """argv + env for ``python -m sglang.launch_server`` from the effective runner settings
    (``Suite.server_for``: the profile with the suite's overrides already applied)."""
    if mode not in MODE_ENV:
        raise ValueError(f"unknown exact-fill mode {mode!r} (expected {tuple(MODE_ENV)})")
    chunk, page = runner.chunked_prefill_size, runner.page_size
    if page and chunk % page:
        raise ValueError(f"chunked prefill size {chunk} is not a multiple of page size {page}")
    argv = [python, "-m", "sglang.launch_server", "--model-path", model_path,
            "--host", host, "--port", str(port)]
    if revision:
        argv += ["--revision", revision]
    argv += ["--chunked-prefill-size", str(chunk)]
    if page:
        argv += ["--page-size", str(page)]
    argv += list(runner.args)

    hook_path = [str(EXACTFILL_HOOK_DIR)]
    if runner.cpu_standin:
        hook_path.append(str(CPU_STANDIN_DIR))
    base = dict(os.environ if base_env is None else base_env)
    # Our hook dirs go first; the caller's PYTHONPATH (e.g. the checkout's src) stays behind.
    inherited = base.get("PYTHONPATH", "")
    pythonpath = os.pathsep.join(hook_path + ([inherited] if inherited else []))
    set_env = {**runner.env, **MODE_ENV[mode], "SERVEGATE_REPORT_EXACT_FILL": "1",
               **(extra_env or {})}
    if mode != "forced":
        base.pop("SERVEGATE_FORCE_EXACT_FILL", None)
    env = {**base, **set_env, "PYTHONPATH": pythonpath, "PYTHONUNBUFFERED": "1"}
    return LaunchSpec(argv=argv, env=env, set_env={**set_env, "PYTHONPATH": pythonpath},
                      health_path=runner.health_path, timeout_s=runner.launch_timeout_s,
                      chunk_size=chunk, page_size=page)
