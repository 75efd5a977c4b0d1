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
from servegate.plan.design import flag_value

HOOKS_DIR = Path(__file__).resolve().parents[1] / "hooks"
EXACTFILL_HOOK_DIR = HOOKS_DIR / "exactfill"          # sitecustomize.py (all runner classes)
CPU_STANDIN_DIR = HOOKS_DIR / "cpu_standin"           # sgl_kernel CPU stand-in (cpu only)
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|CREDENTIAL|_KEY$", re.I)

# The device double (servegate.core.runner_classes: emulated classes) is set only by a profile section; a
# value inherited from the caller's environment never reaches a server.
EMULATE_GFX95_ENV = "SERVEGATE_EMULATE_GFX95"
EMULATE_ARCH_ENV = "SERVEGATE_EMULATE_ARCH"       # the general form: a device string
LAUNCH_MODE_ENV = "SERVEGATE_MODE"          # the launch mode, read by the exact-fill hook
# sglang 0.5.23 spellings (srt/arg_groups/fields/parallel.py lines 73-90 and 192-194;
# srt/server_args.py line 419 for the deprecated --enable-dp-attention).
_ATTN_DP_FLAGS = ("--attn-dp-size", "--attention-data-parallel-size")
_DP_FLAGS = ("--dp-size", "--data-parallel-size")

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
    chunk_size: int                 # --chunked-prefill-size as launched
    page_size: int | None
    dp_attention_size: int = 1      # attention-DP ranks: each schedules chunk_size // this

    def display(self) -> str:
        """The command as it may be logged: servegate's own env settings plus argv."""
        shown = [f"{k}={v}" for k, v in sorted(self.set_env.items()) if not SECRET_NAME.search(k)]
        return " ".join([*shown, *self.argv])


def dp_attention_size(args: list[str]) -> int:
    """Attention-DP ranks the argv asks for, as sglang resolves them: ``--attn-dp-size N``, or
    the deprecated ``--dp-size N --enable-dp-attention`` (srt/arg_groups/parallel_hook.py lines
    39-61: attn_dp_size = dp_size when attn_dp_size is 1). Plain ``--dp-size`` replicas: 1
    (each replica keeps the whole chunk)."""
    try:
        attn = int(flag_value(args, _ATTN_DP_FLAGS) or 1)
        dp = int(flag_value(args, _DP_FLAGS) or 1)
    except ValueError as err:
        raise ValueError(f"DP size in the launch arguments is not an integer: {err}") from None
    if "--enable-dp-attention" in args and attn == 1:
        attn = dp
    if attn < 1:
        raise ValueError(f"attention DP size {attn}: expected >= 1")
    return attn


def build_launch(
    *,
    python: str,
    model_path: str,
    runner: RunnerProfile,
    mode: str,
    port: int,
    host: str = "127.0.0.1",
    revision: str | None = None,
    sglang_src: Path | None = None,
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
    attn_dp = dp_attention_size(list(runner.args))
    if chunk % attn_dp or (page and (chunk // attn_dp) % page):
        raise ValueError(f"chunked prefill size {chunk} split over {attn_dp} attention-DP ranks "
                         f"is not a whole number of {page or 1}-token pages per rank")
    argv = [python, "-m", "sglang.launch_server", "--model-path", model_path,
            "--host", host, "--port", str(port)]
    if revision:
        argv += ["--revision", revision]
    argv += ["--chunked-prefill-size", str(chunk)]
    if page:
        argv += ["--page-size", str(page)]
    argv += list(runner.args)

    # The code under test (--sglang-src) goes first, then our hooks (no sglang in them).
    hook_path = ([str(sglang_src)] if sglang_src else []) + [str(EXACTFILL_HOOK_DIR)]
    if runner.cpu_standin:
        hook_path.append(str(CPU_STANDIN_DIR))
    base = dict(os.environ if base_env is None else base_env)
    # Our hook dirs go first; the caller's PYTHONPATH (e.g. the checkout's src) stays behind.
    inherited = base.get("PYTHONPATH", "")
    pythonpath = os.pathsep.join(hook_path + ([inherited] if inherited else []))
    # SERVEGATE_MODE: the launch mode, for the hook's mode-scoped injection (SERVEGATE_INJECT_MODES)
    set_env = {**runner.env, **MODE_ENV[mode], "SERVEGATE_REPORT_EXACT_FILL": "1",
               LAUNCH_MODE_ENV: mode, **(extra_env or {})}
    if mode != "forced":
        base.pop("SERVEGATE_FORCE_EXACT_FILL", None)
    base.pop(EMULATE_GFX95_ENV, None)       # only the profile's own section may set them
    base.pop(EMULATE_ARCH_ENV, None)
    base.pop("SERVEGATE_MODE_CONTROL", None)  # only bench's in-server start may (extra_env)
    env = {**base, **set_env, "PYTHONPATH": pythonpath, "PYTHONUNBUFFERED": "1"}
    return LaunchSpec(argv=argv, env=env, set_env={**set_env, "PYTHONPATH": pythonpath},
                      health_path=runner.health_path, timeout_s=runner.launch_timeout_s,
                      chunk_size=chunk, page_size=page,
                      dp_attention_size=attn_dp)
