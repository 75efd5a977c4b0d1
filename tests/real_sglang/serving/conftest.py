"""Real bench runs shared between tests, each run once: the README main command in a fresh
clone (``main_job``: the fresh-clone test and the gate validation), and the forced-slowdown run
(``forced_gemm_run``: the in-server, the kernel-attribution and the gate-validation tests).

Why the forced run is shared: the first two judge ``suites/cpu.toml`` with ``--modes
off,forced`` in one server start, a slowdown injected only in ``forced`` blocks, no GSM8K;
apart they took two server starts and 81 + 111 s of the quiet tier (issue 30 item 6). The run
is the attribution test's (``--profile``, a GEMM-only slowdown: ``SERVEGATE_INJECT_GEMM_DELAY_MS``
per forward in one burst) at the in-server test's design (4 blocks per mode, one discarded
warm-up block per mode) and at least the decode slowdown the in-server test's calibration picks
(``forced_run.injected_gemm_ms``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from forced_run import BLOCKS, ForcedRun, injected_gemm_ms
from main_job import MainJob, run_main_job
from repo_files import CPU_DESIGN, REPO_ROOT, edited_suite
from servegate_cli import run_servegate


@pytest.fixture(scope="session")
def forced_gemm_run(tmp_path_factory: pytest.TempPathFactory) -> ForcedRun:
    """``servegate bench`` of the shipped cpu suite, off and forced, the GEMM slowdown in forced
    only, profiled; run once for both tests."""
    pytest.importorskip("sglang")
    root = tmp_path_factory.mktemp("forced_gemm")
    effect, gemm_ms = injected_gemm_ms()
    suite = edited_suite(root, "cpu", CPU_DESIGN,
                         f"\nstarts = 1\nblocks = {BLOCKS}\nwarmup_blocks = 1\n")
    started = time.monotonic()
    proc = run_servegate(
        "bench", "--results-dir", root / "results", "--skip-accuracy", "--modes",
        "off,forced", "--suite", suite, "--profile", cwd=REPO_ROOT, timeout=1500,
        env={"SERVEGATE_INJECT_MODES": "forced",
             "SERVEGATE_INJECT_GEMM_DELAY_MS": f"{gemm_ms:.0f}"},
        unset=("SERVEGATE_RUNNER", "SERVEGATE_INJECT_DELAY_MS",
               "SERVEGATE_INJECT_DECODE_DELAY_MS", "SERVEGATE_MODE_CONTROL"))
    seconds = time.monotonic() - started
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    return ForcedRun(proc, run_dir, json.loads((run_dir / "run.json").read_text()), seconds,
                     effect, gemm_ms, root)


@pytest.fixture(scope="session")
def main_job(tmp_path_factory: pytest.TempPathFactory) -> MainJob:
    """The README main command in a fresh clone, run once: the fresh-clone test checks it, the
    gate validation judges against the machine baseline its bench kept (one start fewer)."""
    pytest.importorskip("sglang")
    return run_main_job(tmp_path_factory.mktemp("fresh"),
                        tmp_path_factory.mktemp("clone-local-baselines"))
