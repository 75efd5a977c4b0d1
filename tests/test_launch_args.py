"""Exact server argv and env per runner class and mode (GPU launches are tested here only)."""

from __future__ import annotations

from repo_files import REPO_ROOT

import os
from dataclasses import replace
from pathlib import Path

import pytest

from servegate.config import load_profile, load_suite, suite_path
from servegate.serve import launch
from servegate.serve.launch import CPU_STANDIN_DIR, EXACTFILL_HOOK_DIR, build_launch

ROOT = REPO_ROOT
GLM = load_profile(ROOT / "models" / "glm-5.2-mxfp4.toml")
SMOL = load_profile(ROOT / "models" / "smollm2-135m.toml")
SECRET = "hf_dontleakme0123456789"
BASE_ENV = {"PATH": "/usr/bin", "HF_TOKEN": SECRET, "PYTHONPATH": "/checkout/src"}

GLM_ARGS = ["--trust-remote-code", "--tp", "4", "--dsa-prefill-backend", "tilelang",
            "--dsa-decode-backend", "tilelang", "--kv-cache-dtype", "fp8_e4m3",
            "--max-prefill-tokens", "16384", "--mem-fraction-static", "0.8",
            "--max-running-requests", "80", "--watchdog-timeout", "1200"]


@pytest.mark.parametrize("runner_class", ["gfx95", "gfx942", "nvidia"])
def test_glm_argv_exact(runner_class: str) -> None:
    spec = build_launch(python="/opt/venv/bin/python", model_path="amd/GLM-5.2-MXFP4",
                        runner=GLM.for_runner(runner_class), mode="on", port=30000,
                        base_env=BASE_ENV)
    assert spec.argv == [
        "/opt/venv/bin/python", "-m", "sglang.launch_server",
        "--model-path", "amd/GLM-5.2-MXFP4", "--host", "127.0.0.1", "--port", "30000",
        "--chunked-prefill-size", "16384", "--page-size", "64", *GLM_ARGS]
    assert spec.timeout_s == 3600 and spec.chunk_size == 16384 and spec.page_size == 64


def test_glm_env_per_runner_class() -> None:
    gfx95 = build_launch(python="py", model_path="m", runner=GLM.for_runner("gfx95"),
                         mode="on", port=1, base_env=BASE_ENV)
    assert gfx95.env["SGLANG_USE_AITER"] == "1"
    assert gfx95.env["SGLANG_EXACT_CHUNK_FILL"] == "1"
    assert "SERVEGATE_FORCE_EXACT_FILL" not in gfx95.env
    assert gfx95.env["PYTHONPATH"] == os.pathsep.join([str(EXACTFILL_HOOK_DIR), "/checkout/src"])
    assert gfx95.set_env == {"SGLANG_USE_AITER": "1", "SGLANG_EXACT_CHUNK_FILL": "1",
                             "SERVEGATE_REPORT_EXACT_FILL": "1", "SERVEGATE_MODE": "on",
                             "PYTHONPATH": gfx95.env["PYTHONPATH"]}
    nvidia = build_launch(python="py", model_path="m", runner=GLM.for_runner("nvidia"),
                          mode="off", port=1, base_env=BASE_ENV)
    assert "SGLANG_USE_AITER" not in nvidia.env
    assert nvidia.env["SGLANG_EXACT_CHUNK_FILL"] == "0"
    assert str(CPU_STANDIN_DIR) not in nvidia.env["PYTHONPATH"]     # stand-in is CPU-only


def test_forced_mode_env_on_gfx942() -> None:
    spec = build_launch(python="py", model_path="m", runner=GLM.for_runner("gfx942"),
                        mode="forced", port=1, base_env=BASE_ENV)
    assert spec.env["SERVEGATE_FORCE_EXACT_FILL"] == "1"
    assert spec.env["SGLANG_EXACT_CHUNK_FILL"] == "1"
    assert spec.env["PYTHONPATH"].split(os.pathsep)[0] == str(EXACTFILL_HOOK_DIR)
    assert (EXACTFILL_HOOK_DIR / "sitecustomize.py").is_file()


