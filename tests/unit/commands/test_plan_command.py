"""``servegate plan``: the price of a suite per CI cell, printed and as JSON (contract keys)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

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
    assert "1 server start(s), 24 blocks" in out and "GPU-minutes" in out


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
