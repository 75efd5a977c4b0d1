"""A fresh interpreter with the exact-fill hook (``hooks/exactfill/sitecustomize.py``) on its
path: the hook patches sglang at start-up, so only a new process shows what it does."""

from __future__ import annotations

import functools
import os
import subprocess
import sys

from servegate.serve.launch import EXACTFILL_HOOK_DIR

# The hook's own variables: a test sets the ones it means, the caller's environment none.
HOOK_VARIABLES = ("SERVEGATE_FORCE_EXACT_FILL", "SERVEGATE_REPORT_EXACT_FILL",
                  "SERVEGATE_EMULATE_GFX95", "SERVEGATE_EMULATE_ARCH", "SERVEGATE_MODE",
                  "SERVEGATE_MODE_CONTROL",
                  "SERVEGATE_INJECT_DELAY_MS", "SERVEGATE_INJECT_DECODE_DELAY_MS",
                  "SERVEGATE_INJECT_MODES", "SERVEGATE_INJECT_GEMM_DELAY_MS")


def python_with_hook(code: str, env: dict[str, str], extra_path: list[str] | None = None
                     ) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a new interpreter with the hook (then ``extra_path``) on PYTHONPATH."""
    path = [str(EXACTFILL_HOOK_DIR), *(extra_path or [])]
    full = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(path)}
    for name in HOOK_VARIABLES:
        if name not in env:
            full.pop(name, None)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=300, check=True)


@functools.cache
def _plain_run(code: str, env: tuple[tuple[str, str], ...]) -> subprocess.CompletedProcess[str]:
    return python_with_hook(code, dict(env))


def plain_python_with_hook(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """:func:`python_with_hook` for a control run without any of the hook's own switches, run
    once per code and environment in a test process (a probe's plain run is the same for every
    parametrized case: each costs a ~10 s sglang import)."""
    assert not set(env) & set(HOOK_VARIABLES), env
    return _plain_run(code, tuple(sorted(env.items())))
