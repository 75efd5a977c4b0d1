"""Where the checkout's parts live (one place; stdlib only, importable before any install)."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
SUITES_DIR = REPO_ROOT / "suites"
MODELS_DIR = REPO_ROOT / "models"
BASELINES_DIR = REPO_ROOT / "baselines"
RESULTS_DIR = REPO_ROOT / "results"
LOCAL_BASELINES_ENV = "SERVEGATE_LOCAL_BASELINES"


def cache_root() -> Path:
    """Where shared environments, converted models and other caches live."""
    configured = os.environ.get("SERVEGATE_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "servegate"


def local_baselines_root() -> Path:
    """This machine's own CPU-tier baselines, by hardware (never in the repository)."""
    configured = os.environ.get(LOCAL_BASELINES_ENV)
    return Path(configured) if configured else cache_root() / "baselines"
