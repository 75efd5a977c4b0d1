"""The cpu suite end to end with a real sglang server on this CPU (SmolLM2-135M).

Runs ``servegate bench --suite cpu`` exactly as the README does (accuracy and judging are
separate stages with their own tests), then checks the run.json contract, the alignment read
back from the real server, summary.md, and that no process of the run is left behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from servegate.results import load_run

SRC = Path(__file__).resolve().parents[1] / "src"


def _tagged_processes(tag: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if tag.encode() in (entry / "environ").read_bytes():
                state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
                if state != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.e2e
def test_cpu_suite_end_to_end(tmp_path: Path) -> None:
    tag = f"SERVEGATE_E2E_TAG={uuid.uuid4().hex}"
    env = {**os.environ, "PYTHONPATH": str(SRC), "SERVEGATE_RUNNER": "cpu",
           tag.split("=")[0]: tag.split("=")[1]}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "servegate", "bench", "--suite", "cpu", "--results-dir",
         str(tmp_path), "--skip-accuracy", "--no-compare"],
        env=env, capture_output=True, text=True, timeout=1200, check=False)
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-4000:]
    run_dir = Path(proc.stdout.strip().splitlines()[-1])       # last line: the run folder
    assert run_dir.parent == tmp_path.resolve() and run_dir.name.startswith("cpu-cpu-")

    run = load_run(run_dir)
    assert run["complete"] is True and "error" not in run
    assert run["fingerprint"]["runner_class"] == "cpu" and run["fingerprint"]["sglang"]
    points = run["points"]
    assert {(p["mode"], p["concurrency"]) for p in points} == {
        (m, c) for m in ("off", "on", "forced") for c in (2, 4)}
    for point in points:
        a = point["alignment"]
        assert a["chunk_size"] == 256 and a["saturated_batches"] > 0
        assert 1 not in a["prefill_tokens"]          # /health probe excluded
        assert point["metrics"]["completed"] == len(point["requests"]["ttft_ms"])
        assert (run_dir / point["files"]["client_jsonl"]).is_file()
        assert (run_dir / point["files"]["server_log"]).is_file()
        if point["mode"] == "forced":
            assert a["aligned_fraction"] == 1.0 and a["min_saturated_tokens"] == 256
            assert point["exact_fill_effective"] is True
        else:                                        # off, and on (gate is gfx95-only)
            assert a["aligned_fraction"] < 1.0
            assert point["exact_fill_effective"] is False
    summary = (run_dir / "summary.md").read_text()
    assert "| forced |" in summary and "100%" in summary and "complete" in summary
    assert _tagged_processes(tag) == []
    print(f"cpu suite end to end: {elapsed:.0f} s")
