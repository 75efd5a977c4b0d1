"""The server-side hooks in real interpreters: sitecustomize patches sglang's exact-fill gate
(sglang-marked: imports the real schedule_policy) and the sgl_kernel CPU stand-in's semantics."""

from __future__ import annotations

from pathlib import Path

from hook_runs import python_with_hook


def test_hook_is_inert_without_env_and_chains(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "sitecustomize.py").write_text("import builtins; builtins.CHAINED = True\n")
    out = python_with_hook("import builtins; print(getattr(builtins, 'CHAINED', False))", {},
                           [str(other)])
    assert out.stdout.strip() == "True"
    assert "servegate-hook" not in out.stderr
