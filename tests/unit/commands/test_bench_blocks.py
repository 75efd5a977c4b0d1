"""bench's block measurement: what the client worker of an in-server start imports."""

from __future__ import annotations

import os

import pytest

import servegate
from servegate.commands.bench_blocks import worker_env

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
