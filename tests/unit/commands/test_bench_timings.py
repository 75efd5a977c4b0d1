"""run.json ``timings`` (issue 29): the arithmetic of bench_timings, and a whole ``servegate
bench`` run through doubles of the server, its mode control and the client (no sglang): every
server start, warm-up, block, switch and GSM8K pass is listed once, and a failed run keeps
what it measured."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
from repo_files import REPO_ROOT

from servegate.commands import bench, bench_blocks, bench_in_server, bench_servers, bench_timings
from servegate.commands import session as session_module
from servegate.core.results import Run

# ---------------------------------------------------------------- the arithmetic


def _run() -> Run:
    return {"schema_version": 2, "points": []}


def test_serving_seconds_sums_everything_but_the_server_starts() -> None:
    run = _run()
    bench_timings.add(run, "server_starts", 30.0, label="s0", attempt=1)
    bench_timings.add(run, "warmups", 2.0, arm="", mode="on", start=0, concurrency=2)
    bench_timings.add(run, "blocks", 1.25, arm="", mode="on", start=0, block=0, concurrency=2)
    bench_timings.add(run, "switches", 0.5, arm="", mode="on")
    bench_timings.add(run, "gsm8k", 4.0, arm="", mode="on", questions=4)
    assert run["timings"]["serving_seconds"] == 7.75
    bench_timings.finish(run, started=100.0, now=150.5)
    assert run["timings"]["total_seconds"] == 50.5
    assert run["timings"]["server_starts"] == [{"label": "s0", "attempt": 1, "seconds": 30.0}]


def test_a_timed_body_that_fails_is_not_a_duration() -> None:
    run = _run()
    with bench_timings.timed(run, "warmups", mode="off"):
        pass
    with pytest.raises(RuntimeError), bench_timings.timed(run, "warmups", mode="on"):
        raise RuntimeError("client died")
    assert [w["mode"] for w in run["timings"]["warmups"]] == ["off"]
    assert run["timings"]["warmups"][0]["seconds"] >= 0


# ---------------------------------------------------------------- a bench run through doubles


class FakeServer:
    """What the in-server executor touches of a started sglang server."""

    base_url = "http://127.0.0.1:1"

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path

    def wait_ready(self) -> float:
        return 0.01

    def check_alive(self, wait_s: float = 0.0) -> None:
        pass

    def stop(self) -> None:
        pass

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class FakeControl:
    """The in-place mode switch, acknowledged at once; counts its switches."""

    switches: ClassVar[list[str]] = []

    def __init__(self, path: Path) -> None:
        self.mode: str | None = None
        self.seq = 0

    def register(self, *args: object, **kwargs: object) -> None:
        pass

    def switch(self, mode: str, timeout_s: float) -> dict[int, object]:
        self.mode, self.seq = mode, self.seq + 1
        FakeControl.switches.append(mode)
        return {1: object()}


class FakeHost:
    """The client worker: every run (a warm-up here) succeeds at once."""

    def launch(self) -> None:
        pass

    def run(self, *args: object, **kwargs: object) -> None:
        pass

    def __enter__(self) -> FakeHost:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


BLOCK_S = 0.01                          # a double's block: slept, so the total holds it


def _point(planned: Any) -> dict[str, Any]:
    return {"mode": planned.mode, "concurrency": planned.concurrency, "repeat": planned.repeat,
            "order": planned.order, "start": planned.start, "block": planned.block,
            "metrics": {"mean_ttft_ms": 10.0, "median_tpot_ms": 1.0},
            "alignment": {"chunk_size": 256, "saturated_batches": 0, "aligned_fraction": 0.0,
                          "min_saturated_tokens": 0, "prefill_tokens": []},
            "exact_fill_effective": planned.mode != "off", "wall_s": BLOCK_S}


def _suite(tmp_path: Path, starts: int, blocks: int, warmups: int) -> Path:
    """The shipped cpu suite with ``starts`` x ``blocks`` and ``warmups`` warm-up blocks."""
    text = (REPO_ROOT / "suites" / "cpu.toml").read_text()
    design = text.index("\nstarts = 1\n")            # the design's keys, counted instead
    end = text.index("\n\n", design)
    path = tmp_path / "suite" / "cpu.toml"
    path.parent.mkdir()
    path.write_text(text[:design] + f"\nstarts = {starts}\nblocks = {blocks}\n"
                    f"warmup_blocks = {warmups}" + text[end:])
    return path


@pytest.fixture
def doubles(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, Any]:
    """bench with its server, mode control, client and GSM8K replaced (no sglang, no model)."""
    monkeypatch.setattr(bench, "ensure_gguf_model", lambda name, package_file: tmp_path / "m")
    monkeypatch.setenv("SERVEGATE_RUNNER", "cpu")
    monkeypatch.delenv("SERVEGATE_HISTORY", raising=False)
    FakeControl.switches = []
    state: dict[str, Any] = {"fail_at_block": None, "blocks": 0}

    def launch(ctx: Any, request: Any) -> FakeServer:
        return FakeServer(ctx.run_dir / request.log_rel)

    def measure(ctx: Any, server: Any, planned: Any, *args: object) -> dict[str, Any]:
        if state["blocks"] == state["fail_at_block"]:
            raise bench_servers.PortInUse("the block's server went away")
        state["blocks"] += 1
        time.sleep(BLOCK_S)
        return _point(planned)

    def gsm8k(base_url: str, mode: str, run_dir: Path, config: Any) -> dict[str, Any]:
        return {"n": 4, "correct": 1, "accuracy": 0.25}

    monkeypatch.setattr(bench_servers, "_launch", launch)
    monkeypatch.setattr(bench_in_server, "ModeControl", FakeControl)
    monkeypatch.setattr(bench_in_server, "client_host", lambda ctx, slot: FakeHost())
    monkeypatch.setattr(bench_blocks, "measure_point", measure)
    monkeypatch.setattr(bench_blocks, "run_gsm8k", gsm8k)
    monkeypatch.setattr(session_module, "paired_for_run", lambda run_dir, modes: {})
    monkeypatch.setattr(session_module, "render_section", lambda run, run_dir: "## GSM8K\n")
    return state


def _bench(tmp_path: Path, suite: Path, capsys: pytest.CaptureFixture[str],
           *extra: str) -> tuple[int, dict[str, Any], str]:
    code = bench.main(["--suite", str(suite), "--results-dir", str(tmp_path / "results"),
                       "--no-compare", *extra])
    run_dir = Path(capsys.readouterr().out.strip().splitlines()[-1])
    return (code, json.loads((run_dir / "run.json").read_text()),
            (run_dir / "summary.md").read_text())


@pytest.mark.usefixtures("doubles")
def test_every_start_warm_up_block_switch_and_gsm8k_pass_is_timed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """2 starts x 2 blocks x 3 modes, 1 warm-up block per mode and start, GSM8K in start 0."""
    code, run, summary = _bench(tmp_path, _suite(tmp_path, starts=2, blocks=2, warmups=1),
                                capsys)
    assert code == 0 and run["complete"] is True
    t = run["timings"]
    assert [(s["label"], s["attempt"]) for s in t["server_starts"]] == [("s0", 1), ("s1", 1)]
    assert not any(s.get("failed") for s in t["server_starts"])
    assert len(t["blocks"]) == len(run["points"]) == 2 * 2 * 3
    assert sorted((b["mode"], b["start"], b["block"]) for b in t["blocks"]) == sorted(
        (p["mode"], p["start"], p["block"]) for p in run["points"])
    assert all(b["seconds"] == BLOCK_S and b["concurrency"] == 2 and b["arm"] == ""
               for b in t["blocks"])
    assert sorted((w["mode"], w["start"]) for w in t["warmups"]) == sorted(
        (m, s) for m in ("off", "on", "forced") for s in (0, 1))
    assert [s["mode"] for s in t["switches"]] == FakeControl.switches != []
    assert sorted((g["mode"], g["questions"]) for g in t["gsm8k"]) == [
        ("forced", 4), ("off", 4), ("on", 4)]                # once per mode, in start 0
    parts = sum(e["seconds"] for kind in ("warmups", "blocks", "switches", "gsm8k")
                for e in t[kind])
    assert t["serving_seconds"] == pytest.approx(parts, abs=0.01)
    assert t["serving_seconds"] <= t["total_seconds"]
    assert run["design"]["start_seconds"] == [0.0, 0.0]     # kept beside the timings
    assert "- time: 2 server starts" in summary and "total " in summary


def test_a_failed_run_keeps_what_it_measured(doubles: dict[str, Any], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    doubles["fail_at_block"] = 2
    code, run, summary = _bench(tmp_path, _suite(tmp_path, starts=2, blocks=2, warmups=0),
                                capsys, "--skip-accuracy")
    assert code == 2 and run["complete"] is False and "went away" in run["error"]
    t = run["timings"]
    assert len(t["server_starts"]) == 1 and len(t["blocks"]) == len(run["points"]) == 2
    assert t["warmups"] == [] and t["gsm8k"] == []
    assert 0 < t["serving_seconds"] <= t["total_seconds"]
    assert "- time: 1 server start (" in summary


def test_a_run_stopped_before_any_server_still_says_how_long(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(bench, "ensure_gguf_model", lambda name, package_file: tmp_path / "m")
    monkeypatch.setenv("SERVEGATE_RUNNER", "cpu")

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "run_in_server", interrupted)
    code = bench.main(["--suite", "cpu", "--results-dir", str(tmp_path / "results")])
    run = json.loads((Path(capsys.readouterr().out.strip().splitlines()[-1])
                      / "run.json").read_text())
    assert code == 130
    assert run["timings"]["server_starts"] == [] and run["timings"]["blocks"] == []
    assert run["timings"]["total_seconds"] >= 0
