"""The gfx95 path end to end on a CPU: ``servegate bench --suite cpu-gfx95 --runner cpu-gfx95``.

One real sglang CPU server (SmolLM2-135M) for both modes, switched in place, whose exact-fill
device check sees an emulated gfx95 device (servegate's one device double,
``SERVEGATE_EMULATE_GFX95``, set by the profile's ``[runners.cpu-gfx95]`` section). Asserted:
in every ``on`` block exact fill is effective through sglang's real gate (its ``lru_cache``
cleared at the switch, the double answering the device check) and in every ``off`` block it is
not, acknowledged by every scheduler process; every saturated ``on`` prefill batch is exactly
the chunk (256); the server's log carries the double's line, recorded on every point; and bench
judges the run without a stored baseline, writing the gated TTFT claim (paired over blocks)
into verdict.json. Its verdict is whatever the CPU measures (the path is under test, not a
speed-up).

Smaller than the suite (2 blocks per mode, no GSM8K) to keep it short: a copy of
``suites/cpu-gfx95.toml`` with only ``blocks`` changed. Run it alone (two CPU servers at once,
or any other CPU-heavy process, slow a server several times).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from repo_files import REPO_ROOT, edited_suite
from servegate_cli import run_servegate

REPO = REPO_ROOT


@pytest.mark.e2e
def test_cpu_gfx95_suite_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("sglang")
    suite = edited_suite(tmp_path, "cpu-gfx95", "\nblocks = 3\n", "\nblocks = 2\n")
    started = time.monotonic()
    proc = run_servegate(
        "bench", "--suite", suite, "--runner", "cpu-gfx95", "--results-dir",
        tmp_path / "results", "--skip-accuracy", cwd=REPO, timeout=1200,
        unset=("SERVEGATE_EMULATE_GFX95",     # only the profile may set it
               "SERVEGATE_RUNNER"))
    seconds = time.monotonic() - started
    assert proc.returncode in (0, 1), proc.stderr[-3000:]       # judged: pass/inconclusive or not
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    run = json.loads((run_dir / "run.json").read_text())
    assert run["complete"] is True and run["runner_class"] == "cpu-gfx95"
    assert run["design"]["in_server"] is True and run["design"]["starts"] == 1
    assert sorted((run_dir / "server").glob("*.log")) == [run_dir / "server" / "s0.log"]
    assert "gfx95 emulated" in run["fingerprint"]["device_double"]
    points = run["points"]
    assert sorted((p["mode"], p["block"]) for p in points) == [
        ("off", 0), ("off", 1), ("on", 0), ("on", 1)]
    pids = None
    for point in points:
        assert point["device_double"].startswith(
            "gfx95 emulated (gcnArchName=gfx950:sramecc+:xnack-) in pids [")
        on = point["mode"] == "on"
        assert point["exact_fill_effective"] is on, point
        assert set(point["mode_ack"]["gates"].values()) == {on}, point  # the real gate's answer
        pids = pids or set(point["mode_ack"]["gates"])
        assert set(point["mode_ack"]["gates"]) == pids                 # every scheduler process
        alignment = point["alignment"]
        assert alignment["chunk_size"] == 256 and alignment["saturated_batches"] > 0
        if on:
            assert alignment["aligned_fraction"] == 1.0
            assert alignment["min_saturated_tokens"] == 256
        else:
            assert alignment["aligned_fraction"] < 1.0
    # the server log: the double ran in the processes that evaluated the real gate
    log = (run_dir / "server" / "s0.log").read_text()
    assert "servegate-hook: device double: gfx95 emulated" in log
    assert "exact chunk fill forced" not in log
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["baseline"] is None and verdict["exit_code"] == proc.returncode
    claims = [c for c in verdict["checks"] if c["kind"] == "claim"
              and c["metric"] == "mean_ttft_ms"]
    assert len(claims) == 1, [c["name"] for c in verdict["checks"]]
    claim = claims[0]
    assert claim["name"].startswith("claim: on vs off mean_ttft_ms at c4 improves >= 4.0%")
    assert claim["gate"] is True and claim["primary"] is True
    assert claim["verdict"] in ("pass", "regression", "inconclusive")
    assert claim["interval"] is not None and claim["interval"][0] <= claim["interval"][1]
    assert claim["name"] in verdict["family"]["checks"]
    print(f"\ncpu-gfx95 e2e: {seconds:.0f} s, exit {proc.returncode}, claim {claim['verdict']} "
          f"(ratio interval {claim['interval']})")
