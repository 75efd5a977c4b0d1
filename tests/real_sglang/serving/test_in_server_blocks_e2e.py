"""Modes in one real sglang CPU server, judged on blocks: the issue's tests (b) and (c) in one
server start (``suites/cpu.toml`` with ``--modes off,forced``, 4 blocks per mode and one discarded
warm-up block per mode, no GSM8K). Test (a), the A/A no-op of ``off`` vs ``on`` gating and
passing, is asserted on the README main command's run (one server for all three modes) in
``tests/real_sglang/serving/test_fresh_clone.py``. The run is shared with the kernel-attribution
test (``forced_gemm_run`` in this folder's conftest.py: one server start for both, issue 30).

(b) A slowdown injected only in ``forced`` blocks (``SERVEGATE_INJECT_MODES=forced``,
    ``SERVEGATE_INJECT_GEMM_DELAY_MS``: real GEMMs for that long in every forward, so every
    inter-token gap grows by it), judged on the forced-vs-off median TPOT and sized by the
    calibration (``tests/forced_run.py``): at least the smallest slowdown of
    +25/50/75/100/150/200 % whose interval excludes no change in 99 % of nights at the noisiest
    per-arm block log-sd measured here, which is what this test asserts. The calibration's
    80 %-power size at the typical noise is printed beside it: a default-tier test sized at 80 %
    fails about one night in five (the CI run of 2026-12-01 18:30 failed so: +25 % mean TTFT in
    6 blocks, interval [0.991, ...]). 4 blocks, not 6 (2026-12-01 22:40, for CI time): the rule
    then picks +150 % (power 1.000 at block log-sd 0.12; 6 blocks: +100 %, 0.995). Asserted: the
    interval excludes no change and points up (slower); skipped, naming the measured share, when
    the run's own interference record has more than a quarter of its blocks busy
    (``tests/contention.py``).
(c) The mode switch itself: forced blocks' saturated prefill batches are exactly the chunk, off
    blocks' are not; every block names the acknowledgement it ran under, from every scheduler
    process, with the gate the mode implies, and the server log has every acknowledgement.
"""

from __future__ import annotations

import json

import pytest
from contention import excused_if_contended
from forced_run import BLOCKS, METRIC, NOISY_BLOCK_CV, ForcedRun, typical_80_effect


@pytest.mark.e2e
@pytest.mark.timing
def test_modes_in_one_server_injected_forced_slowdown_and_attribution(
        forced_gemm_run: ForcedRun) -> None:
    shared = forced_gemm_run
    run_dir, run, seconds, effect = shared.run_dir, shared.run, shared.seconds, shared.effect
    typical_80 = typical_80_effect()
    assert run["complete"] is True and run["design"]["in_server"] is True
    assert run["injected"]["SERVEGATE_INJECT_MODES"] == "forced"
    assert run["injected"]["SERVEGATE_INJECT_GEMM_DELAY_MS"] == f"{shared.gemm_ms:.0f}"
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
    print(f"\nin-server e2e (shared with attribution): {seconds:.0f} s, at least "
          f"+{100 * effect:.0f}% median TPOT ({shared.gemm_ms:.0f} ms of GEMM per forward in "
          f"forced blocks; sized for 99 % at block log-sd {NOISY_BLOCK_CV}; the 80 % size at "
          f"the typical noise is "
          f"+{100 * (typical_80 or 0):.0f}%): forced/off ratio "
          f"{experiment['ratio']:.3f} [{low:.3f}, {high:.3f}]")
    # (b) the injected forced slowdown: the interval excludes no change, pointing up (a speed
    # assertion: skipped, naming the share, when the run's own record says the machine was busy)
    with excused_if_contended(run_dir, what=f"the injected forced slowdown's interval excludes no change "
                              f"(measured x{experiment['ratio']:.3f} [{low:.3f}, {high:.3f}])"):
        assert low > 1.0 and experiment["ratio"] > 1.0, experiment
