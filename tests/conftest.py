"""Shared test plumbing: where the read-only shared data lives, and opt-in markers.

- ``sglang`` / ``e2e`` tests need the real sglang (the shared CPU env that `nox -s tests` uses);
  elsewhere they are skipped with that reason rather than failing on an ImportError.
- ``gpu`` tests run only on a real GPU runner with SERVEGATE_GPU_TESTS=1.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    configured = os.environ.get("SERVEGATE_SHARED_DIR")
    return Path(configured) if configured else REPO_ROOT.parent / "shared"


def shared_gsm8k() -> Path:
    """The real GSM8K files (MIT) beside the checkout; skip with a reason when absent."""
    directory = shared_dir() / "data" / "gsm8k"
    if not (directory / "test.jsonl").is_file():
        pytest.skip(f"real GSM8K files not found under {directory} (set SERVEGATE_SHARED_DIR)")
    return directory


@pytest.fixture(scope="session")
def shared_data() -> Path:
    data = shared_dir() / "data"
    if not data.is_dir():
        pytest.skip(f"shared data not found at {data} (set SERVEGATE_SHARED_DIR)")
    return data


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_sglang = importlib.util.find_spec("sglang") is not None
    gpu_opt_in = os.environ.get("SERVEGATE_GPU_TESTS") == "1"
    for item in items:
        if "gpu" in item.keywords and not gpu_opt_in:
            item.add_marker(pytest.mark.skip(
                reason="GPU test: runs only on a GPU runner with SERVEGATE_GPU_TESTS=1"))
        elif ("sglang" in item.keywords or "e2e" in item.keywords) and not has_sglang:
            item.add_marker(pytest.mark.skip(
                reason="needs real sglang: run through `nox -s tests` (shared CPU env)"))
