"""``servegate plan``: the price of a suite per CI cell, printed and as JSON (contract keys)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from unit.judge.block_runs import learned_store

from servegate.commands import plan
from servegate.config.speed import FIGURES

CONTRACT_KEYS = {"serving_minutes", "gpu_minutes", "server_starts", "speed"}


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert plan.main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_gives_the_contract_keys_and_every_speed_figure_with_its_source(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVEGATE_HISTORY", raising=False)
    result = _json(capsys, "--suite", "premerge", "--runner", "gfx95")
    assert result["suite"] == "premerge" and result["workflow"] == "premerge"
    [cell] = result["cells"]
    assert set(cell) >= CONTRACT_KEYS
    assert set(cell["speed"]) == set(FIGURES)
    assert all(f["source"] for f in cell["speed"].values())
    assert cell["figures"].startswith("speed model")
    assert cell["server_starts"] == 2 and cell["trees"] == 2


def test_nightly_lists_every_runner_cell_of_the_suite(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVEGATE_HISTORY", raising=False)
    result = _json(capsys, "--suite", "nightly")
    roles = [(c["runner_class"], c["role"]) for c in result["cells"]]
    assert ("mi355x", "gate") in roles and ("mi325x", "experiment") in roles
    assert all(c["trees"] == 1 for c in result["cells"])


def test_text_output_names_starts_minutes_and_gpu_minutes(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVEGATE_HISTORY", raising=False)
    assert plan.main(["--suite", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "1 server start(s), 84 blocks" in out and "no GPUs held (a CPU runner)" in out
    # counted by need: the most above (all 40 rounds fit), the least (8 rounds, forced in 4)
    assert "decided at the first look: 20 blocks, 0.7 min of blocks (the least" in out
    assert plan.main(["--suite", "nightly", "--runner", "gfx95"]) == 0
    out = capsys.readouterr().out
    assert "one tree, two starts at once (halves): 4 server start(s)" in out
    assert "serving 32.4 min (server-minutes, two at once: blocks 47.4" in out
    assert "8 GPUs held: 435.1 GPU-minutes held, 259.1 used serving, 0 % idle while serving" \
        in out


def test_the_nightly_serves_both_halves_of_its_8_gpu_runner(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 41: the gfx95 nightly cell within the hour and 500 GPU-minutes, its 8 GPUs idle
    for at most a tenth of the serving time; a 4-GPU MI325X cell runs its starts one after
    another, every GPU it holds in use."""
    monkeypatch.delenv("SERVEGATE_HISTORY", raising=False)
    [cell] = _json(capsys, "--suite", "nightly", "--runner", "gfx95")["cells"]
    assert cell["halves"] is True and cell["gpus_held"] == 8
    assert cell["wall_minutes"] <= 60 and cell["gpu_minutes"] <= 500
    assert cell["idle_share"] <= 0.10
    assert cell["gpu_minutes_used"] == pytest.approx(4 * cell["serving_minutes"] * 2, abs=0.2)
    assert cell["minutes"]["model_loads"] == pytest.approx(2 * 11.0)     # two rounds
    for mi325x in _json(capsys, "--suite", "nightly", "--runner", "gfx942")["cells"]:
        assert mi325x["halves"] is False and mi325x["gpus_held"] == 4
        assert mi325x["idle_share"] == 0.0


