"""The `cpu` suite served on the machine's two halves at once, with gfx95 emulated at sglang's
device check: ``servegate bench --suite cpu --runner cpu-gfx95`` with ``[design] halves``.

Two real sglang CPU servers (SmolLM2-135M), one start each, loaded together and measuring
together, each on half the cores (``OMP_NUM_THREADS``: the CPU's form of a half's devices), each
switching the suite's three modes (off, on, forced) in place, their exact-fill device check seeing
an emulated gfx95 device (servegate's one device double, ``SERVEGATE_EMULATE_GFX95``, set by the
profile's ``[runners.cpu-gfx95]`` section), so ``on`` is the gfx95 path through sglang's real
gate. Asserted per server and block: in every ``on`` and ``forced`` block exact fill is effective
(``on`` through the real gate, its ``lru_cache`` cleared at the switch, the double answering the
device check) and in every ``off`` block it is not, acknowledged by every scheduler process of
that server; every saturated exact-fill prefill batch is exactly the chunk (256); each server's
log carries the double's line, recorded on every point. Asserted of the halves: one run folder,
two server logs, each start's half and the halves' cores in run.json, the other half's batches
over a block recorded on every point (the servers ran at once) and its CPU counted as the run's
own; bench judges the run's in-run claims (no stored baseline for an emulated class), writing the
gated TTFT claim (paired over the starts) into verdict.json, and the run judged against a baseline
of its own blocks names the halves in every baseline check (a level per half). Its verdicts are
whatever the CPU measures (the path is under test, not a speed-up).

The suite's design edited to 2 starts x 1 block on halves (the shipped one is 1 start x 8
blocks) and its runners to include the emulated class; no GSM8K. It replaced the cpu-gfx95
suite's halves test (issue 41: the `cpu` suite itself on two halves). Run it alone (any other
CPU-heavy process slows a server several times).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from repo_files import CPU_DESIGN, REPO_ROOT, edited_suite
from servegate_cli import run_servegate

from servegate.core.results import load_run
from servegate.judge.baselines import baseline_from_run
from servegate.judge.evaluate import judge

REPO = REPO_ROOT


def _check_server(run_dir: Path, points: list[dict], start: int) -> None:
    """One half's server: the double ran in the processes that evaluated the real gate, every
    block read back from every scheduler of this server."""
    pids = None
    for point in points:
        assert point["device_double"].startswith(
            "gfx95 emulated (gcnArchName=gfx950:sramecc+:xnack-) in pids [")
        on = point["mode"] in ("on", "forced")
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
        assert point["files"]["server_log"] == f"server/s{start}.log"
        assert "other_half_cpu_pct" in point["machine"]
        assert set(point["other_half"]) == {f"s{1 - start}"}
    log = (run_dir / "server" / f"s{start}.log").read_text()
    assert "servegate-hook: device double: gfx95 emulated" in log
    assert "exact chunk fill forced" not in log


@pytest.mark.e2e
def test_cpu_suite_on_two_halves_with_gfx95_emulated_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("sglang")
    suite = edited_suite(tmp_path, "cpu", CPU_DESIGN,
                         "\nstarts = 2\nblocks = 1\nhalves = true\n",
                         ('runners = ["cpu"]', 'runners = ["cpu", "cpu-gfx95"]'))
    started = time.monotonic()
    proc = run_servegate(
        "bench", "--suite", suite, "--runner", "cpu-gfx95", "--results-dir",
        tmp_path / "results", "--skip-accuracy", cwd=REPO, timeout=1200,
        unset=("SERVEGATE_EMULATE_GFX95",     # only the profile may set it
               "SERVEGATE_RUNNER"))
    seconds = time.monotonic() - started
    assert proc.returncode in (0, 1), proc.stderr[-3000:]       # judged: pass/inconclusive or not
    run_dir = Path(proc.stdout.strip().splitlines()[-1])
    assert [p.name for p in (tmp_path / "results").iterdir()] == [run_dir.name]   # one folder
    run = json.loads((run_dir / "run.json").read_text())
    assert run["complete"] is True and run["runner_class"] == "cpu-gfx95"
    design = run["design"]
    assert design["in_server"] is True and design["starts"] == 2 and design["halves"] is True
    assert design["start_halves"] == [0, 1]
    per = max((os.cpu_count() or 1) // 2, 1)
    assert design["devices"] == [{"s0": list(range(per)), "s1": list(range(per, 2 * per))}]
    assert design["halves_note"] == f"halves: two servers at once on this CPU, {per} thread(s) each"
    assert sorted(p.name for p in (run_dir / "server").glob("*.log")) == ["s0.log", "s1.log"]
    assert [s["label"] for s in run["timings"]["server_starts"]] == ["s0", "s1"]
    assert "gfx95 emulated" in run["fingerprint"]["device_double"]
    points = run["points"]
    assert sorted((p["mode"], p["start"], p["block"]) for p in points) == [
        ("forced", 0, 0), ("forced", 1, 0), ("off", 0, 0), ("off", 1, 0), ("on", 0, 0),
        ("on", 1, 0)]
    for start in (0, 1):
        _check_server(run_dir, [p for p in points if p["start"] == start], start)
    # the halves served at once: the other half ran batches during this half's blocks
    assert sum(n for p in points for n in p["other_half"].values()) > 0, points

    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert verdict["baseline"] is None and verdict["exit_code"] == proc.returncode
    claims = [c for c in verdict["checks"] if c["kind"] == "claim"
              and c["metric"] == "mean_ttft_ms"]
    assert len(claims) == 1, [c["name"] for c in verdict["checks"]]
    claim = claims[0]
    assert claim["name"].startswith("claim: on vs off mean_ttft_ms at c2 improves >= 4.0%")
    assert claim["gate"] is True and claim["primary"] is True
    assert claim["verdict"] in ("pass", "regression", "inconclusive")
    assert claim["interval"] is not None and claim["interval"][0] <= claim["interval"][1]
    assert claim["name"] in verdict["family"]["checks"]
    assert "blocks-paired (2 start(s) x 1 block pair(s)" in claim["method"]
    # against a baseline of its own blocks: a level per half on both sides of every mode
    doc = baseline_from_run(load_run(run_dir), run_dir)
    assert doc["design"]["start_halves"] == [0, 1]
    versus = [c for c in judge(run_dir, baseline_doc=doc).checks if c.kind == "baseline"]
    assert versus and all("2 starts centred on 2 halves" in c.reason
                          and "in 2 halves vs 2x1 in 2 halves" in c.interval.method
                          for c in versus), [(c.name, c.reason) for c in versus]
    print(f"\ncpu suite on two halves (gfx95 emulated) e2e: {seconds:.0f} s, exit {proc.returncode}, claim "
          f"{claim['verdict']} (ratio interval {claim['interval']}), other half's batches "
          f"over the blocks {[p['other_half'] for p in points]}")