@pytest.mark.parametrize("mode", ["off", "on", "forced"])
def test_launch_mode_is_exported_for_the_hook(mode: str) -> None:
    """SERVEGATE_MODE is the launch mode (the hook scopes SERVEGATE_INJECT_MODES by it); an
    inherited value never wins, and the mode-switch control path passes through extra_env."""
    spec = build_launch(python="py", model_path="m", runner=SMOL.for_runner("cpu"), mode=mode,
                        port=1, base_env={**BASE_ENV, "SERVEGATE_MODE": "stale"},
                        extra_env={"SERVEGATE_MODE_CONTROL": "/tmp/run/control.json"})
    assert spec.env["SERVEGATE_MODE"] == mode and spec.set_env["SERVEGATE_MODE"] == mode
    assert spec.env["SERVEGATE_MODE_CONTROL"] == "/tmp/run/control.json"
    assert f"SERVEGATE_MODE={mode} " in spec.display()


def test_stale_force_flag_is_not_inherited() -> None:
    spec = build_launch(python="py", model_path="m", runner=GLM.for_runner("gfx942"),
                        mode="off", port=1,
                        base_env={**BASE_ENV, "SERVEGATE_FORCE_EXACT_FILL": "1"})
    assert "SERVEGATE_FORCE_EXACT_FILL" not in spec.env


def test_cpu_suite_argv_and_env_exact() -> None:
    suite = load_suite(suite_path("cpu"))
    spec = build_launch(python="/env/bin/python", model_path="/cache/models/smol",
                        runner=suite.server_for("cpu"), mode="forced", port=4321,
                        base_env=BASE_ENV)
    assert spec.argv == [
        "/env/bin/python", "-m", "sglang.launch_server", "--model-path", "/cache/models/smol",
        "--host", "127.0.0.1", "--port", "4321", "--chunked-prefill-size", "256",
        "--page-size", "64", "--device", "cpu", "--attention-backend", "torch_native",
        "--sleep-on-idle", "--max-total-tokens", "16384"]
    assert spec.env["SGLANG_USE_CPU_ENGINE"] == "1"
    assert spec.env["PYTHONPATH"].split(os.pathsep) == [
        str(EXACTFILL_HOOK_DIR), str(CPU_STANDIN_DIR), "/checkout/src"]
    assert (CPU_STANDIN_DIR / "sgl_kernel" / "__init__.py").is_file()


def test_secrets_never_in_argv_or_logged_command() -> None:
    for runner_class, profile in (("gfx95", GLM), ("cpu", SMOL)):
        for mode in ("off", "on", "forced"):
            spec = build_launch(python="py", model_path="m",
                                runner=profile.for_runner(runner_class), mode=mode, port=1,
                                base_env=BASE_ENV, extra_env={"MY_API_KEY": "k-123"})
            assert SECRET not in " ".join(spec.argv)
            assert SECRET not in spec.display() and "HF_TOKEN" not in spec.display()
            assert "k-123" not in spec.display()
            assert spec.env["HF_TOKEN"] == SECRET          # still reaches the server


def test_revision_and_bad_inputs() -> None:
    spec = build_launch(python="py", model_path="amd/GLM-5.2-MXFP4",
                        runner=GLM.for_runner("gfx95"), mode="off", port=1, revision="r1",
                        base_env={})
    assert spec.argv[spec.argv.index("--revision") + 1] == "r1"
    with pytest.raises(ValueError, match="unknown exact-fill mode"):
        build_launch(python="py", model_path="m", runner=GLM.for_runner("gfx95"),
                     mode="fast", port=1, base_env={})
    with pytest.raises(ValueError, match="not a multiple of page size"):
        build_launch(python="py", model_path="m", mode="off", port=1, base_env={},
                     runner=replace(SMOL.for_runner("cpu"), chunked_prefill_size=250))
    assert launch.MODE_ENV["off"] == {"SGLANG_EXACT_CHUNK_FILL": "0"}
