"""Every recorded component in the history (issue 32 item 3): a run's stack under sglang
(aiter, hipBLASLt, triton, GEMM configs, clock caps) is kept on its store file's first line,
given to every line when read, and a change point names the range of every component that
changed between the last night before the step and the first night after it."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from judge_runs import make_run
from synthetic_nights import night_run

from servegate.history.cli import main
from servegate.history.records import parse_line
from servegate.history.render import _change_point_table
from servegate.history.report import analyse
from servegate.history.store import SUFFIX, add_run, read_store

NIGHTS, STEP_AT = 16, 8


def gpu_stack(aiter: str, night: int) -> dict[str, Any]:
    """A night's fingerprint below sglang: only aiter may differ; the clocks at start wander."""
    return {"rocm": "7.0.51831", "torch": "2.8.0", "aiter": aiter, "hipblaslt": "1.0.0",
            "hipblaslt_commit": "5a6f3b2e1c", "triton": "3.4.0+amd.rocm7.0.0.gitf9e5bf54",
            "image_digest": "sha256:" + "ab" * 32,
            "gemm_configs": {"AITER_CONFIG_GEMM_A8W8_BLOCKSCALE": "cd" * 32},
            "gpu_clocks": {"tool": "amd-smi", "sclk_mhz": [130 + night % 5] * 8,
                           "sclk_max_mhz": [2400] * 8}}


def aiter_nights(tmp_path: Path) -> Path:
    """16 nights of one sglang commit; aiter 0.1.9 -> 0.1.10 at night 8, 15 % slower in off."""
    store = tmp_path / "store"
    for night in range(NIGHTS):
        run_dir = night_run(tmp_path / "runs", night, seed=7, step_at=STEP_AT, factor=1.15)
        run = json.loads((run_dir / "run.json").read_text())
        run["fingerprint"].update(sglang_commit="abc1234",
                                  **gpu_stack("0.1.9" if night < STEP_AT else "0.1.10", night))
        (run_dir / "run.json").write_text(json.dumps(run))
        assert main(["add", str(run_dir), "--store", str(store)], out=io.StringIO()) == 0
    return store


def test_a_step_between_nights_that_differ_only_in_aiter_names_the_aiter_range(
        tmp_path: Path) -> None:
    store = aiter_nights(tmp_path)
    out = io.StringIO()
    assert main(["report", "--store", str(store), "--json", "--metric", "mean_ttft_ms"],
                out=out) == 0
    series = {(s["mode"], s["concurrency"]): s for s in json.loads(out.getvalue())["series"]}
    stepped = series[("off", 2)]["change_points"]
    assert [cp["index"] for cp in stepped] == [STEP_AT]
    assert stepped[0]["sglang_commits"] == ["abc1234", "abc1234"]
    assert stepped[0]["components"] == [
        {"component": "aiter", "label": "aiter", "before": "0.1.9", "after": "0.1.10"}]
    assert series[("on", 2)]["change_points"] == []
    text = io.StringIO()
    assert main(["report", "--store", str(store), "--metric", "mean_ttft_ms"], out=text) == 0
    lines = [line for line in text.getvalue().splitlines() if " off@c2 mean_ttft_ms: night 8" in line]
    assert len(lines) == 1 and lines[0].endswith(
        "; sglang abc1234 -> abc1234; aiter 0.1.9 -> 0.1.10")
    # the series page's suspects name it too
    report = next(r for r in analyse(read_store(store).records, metrics=["mean_ttft_ms"])
                  if r.key[3:5] == ("off", 2))
    assert ('; aiter <code class="commit">0.1.9</code> &rarr; <code class="commit">0.1.10</code>'
            in _change_point_table(report, None))


def test_the_stack_is_written_once_per_run_and_read_onto_every_line(tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "gpu-night", seed=2)
    run = json.loads((run_dir / "run.json").read_text())
    run["fingerprint"].update(gpu_stack("0.1.10", 0))
    (run_dir / "run.json").write_text(json.dumps(run))
    path = add_run(run_dir, tmp_path / "store").path
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert "stack" in lines[0] and all("stack" not in line for line in lines[1:])
    assert lines[0]["stack"]["aiter"] == "0.1.10"
    assert lines[0]["stack"]["gpu_clock_limits"] == "sclk max 2400 MHz"
    records = read_store(tmp_path / "store").records
    assert len(records) == len(lines) > 1
    assert all(r.stack == lines[0]["stack"] for r in records)
    assert records[-1].components()["aiter"] == "0.1.10"
    assert records[-1].components()["sglang_commit"] == "abc1234"


def test_lines_from_before_the_stack_stay_readable_and_a_bad_stack_is_named(
        tmp_path: Path) -> None:
    run_dir = make_run(tmp_path / "cpu-night", seed=3)
    path = add_run(run_dir, tmp_path / "store").path
    raw = path.read_text().splitlines()[0]
    assert "stack" not in json.loads(raw)
    parsed = parse_line(raw, path, path.name[: -len(SUFFIX)])
    assert not isinstance(parsed, str) and parsed[0].stack is None
    assert parsed[0].components() == {"sglang": "0.5.23", "sglang_commit": "abc1234"}
    bad = json.dumps({**json.loads(raw), "stack": {"aiter": 1}})
    assert parse_line(bad, path, path.name[: -len(SUFFIX)]) == (
        "stack must be an object of strings or absent, got {'aiter': 1}")


def test_a_run_stored_before_its_stack_is_rewritten_with_it(tmp_path: Path) -> None:
    store = tmp_path / "store"
    old = make_run(tmp_path / "old" / "mi355x-1", seed=4)
    add_run(old, store)
    new = make_run(tmp_path / "mi355x-1", seed=4)
    run = json.loads((new / "run.json").read_text())
    run["fingerprint"].update(gpu_stack("0.1.10", 0))
    (new / "run.json").write_text(json.dumps(run))
    assert add_run(new, store).status == "upgraded"
    assert add_run(new, store).status == "unchanged"
    assert read_store(store).records[0].stack is not None
