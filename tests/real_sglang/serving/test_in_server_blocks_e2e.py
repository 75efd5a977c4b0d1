"""Modes in one real sglang CPU server, judged on blocks: the issue's tests (b) and (c) in one
server start (``suites/cpu.toml`` with ``--modes off,forced``, 4 blocks per mode and one discarded
warm-up block per mode, no GSM8K). Test (a), the A/A no-op of ``off`` vs ``on`` gating and
passing, is asserted on the README main command's run (one server for all three modes) in
``tests/real_sglang/serving/test_fresh_clone.py``.

(b) A decode slowdown injected only in ``forced`` blocks (``SERVEGATE_INJECT_MODES=forced``,
    ``SERVEGATE_INJECT_DECODE_DELAY_MS``: a sleep per decode batch adds to every inter-token gap),
    judged on the forced-vs-off median TPOT and sized by the calibration
    (:func:`calibration_pairs.paired_effect_power`: this test's design, the judge's paired
    estimator, the bursty block model): the smallest slowdown of +25/50/75/100/150/200 % whose
    interval excludes no change in 99 % of nights at the noisiest per-arm block log-sd measured
    here (``NOISY_BLOCK_CV``), which is what this test asserts. The calibration's 80 %-power size
    at the typical noise is printed beside it: a default-tier test sized at 80 % fails about one
    night in five (the CI run of 2026-12-01 18:30 failed so: +25 % mean TTFT in 6 blocks,
    interval [0.991, ...]). A decode delay, not a prefill one: the same relative slowdown costs
    15 sleeps of one TPOT per block (+1.3 s at +100 %) instead of 3 prefill sleeps of a third of a
    TTFT (+4.6 s at +75 %), so the reliable size stays cheap. 4 blocks, not 6 (2026-12-01 22:40,
    for CI time): the rule then picks +150 % (power 1.000 at block log-sd 0.12; 6 blocks: +100 %,
    0.995), 4 blocks fewer of ~8 s for 1.9 s more per forced block. Asserted: the interval
    excludes no change and points up (slower); skipped, naming the measured share, when the
    run's own interference record has more than a quarter of its blocks busy
    (``tests/contention.py``).
(c) The mode switch itself: forced blocks' saturated prefill batches are exactly the chunk, off
    blocks' are not; every block names the acknowledgement it ran under, from every scheduler
    process, with the gate the mode implies, and the server log has every acknowledgement.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from contention import skip_if_contended
from injected_delays import decode_delay_ms
from repo_files import REPO_ROOT, edited_suite
from servegate_cli import run_servegate

REPO = REPO_ROOT


BLOCKS = 4                      # per mode: fewer than the suite's 8, sized below for this design
# The noisiest per-arm block log-sd measured on this VM: TPOT block pairs of the `cpu` load gave
# 0.05-0.11 per arm (bf16, 2026-12-01), TTFT 0.04-0.095; 0.12 covers both with room.
NOISY_BLOCK_CV = 0.12
SIZING_POWER = 0.99
METRIC = "median_tpot_ms"


def _injected_delay_ms() -> tuple[float, float, float | None]:
    """(slowdown the test injects, delay in ms per decode batch, the calibration's 80 % size at
    the typical block noise, for the record)."""
    from servegate.calibration import Noise
    from servegate.calibration_pairs import paired_effect_power, smallest_paired_effect
    from servegate.commands.calibrate import CPU_BLOCK_CV
    from servegate.config import load_suite

    suite = load_suite(REPO / "suites" / "cpu.toml")
    config, starts = suite.judge, suite.effective_design.starts
    common = {"floor": config.floor(METRIC), "prior_cv": config.interaction_cv,
              "prior_dof": config.interaction_cv_dof}
    noisy = Noise(0.0, NOISY_BLOCK_CV, config.interaction_cv)
    effect = next((e for e in (0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
                   if paired_effect_power(starts, BLOCKS, e, noisy, **common)[
                       "excludes_no_change"] >= SIZING_POWER), None)
    assert effect is not None, "the design cannot reliably catch any slowdown on the grid"
    typical_80 = smallest_paired_effect(starts, BLOCKS, Noise(0.0, CPU_BLOCK_CV,
                                        config.interaction_cv), **common)
    return effect, decode_delay_ms(effect), typical_80


@pytest.mark.e2e
@pytest.mark.timing
def test_modes_in_one_server_injected_forced_slowdown_and_attribution(
        tmp_path: Path) -> None:
    pytest.importorskip("sglang")
    effect, delay_ms, typical_80 = _injected_delay_ms()
    # the shipped suite, BLOCKS blocks, one warm-up per mode
    suite = edited_suite(tmp_path, "cpu", "\nblocks = 8\n",
                         f"\nblocks = {BLOCKS}\nwarmup_blocks = 1\n")
    started = time.monotonic()
    proc = run_servegate(
        "bench", "--results-dir", tmp_path / "results", "--skip-accuracy", "--modes",
        "off,forced", "--suite", suite, cwd=REPO, timeout=1500,
        env={"SERVEGATE_INJECT_MODES": "forced",
             "SERVEGATE_INJECT_DECODE_DELAY_MS": f"{delay_ms:.1f}"},
        unset=("SERVEGATE_RUNNER", "SERVEGATE_INJECT_DELAY_MS", "SERVEGATE_MODE_CONTROL"))
    seconds = time.monotonic() - started
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    run = json.loads((run_dir / "run.json").read_text())
    assert run["complete"] is True and run["design"]["in_server"] is True
    assert run["injected"]["SERVEGATE_INJECT_MODES"] == "forced"
    assert sorted((run_dir / "server").glob("*.log")) == [run_dir / "server" / "s0.log"]
    # one discarded warm-up run per mode at its first switch, never a point
    warmups = sorted(p.name for p in (run_dir / "client").glob("warmup-*.jsonl"))
    assert warmups == ["warmup-forced-c2-s0-w0.jsonl", "warmup-off-c2-s0-w0.jsonl"], warmups
    assert len(run["points"]) == 2 * BLOCKS and run["design"]["warmup_blocks"] == 1
    # run.json timings (issue 29): the one start, every block and warm-up, measured
    timings = run["timings"]
    assert [(s["label"], s["attempt"]) for s in timings["server_starts"]] == [("s0", 1)]
    assert len(timings["blocks"]) == 2 * BLOCKS                 # modes x blocks
    assert len(timings["warmups"]) == 2 * 1                     # modes x warmup_blocks
    assert timings["switches"] and timings["gsm8k"] == []       # --skip-accuracy
    assert sorted(b["seconds"] for b in timings["blocks"]) == sorted(
        p["wall_s"] for p in run["points"])
    entries = [e for kind in ("server_starts", "warmups", "blocks", "switches")
               for e in timings[kind]]
    assert all(e["seconds"] > 0 for e in entries), timings
    assert 0 < timings["serving_seconds"] <= timings["total_seconds"] <= seconds
    assert run["design"]["start_seconds"] and run["design"]["block_seconds"]

    # (c) attribution: alignment and acknowledgements per block
    pids = None
    for point in run["points"]:
        alignment, ack = point["alignment"], point["mode_ack"]
        assert alignment["saturated_batches"] > 0, point
        if point["mode"] == "forced":
            assert alignment["aligned_fraction"] == 1.0, point
        else:
            assert alignment["aligned_fraction"] < 1.0, point
        gates = set(ack["gates"].values())
        assert gates == {point["mode"] == "forced"}, point
        assert point["exact_fill_effective"] is (point["mode"] == "forced")
        pids = pids or set(ack["gates"])
        assert set(ack["gates"]) == pids            # every scheduler process, every block
    log = (run_dir / "server" / "s0.log").read_text()
    for seq in range(max(p["mode_ack"]["seq"] for p in run["points"]) + 1):
        acked = {line.rsplit(" ", 1)[-1] for line in log.splitlines()
                 if f"servegate-hook: mode ack seq={seq} " in line}
        assert acked == pids, (seq, acked, pids)

    verdict = json.loads((run_dir / "verdict.json").read_text())
    checks = {c["name"]: c for c in verdict["checks"]}
    experiment = checks[f"experiment: forced@c2 {METRIC} vs off"]
    assert experiment["primary"] is False and experiment["gate"] is False
    low, high = experiment["interval"]
    print(f"\nin-server e2e: {seconds:.0f} s, injected +{100 * effect:.0f}% median TPOT "
          f"({delay_ms:.1f} ms per decode batch in forced blocks; sized for 99 % at block log-sd "
          f"{NOISY_BLOCK_CV}; the 80 % size at the typical noise is "
          f"+{100 * (typical_80 or 0):.0f}%): forced/off ratio "
          f"{experiment['ratio']:.3f} [{low:.3f}, {high:.3f}]")
    # (b) the injected forced slowdown: the interval excludes no change, pointing up (a speed
    # assertion: skipped, naming the share, when the run's own record says the machine was busy)
    skip_if_contended(run_dir, what=f"the injected forced slowdown's interval excludes no change "
                      f"(measured x{experiment['ratio']:.3f} [{low:.3f}, {high:.3f}])")
    assert low > 1.0 and experiment["ratio"] > 1.0, experiment
