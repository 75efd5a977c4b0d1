"""Exact server argv and env per runner class and mode (GPU launches are tested here only)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
from repo_files import REPO_ROOT

from servegate.commands.bench_servers import server_base_env
from servegate.config import load_profile, load_suite, suite_path
from servegate.plan.design import build_live_pair_plan, device_env
from servegate.serve import launch
from servegate.serve.launch import (
    CPU_STANDIN_DIR,
    EMULATE_ARCH_ENV,
    EMULATE_GFX95_ENV,
    EXACTFILL_HOOK_DIR,
    build_launch,
    dp_attention_size,
)

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
    # a deliberate SIGTERM stop must not sleep 5 s in sglang's crash diagnostics
    assert spec.env["SGLANG_PYSPY_DUMP_BEFORE_CRASH"] == "0"
    assert spec.env["SGLANG_CUDA_COREDUMP_BEFORE_CRASH"] == "0"
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


# Runner class ``cpu-gfx95``: a CPU server whose exact-fill device check sees gfx95.
#
# The one double is servegate's, at sglang's device check (``SERVEGATE_EMULATE_GFX95``, in the
# exact-fill hook); these tests pin what surrounds it: chosen only by name, the profile section
# that sets it, an inherited value never reaching another class's server, the read-back that ties
# every gate report to the double (and forbids the double on real devices), and bench judging the
# suite's in-run claims without a stored baseline. The real-server path is
# ``tests/test_bench_e2e.py::test_cpu_gfx95_suite_end_to_end``; the hook in a real sglang process
# is in ``tests/real_sglang/scheduler/test_hooks.py``.


def test_suite_and_profile_section() -> None:
    suite = load_suite(suite_path("cpu-gfx95"))
    assert suite.runner_classes() == ("cpu-gfx95",) and suite.modes == ("off", "on")
    assert isinstance(suite.judge_table, dict) and "claims" in suite.judge_table
    server = suite.server_for("cpu-gfx95")
    assert server.runner_class == "cpu-gfx95"                  # its own section, not [cpu]
    # sglang's crash diagnostics off: each deliberate SIGTERM stop would otherwise sleep 5 s
    assert server.env == {"SGLANG_USE_CPU_ENGINE": "1", EMULATE_GFX95_ENV: "1",
                          "SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0",
                          "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "0"}
    # the cpu profile's args, served in fp32 (the suite's [server] dtype)
    assert server.cpu_standin and server.args == (*load_suite(suite_path("cpu")).server_for(
        "cpu").args, "--dtype", "float32")


def test_only_the_profile_sets_the_double() -> None:
    base = {EMULATE_GFX95_ENV: "1", EMULATE_ARCH_ENV: "gfx942", "PATH": "/usr/bin"}
    cpu = build_launch(python="py", model_path="m", runner=load_suite(suite_path("cpu"))
                       .server_for("cpu"), mode="on", port=1, base_env=base)
    assert EMULATE_GFX95_ENV not in cpu.env and EMULATE_ARCH_ENV not in cpu.env  # inherited
    emulated = build_launch(python="py", model_path="m", runner=load_suite(
        suite_path("cpu-gfx95")).server_for("cpu-gfx95"), mode="off", port=1, base_env={})
    assert emulated.env[EMULATE_GFX95_ENV] == "1" and emulated.set_env[EMULATE_GFX95_ENV] == "1"
    assert emulated.env["SGLANG_EXACT_CHUNK_FILL"] == "0"       # off stays the real gate's off


# DP attention: every DP rank's scheduler logs its own prefill lines; each has chunk // attn_dp.
#
# The inputs are REAL prefill lines from sglang 0.5.23 CPU servers (tests/data/sglang-cpu-logs, one
# rank, no prefix), re-tagged the way sglang tags a DP rank's lines:
#
# - the prefix: ``configure_scheduler_process`` (sglang/srt/managers/scheduler.py lines 6279-6291)
#   builds ``" DP{dp_rank}"`` when the rank has a DP rank, then ``" TP{tp_rank}"`` when
#   ``tp_size > 1`` (PP / ATTN_CP / MOE_DP / EP only when those sizes are > 1);
# - the format: ``configure_logger`` (sglang/srt/utils/common.py lines 2629-2630) puts it inside
#   the stamp: ``[%(asctime)s{prefix}] %(message)s``;
# - only each DP group's attention-TP rank 0 logs (``is_stats_logging_rank``,
#   sglang/srt/observability/metrics_collector.py lines 1361-1363), so with ``--tp 4
#   --attn-dp-size 2`` the two streams are ``DP0 TP0`` and ``DP1 TP2``.
#
# The sglang-marked tests format a real line through sglang's own ``configure_logger`` and check
# the launch argv's attention-DP size against sglang's own ``ServerArgs`` resolution.


@pytest.mark.parametrize(("args", "expected"), [
    ([], 1),
    (["--tp", "4", "--dp-size", "2"], 1),                             # replicas: whole chunk
    (["--tp", "4", "--dp-size", "2", "--enable-dp-attention"], 2),   # deprecated spelling
    (["--tp", "4", "--attn-dp-size", "2"], 2),
    (["--tp", "8", "--attention-data-parallel-size=4"], 4),
])
def test_attention_dp_size_from_the_launch_args(args: list[str], expected: int) -> None:
    assert dp_attention_size(args) == expected


# ------------------------------------- a live pair's two servers: argv and environment exactly

ENV = {"PATH": "/usr/bin", "HF_TOKEN": "hf_x", "SERVEGATE_INJECT_DELAY_MS": "30",
       "SERVEGATE_INJECT_ARMS": "head"}


TREES = {"base": Path("/trees/base"), "head": Path("/trees/head")}


def _specs(start: int) -> dict[str, object]:
    pair = build_live_pair_plan(["off", "on"], [4], [16], starts=2, blocks=2, seed=1,
                                gpus=8, per_server=4)[start]
    specs = {}
    for slot, devices in zip(pair.slots, pair.devices, strict=True):
        specs[slot.arm] = build_launch(
            python="/opt/venv/bin/python", model_path="amd/GLM-5.2-MXFP4",
            runner=GLM.for_runner("gfx95"), mode="off", port=30000 + len(specs),
            sglang_src=TREES[slot.arm], base_env=server_base_env(slot.arm, ENV),
            extra_env=device_env("gfx95", devices))
    return specs


def test_both_servers_argv_and_environment_exactly() -> None:
    specs = _specs(0)
    base, head = specs["base"], specs["head"]
    assert base.argv[:6] == ["/opt/venv/bin/python", "-m", "sglang.launch_server",
                             "--model-path", "amd/GLM-5.2-MXFP4", "--host"]
    assert [a for a in base.argv if a != "30000"] == [a for a in head.argv if a != "30001"]
    assert base.argv[base.argv.index("--port") + 1] == "30000"
    assert head.argv[head.argv.index("--port") + 1] == "30001"
    assert base.env["HIP_VISIBLE_DEVICES"] == "0,1,2,3"
    assert head.env["HIP_VISIBLE_DEVICES"] == "4,5,6,7"
    assert base.env["PYTHONPATH"].split(":")[:2] == ["/trees/base", str(EXACTFILL_HOOK_DIR)]
    assert head.env["PYTHONPATH"].split(":")[:2] == ["/trees/head", str(EXACTFILL_HOOK_DIR)]
    assert "SERVEGATE_INJECT_DELAY_MS" not in base.env
    assert head.env["SERVEGATE_INJECT_DELAY_MS"] == "30"
    assert base.env["HF_TOKEN"] == head.env["HF_TOKEN"] == "hf_x"
    assert "hf_x" not in base.display() and "hf_x" not in head.display()
    only_base = set(base.env) - set(head.env)
    only_head = set(head.env) - set(base.env)
    assert only_base == set() and only_head == {"SERVEGATE_INJECT_DELAY_MS",
                                                "SERVEGATE_INJECT_ARMS"}


def test_the_second_start_swaps_the_gpu_halves() -> None:
    specs = _specs(1)
    assert specs["base"].env["HIP_VISIBLE_DEVICES"] == "4,5,6,7"
    assert specs["head"].env["HIP_VISIBLE_DEVICES"] == "0,1,2,3"
