"""The server-side hooks in real interpreters: sitecustomize patches sglang's exact-fill gate
(sglang-marked: imports the real schedule_policy) and the sgl_kernel CPU stand-in's semantics."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from servegate.serve.launch import EXACTFILL_HOOK_DIR


def _python(code: str, env: dict[str, str], extra_path: list[str] | None = None
            ) -> subprocess.CompletedProcess[str]:
    path = [str(EXACTFILL_HOOK_DIR), *(extra_path or [])]
    full = {**os.environ, **env, "PYTHONPATH": os.pathsep.join(path)}
    for name in ("SERVEGATE_FORCE_EXACT_FILL", "SERVEGATE_REPORT_EXACT_FILL",
                 "SERVEGATE_EMULATE_GFX95", "SERVEGATE_MODE", "SERVEGATE_MODE_CONTROL",
                 "SERVEGATE_INJECT_DELAY_MS", "SERVEGATE_INJECT_DECODE_DELAY_MS",
                 "SERVEGATE_INJECT_MODES"):
        if name not in env:
            full.pop(name, None)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=300, check=True)


def test_hook_is_inert_without_env_and_chains(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import builtins; builtins.CHAINED = True\n")
    out = _python("import builtins; print(getattr(builtins, 'CHAINED', False))", {},
                  [str(other)])
    assert out.stdout.strip() == "True"
    assert "servegate-hook" not in out.stderr
