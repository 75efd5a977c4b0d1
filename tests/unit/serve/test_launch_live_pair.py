"""The argv and environment of both servers of a live pair on an 8-GPU MI355X runner, exactly:
the same argv but for the port, each tree first on its own PYTHONPATH, disjoint device sets
(HIP_VISIBLE_DEVICES), swapped in the second start, and an injected slowdown only where
``SERVEGATE_INJECT_ARMS`` sends it."""

from __future__ import annotations

from pathlib import Path

from servegate.bench import server_base_env
from servegate.config import load_profile
from servegate.plan import build_live_pair_plan, device_env
from servegate.serve.launch import EXACTFILL_HOOK_DIR, build_launch

ROOT = Path(__file__).resolve().parents[3]
GLM = load_profile(ROOT / "models" / "glm-5.2-mxfp4.toml")
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
