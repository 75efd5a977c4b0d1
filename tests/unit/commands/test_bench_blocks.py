"""bench's block measurement: what the client worker of an in-server start imports."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

import servegate
from servegate.commands.bench_blocks import client_point, worker_env
from servegate.config import load_suite, suite_path
from servegate.measure.client import client_argv
from servegate.plan.design import build_block_plan

# The folder this checkout's servegate package is imported from (src/ here).
HERE = os.path.dirname(os.path.dirname(os.path.abspath(servegate.__file__)))


def test_the_worker_imports_the_arms_tree_first_then_this_checkout() -> None:
    """An arm's sglang tree stays first on the worker's path; servegate comes after it, once."""
    env = worker_env({"PYTHONPATH": "/trees/head", "HF_TOKEN": "x"})
    assert env["PYTHONPATH"].split(os.pathsep) == ["/trees/head", HERE]
    assert env["HF_TOKEN"] == "x"
    assert worker_env(env)["PYTHONPATH"] == env["PYTHONPATH"]       # never added twice


def test_without_a_tree_the_worker_inherits_this_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", "")
    monkeypatch.setenv("SERVEGATE_PROBE", "1")
    env = worker_env(None)
    assert env["PYTHONPATH"] == HERE and env["SERVEGATE_PROBE"] == "1"


def test_each_point_asks_the_client_for_its_shaped_output_length(tmp_path: Path) -> None:
    """premerge shapes its points (c16: 256 output tokens, c64: 16): the client argv of each
    planned point carries its own --random-output-len, every prompt the full 8100 tokens."""
    suite = load_suite(suite_path("premerge"))
    ctx = SimpleNamespace(suite=suite, model_dir="/models/glm")
    server = SimpleNamespace(base_url="http://127.0.0.1:30000")
    [slot] = build_block_plan(("off",), suite.load.concurrency, suite.load.num_prompts, 1, 1,
                              suite.seed)
    asked = {}
    for planned in slot.points:
        argv = client_argv("/py", client_point(ctx, server, planned,  # type: ignore[arg-type]
                                               tmp_path / "c.jsonl", planned.seed))
        flag = dict(itertools.pairwise(argv))
        asked[planned.concurrency] = (int(flag["--random-input-len"]),
                                      int(flag["--random-output-len"]),
                                      int(flag["--num-prompts"]))
    assert asked == {16: (8100, 256, 16), 64: (8100, 16, 128)}
