"""The attribution beside the verdict: attribution.json, the plot, the lines the terminal and
summary.md show, and nothing at all for a run without profiled blocks."""

from __future__ import annotations

import json
from pathlib import Path

from servegate.config.judge import JudgeConfig
from servegate.judge.judgement import Judgement
from servegate.report import WRITERS
from servegate.report import attribution as writer
from servegate.report.headline import verdict_block
from servegate.report.summary import render


def _forwards(gemm: float, jitter: tuple[float, ...]) -> list[dict]:
    out = []
    for j in jitter:
        out.append({"stage": "EXTEND", "kind": "prefill", "bs": 2, "tokens": 256,
                    "span_us": 1.0, "us": {"gemm": 1000 * gemm * j, "attention": 300 * j}})
        out.append({"stage": "DECODE", "kind": "decode", "bs": 2, "span_us": 1.0,
                    "us": {"gemm": 100 * gemm * j, "attention": 30 * j}})
    return out


def _judgement(tmp_path: Path, profile: dict | None) -> Judgement:
    run: dict = {"schema_version": 3, "points": []}
    if profile is not None:
        run["profile"] = profile
    return Judgement(tmp_path, run, JudgeConfig(), [])  # type: ignore[arg-type]


def _profile() -> dict:
    return {"floor": 0.25, "blocks": [
        {"arm": "", "mode": "off", "start": 0, "forwards": _forwards(1.0, (1.0, 1.03, 0.98)),
         "other_names": {"aten::slice": 12.0}},
        {"arm": "", "mode": "forced", "start": 0,
         "forwards": _forwards(4.0, (1.01, 0.99, 1.02)), "other_names": {}}]}


def test_a_profiled_run_gets_its_attribution(tmp_path: Path) -> None:
    judgement = _judgement(tmp_path, _profile())
    assert WRITERS["attribution"] is writer.write
    written = writer.write(judgement)
    assert written == [tmp_path / "attribution.json", tmp_path / "plots" / "kernel_families.png"]
    doc = json.loads((tmp_path / "attribution.json").read_text())
    assert doc["gating"] is False and set(doc["table"]) == {"off", "forced"}
    assert doc["comparisons"][0]["moved"] == ["gemm"]
    assert doc["other_names"]["-off-s0"] == {"aten::slice": 12.0}
    lines = writer.lines(judgement.run)
    assert lines[0].startswith("attribution (kernel time per forward by family; reported")
    assert lines[1].startswith("  forced vs off: moved beyond noise: dense GEMM per prefill "
                               "token x")
    block = verdict_block(judgement)
    assert any("forced vs off: moved beyond noise" in line for line in block)
    assert "- forced vs off: moved beyond noise" in render(judgement)


def test_a_run_without_profiled_blocks_says_nothing(tmp_path: Path) -> None:
    judgement = _judgement(tmp_path, None)
    assert writer.write(judgement) == [] and writer.lines(judgement.run) == []
    assert not any("attribution" in line for line in verdict_block(judgement))
    one_mode = {"blocks": [_profile()["blocks"][0]]}
    assert writer.lines({"points": [], "profile": one_mode}) == [  # type: ignore[typeddict-item]
        f"{writer.TITLE}: nothing to compare (one mode, no off, or failed blocks)"]
    failed = {"blocks": [], "errors": [{"arm": "", "mode": "forced", "start": 0,
                                        "error": "/start_profile: HTTP 500: busy"}]}
    assert writer.lines({"points": [], "profile": failed})[1] == (  # type: ignore[typeddict-item]
        "  profiled block forced s0 failed: /start_profile: HTTP 500: busy")
