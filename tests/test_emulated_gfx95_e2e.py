"""The gfx95 path end to end on a CPU: ``servegate bench --suite cpu-gfx95 --runner cpu-gfx95``.

A real sglang CPU server (SmolLM2-135M) per mode, whose exact-fill device check sees an emulated
gfx95 device (servegate's one device double, ``SERVEGATE_EMULATE_GFX95``, set by the profile's
``[runners.cpu-gfx95]`` section). Asserted: ``on`` is effective through sglang's real gate and
``off`` is not, read back from every server process; every saturated ``on`` prefill batch is
exactly the chunk (256); each server's log carries the double's line, recorded in run.json; and
bench judges the run without a stored baseline, writing a computed gated TTFT claim into
verdict.json. Its verdict is whatever the CPU measures (the path is under test, not a speed-up).

Smaller than the suite (one point of 8 prompts per mode, no GSM8K) to keep it to ~2 minutes:
a copy of ``suites/cpu-gfx95.toml`` with only ``num_prompts`` changed. Hold the machine's server
lock when running it next to other server tests (two CPU servers at once slow decode 20-30x).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.e2e
def test_cpu_gfx95_suite_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("sglang")
    suite = tmp_path / "cpu-gfx95.toml"
    text = (REPO / "suites" / "cpu-gfx95.toml").read_text()
    assert "num_prompts = [12]" in text
    suite.write_text(text.replace("num_prompts = [12]", "num_prompts = [8]"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("SERVEGATE_EMULATE_GFX95", None)        # only the profile may set it
    env.pop("SERVEGATE_RUNNER", None)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "servegate", "bench", "--suite", str(suite), "--runner",
         "cpu-gfx95", "--results-dir", str(tmp_path / "results"), "--skip-accuracy"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
    seconds = time.monotonic() - started
    assert proc.returncode in (0, 1), proc.stderr[-3000:]       # judged: pass/inconclusive or not
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    run = json.loads((run_dir / "run.json").read_text())
    assert run["complete"] is True and run["runner_class"] == "cpu-gfx95"
    assert "gfx95 emulated" in run["fingerprint"]["device_double"]
    points = {p["mode"]: p for p in run["points"]}
    assert set(points) == {"off", "on"}
    for point in points.values():
        assert point["device_double"].startswith(
            "gfx95 emulated (gcnArchName=gfx950:sramecc+:xnack-) in pids [")
    on, off = points["on"], points["off"]
    assert on["exact_fill_effective"] is True and off["exact_fill_effective"] is False
    assert on["alignment"]["chunk_size"] == 256
    assert on["alignment"]["saturated_batches"] > 0
    assert on["alignment"]["aligned_fraction"] == 1.0
    assert on["alignment"]["min_saturated_tokens"] == 256
    # the server logs: the double ran in the process that evaluated the real gate
    for mode, gate in (("on", "True"), ("off", "False")):
        log = (run_dir / "server" / f"{mode}-r0.log").read_text()
        assert "servegate-hook: device double: gfx95 emulated" in log
        assert f"servegate-hook: exact chunk fill gate={gate} in pid" in log
        assert "exact chunk fill forced" not in log
    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["baseline"] is None and verdict["exit_code"] == proc.returncode
    claims = [c for c in verdict["checks"] if c["kind"] == "claim"
              and c["metric"] == "mean_ttft_ms"]
    assert len(claims) == 1, [c["name"] for c in verdict["checks"]]
    claim = claims[0]
    assert claim["name"].startswith("claim: on vs off mean_ttft_ms at c4 improves >= 4.0%")
    assert claim["gate"] is True and claim["verdict"] in ("pass", "regression", "inconclusive")
    assert claim["interval"] is not None and claim["interval"][0] <= claim["interval"][1]
    assert claim["current_value"] > 0 and claim["reference_value"] > 0
    print(f"\ncpu-gfx95 e2e: {seconds:.0f} s, exit {proc.returncode}, claim {claim['verdict']} "
          f"(ratio interval {claim['interval']}), on aligned "
          f"{on['alignment']['saturated_batches']}/{on['alignment']['saturated_batches']}, off "
          f"{off['alignment']['aligned_fraction']:.0%} of {off['alignment']['saturated_batches']}")
