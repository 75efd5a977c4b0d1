"""The design a GPU runner's learned profile sizes, run by bench (issue 39 item 3): with
``$SERVEGATE_HISTORY`` holding the profile, bench runs the learned starts x blocks in place of the
TOML's and records both; ``--toml-design``, a CPU class or a suite sized in time keep the TOML's.
No server: the in-server executor is replaced by one that stops the run at its first block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from unit.judge.block_runs import learned_store

from servegate.commands import bench, learned
from servegate.commands.bench_context import Context
from servegate.config import load_suite, suite_path


def test_a_gpu_runners_profile_sizes_the_design_a_quieter_one_smaller(tmp_path: Path) -> None:
    nightly = load_suite(suite_path("nightly"))
    quiet = learned_store(tmp_path / "q", 6, 0.01)
    noisy = learned_store(tmp_path / "n", 6, 0.02)
    small, record = learned.run_design(nightly, "mi355x", ("off", "on"), False, quiet)
    large, _ = learned.run_design(nightly, "mi355x", ("off", "on"), False, noisy)
    assert record is not None and record["ran"] == "learned"
    assert record["source"] == "6 nights of mi355x history"
    assert (small.design.starts, small.design.blocks) == (record["starts"], record["blocks"])
    assert small.design.looks == ()
    assert record["toml"] == {"starts": nightly.design.starts, "blocks": nightly.design.blocks,
                              "looks": list(nightly.design.looks)}
    assert large.design.starts * large.design.blocks > small.design.starts * small.design.blocks
    assert "in place of the TOML's" in learned.describe(record)


@pytest.mark.parametrize("suite, runner, store", [
    ("nightly", "mi355x", None),                # no history store
    ("nightly", "mi355x", "empty"),             # a store without the runner's nights
    ("cpu", "cpu", "q"),                        # a CPU suite is sized in time
])
def test_without_a_profile_or_on_a_cpu_the_toml_design_runs(
        tmp_path: Path, suite: str, runner: str, store: str | None) -> None:
    learned_store(tmp_path / "q", 2, 0.01)
    (tmp_path / "empty" / "store").mkdir(parents=True)
    loaded = load_suite(suite_path(suite))
    ran, record = learned.run_design(loaded, runner, tuple(loaded.modes), False,
                                     None if store is None else tmp_path / store / "store")
    assert ran is loaded and record is None


def _bench_design(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *extra: str) -> dict:
    """run.json's design of a nightly bench on mi355x stopped before its first block."""
    def stopped(ctx: Context, *args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    for executor in ("run_in_server", "run_halves"):
        monkeypatch.setattr(bench, executor, stopped)
    monkeypatch.setattr(bench, "_read_gates", lambda ctx, modes: None)
    results = tmp_path / "results" / "-".join(extra or ("learned",))
    assert bench.main(["--suite", "nightly", "--runner", "mi355x", "--modes", "off,on",
                       "--skip-accuracy", "--results-dir", str(results), *extra]) == 130
    [run_dir] = results.iterdir()
    return json.loads((run_dir / "run.json").read_text())["design"]


def test_bench_runs_the_learned_design_and_records_the_tomls_beside_it(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("SERVEGATE_HISTORY", str(learned_store(tmp_path / "q", 6, 0.01)))
    monkeypatch.setenv("COLUMNS", "400")                # the console's line, unwrapped
    nightly = load_suite(suite_path("nightly")).design
    design = _bench_design(monkeypatch, tmp_path)
    assert design["learned"]["ran"] == "learned"
    assert (design["starts"], design["blocks"]) == (design["learned"]["starts"],
                                                    design["learned"]["blocks"])
    assert design["learned"]["toml"]["starts"] == nightly.starts
    assert "design from the learned profile (6 nights of mi355x history" in \
        capsys.readouterr().err
    kept = _bench_design(monkeypatch, tmp_path, "--toml-design")
    assert "learned" not in kept
    assert (kept["starts"], kept["blocks"]) == (nightly.starts, nightly.blocks)