@pytest.mark.parametrize(("argv", "message"), [
    (["--suite", "no-such-suite"], "no-such-suite.toml: not found"),
    (["--suite", "premerge", "--runner", "tpu"], "--runner 'tpu': not a runner class"),
])
def test_bad_input_exits_2_naming_what_is_wrong(argv: list[str], message: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert plan.main(argv) == 2
    assert message in capsys.readouterr().err


def test_no_history_store_means_the_speed_model(tmp_path: Path) -> None:
    assert plan.measured_figures(tmp_path / "missing", "cpu", "cpu", 3.0) is None
    assert plan.measured_figures(None, "cpu", "cpu", 3.0) is None


def _stored_run(tmp_path: Path, run_id: str, start_s: float, block_s: float) -> Path:
    """A complete `cpu` run with timings, added to a history store the way bench does."""
    from unit.judge.block_runs import write_block_run

    from servegate.history.store import add_run

    run_dir = write_block_run(tmp_path / run_id, runner_class="cpu", starts=1, blocks=2,
                              concurrencies=(2,), modes=("off", "on"))
    run = json.loads((run_dir / "run.json").read_text())
    run.update(run_id=run_id, suite="cpu", timings={
        "server_starts": [{"label": "s0", "seconds": start_s, "attempt": 1}],
        "blocks": [{"arm": "", "mode": p["mode"], "start": 0, "block": p["block"],
                    "concurrency": 2, "seconds": block_s} for p in run["points"]],
        "warmups": [], "switches": [], "gsm8k": [], "serving_seconds": 4 * block_s,
        "total_seconds": start_s + 4 * block_s})
    (run_dir / "run.json").write_text(json.dumps(run))
    add_run(run_dir, tmp_path / "store")
    return run_dir


def test_measured_nights_replace_the_load_and_scale_the_serving_time(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = _json(capsys, "--suite", "cpu", "--history", str(tmp_path / "none"))["cells"][0]
    point_s = model["minutes"]["blocks"] * 60 / model["points"]
    _stored_run(tmp_path, "cpu-cpu-20261201T000000Z", 40.0, 2 * point_s)
    _stored_run(tmp_path, "cpu-cpu-20261202T000000Z", 60.0, 2 * point_s)
    [cell] = _json(capsys, "--suite", "cpu", "--history", str(tmp_path / "store"))["cells"]
    assert cell["figures"] == "measured: 2 stored run(s) of cpu on cpu"
    assert cell["measured"]["model_load_s"] == 50.0                   # the median start
    assert cell["measured"]["block_scale"] == pytest.approx(2.0, abs=0.05)
    assert cell["minutes"]["model_loads"] == round(50.0 / 60, 1)
    # a block twice the speed model's; the design is sized in time (suites/cpu.toml
    # max_minutes), so fewer of them fit in its cap
    assert cell["minutes"]["blocks"] / cell["points"] == pytest.approx(
        2 * model["minutes"]["blocks"] / model["points"], rel=0.05)
    assert cell["points"] < model["points"] and cell["minutes"]["blocks"] <= 4.5
    assert cell["first_look"]["blocks"] == model["first_look"]["blocks"] == 20
    assert cell["first_look"]["minutes"] == pytest.approx(2 * model["first_look"]["minutes"],
                                                          abs=0.15)
    assert cell["speed_model_estimate"]["serving_minutes"] == model["serving_minutes"]


def test_a_suite_serving_another_dtype_says_its_price_is_the_profiles(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVEGATE_HISTORY", raising=False)
    [cell] = _json(capsys, "--suite", "cpu-gate")["cells"]
    assert any("serves dtype float32" in note for note in cell["notes"])
    [plain] = _json(capsys, "--suite", "cpu")["cells"]
    assert plain["notes"] == []


def test_plan_prints_the_design_a_learned_profile_would_run_beside_the_tomls(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """issue 39: with a history store holding the runner's learned profile, plan sizes the
    design from it (the gated claim's 80 % power at its learned levels) and prices it beside
    the TOML design; a noisier runner's learned design is larger."""
    monkeypatch.delenv("SERVEGATE_HISTORY", raising=False)
    argv = ("--suite", "nightly", "--runner", "gfx95")
    assert _json(capsys, *argv)["cells"][0]["learned"] is None        # no store: none
    quiet = _json(capsys, *argv, "--history", str(learned_store(tmp_path / "q", 6, 0.01)))
    noisy = _json(capsys, *argv, "--history", str(learned_store(tmp_path / "n", 6, 0.02)))
    gate = next(c for c in quiet["cells"] if c["role"] == "gate")
    learned = gate["learned"]
    assert learned["source"] == "6 nights of mi355x history"
    assert learned["starts"] >= 1 and learned["serving_minutes"] > 0
    assert learned["block_log_sd"] == pytest.approx(0.01 * 2 ** 0.5, rel=0.5)
    loud = next(c for c in noisy["cells"] if c["role"] == "gate")["learned"]
    assert loud["starts"] * loud["blocks"] > learned["starts"] * learned["blocks"]
    assert plan.main([*argv, "--history", str(tmp_path / "q" / "store")]) == 0
    out = capsys.readouterr().out
    assert "learned design (6 nights of mi355x history: interaction log-sd" in out
    assert f"{learned['starts']} start(s) x {learned['blocks']} blocks, serving " \
           f"{learned['serving_minutes']} min" in out and "the TOML design 4 start(s) x 3 blocks" in out
