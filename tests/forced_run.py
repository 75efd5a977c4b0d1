"""The shared forced-slowdown run's design and sizing (fixture: tests/real_sglang/serving/conftest.py).

Sizing: the injected GEMM time per forward is the larger of what each test needs.
- In-server (test_in_server_blocks_e2e.py): the smallest decode slowdown of +25 ... +200 % whose
  forced-vs-off median TPOT interval excludes no change in 99 % of nights at the noisiest
  per-arm block log-sd measured here (``NOISY_BLOCK_CV``), by the calibration
  (:func:`calibration_pairs.paired_effect_power`: this design, the judge's paired estimator,
  the bursty block model); as a delay per decode forward from the committed baseline's ``off``
  median TPOT (:func:`injected_delays.decode_delay_ms`). Every decode forward spends the GEMM
  time once, so it adds to every inter-token gap as a decode sleep would.
- Attribution (test_profile_attribution_e2e.py): ``ATTRIBUTION_GEMM_MS`` = 250 ms a forward
  against ~160-290 ms of GEMM per prefill forward and ~30 ms per decode forward (mostly the
  logits' GEMM over the 49k vocabulary): GEMM per decode forward ~x9, per prefill forward ~x2,
  past the `cpu` suite's 40 % floor; the interval carries an untouched family's between-block
  spread (``[profile] block_cv`` 0.15: measured up to x0.78).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from injected_delays import decode_delay_ms
from repo_files import REPO_ROOT

BLOCKS = 4                      # per mode, one warm-up block per mode before them
ATTRIBUTION_GEMM_MS = 250.0
# The noisiest per-arm block log-sd measured on this VM: TPOT block pairs of the `cpu` load gave
# 0.05-0.11 per arm (bf16, 2026-12-01), TTFT 0.04-0.095; 0.12 covers both with room.
NOISY_BLOCK_CV = 0.12
SIZING_POWER = 0.99
METRIC = "median_tpot_ms"
EFFECTS = (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)


@dataclass(frozen=True)
class ForcedRun:
    """The run: its process, folder, run.json, wall seconds, the in-server sizing (relative
    slowdown picked, GEMM ms injected per forward) and the fixture's scratch folder."""

    proc: subprocess.CompletedProcess[str]
    run_dir: Path
    run: dict[str, Any]
    seconds: float
    effect: float
    gemm_ms: float
    scratch: Path


def _paired_power_inputs() -> tuple[int, Any, dict[str, float]]:
    """(server starts, the cpu suite's judge config, the paired estimator's floor and prior
    for ``METRIC``): what every sizing of this design passes to the calibration."""
    from servegate.config import load_suite

    suite = load_suite(REPO_ROOT / "suites" / "cpu.toml")
    config = suite.judge
    return suite.effective_design.starts, config, {
        "floor": config.floor(METRIC), "prior_cv": config.interaction_cv,
        "prior_dof": config.interaction_cv_dof}


def reliable_decode_effect() -> float:
    """The in-server design's smallest reliably caught decode slowdown (see the module doc)."""
    from servegate.calibration import Noise
    from servegate.calibration.pairs import paired_effect_power

    starts, config, common = _paired_power_inputs()
    noisy = Noise(0.0, NOISY_BLOCK_CV, config.interaction_cv)
    effect = next((e for e in EFFECTS if paired_effect_power(starts, BLOCKS, e, noisy, **common)[
        "excludes_no_change"] >= SIZING_POWER), None)
    assert effect is not None, "the design cannot reliably catch any slowdown on the grid"
    return effect


def typical_80_effect() -> float | None:
    """The calibration's 80 %-power slowdown at the typical CPU block noise (for the record)."""
    from servegate.calibration import Noise
    from servegate.calibration.pairs import smallest_paired_effect
    from servegate.commands.calibrate import CPU_BLOCK_CV

    starts, config, common = _paired_power_inputs()
    return smallest_paired_effect(starts, BLOCKS, Noise(0.0, CPU_BLOCK_CV, config.interaction_cv),
                                  **common)


def injected_gemm_ms() -> tuple[float, float]:
    """(the in-server test's reliable decode slowdown, GEMM ms per forward to inject)."""
    effect = reliable_decode_effect()
    return effect, max(ATTRIBUTION_GEMM_MS, decode_delay_ms(effect))
