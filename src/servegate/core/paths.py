"""Where the checkout's parts live (one place; stdlib only, importable before any install)."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]
SUITES_DIR = REPO_ROOT / "suites"
MODELS_DIR = REPO_ROOT / "models"
BASELINES_DIR = REPO_ROOT / "baselines"
RESULTS_DIR = REPO_ROOT / "results"
