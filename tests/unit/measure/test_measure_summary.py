"""summary.md's tables (servegate.measure.summary), written out by hand (issue 15)."""

from __future__ import annotations

from typing import Any

from servegate.measure.summary import render


def _point(mode: str, conc: int, repeat: int, ttft: float | None, saturated: int,
           aligned: float, effective: bool, **slot: int) -> dict[str, Any]:
    """A run.json point; ``slot``: its ``start`` and ``block`` (in-server runs), absent in runs
    from before blocks (the repeat is then its start, block 0)."""
    metrics = {"mean_ttft_ms": ttft, "median_ttft_ms": 11.25, "p99_ttft_ms": 30.0,
               "median_tpot_ms": 2.345, "median_itl_ms": 2.0, "output_throughput": 512.04}
    return {"mode": mode, "concurrency": conc, "repeat": repeat, **slot, "metrics": metrics,
            "alignment": {"chunk_size": 256, "saturated_batches": saturated,
                          "aligned_fraction": aligned, "min_saturated_tokens": 200},
            "exact_fill_effective": effective}


RUN: dict[str, Any] = {
    "suite": "cpu", "runner_class": "cpu", "model_profile": "smollm2-135m",
    "fingerprint": {"model": "SmolLM2", "sglang": "0.5.23", "torch": "2.14.1", "host": "vm"},
    "chunk_size": 256, "page_size": 64, "started_at": "2026-11-30T12:00:00Z",
    "complete": True,
    "points": [_point("forced", 4, 0, 9.0, 3, 1.0, True),
               _point("off", 4, 1, 10.0, 3, 0.5, False),
               _point("off", 4, 0, None, 0, 0.0, False),
               _point("on", 2, 0, 12.5, 2, 0.0, False)],
}


HEADER = ("| mode | start | block | TTFT mean ms | TTFT median ms | TTFT p99 ms | TPOT median "
          "ms | ITL median ms | output tok/s | aligned | saturated | min saturated | exact fill |")
RULE = "|---|---|---|---|---|---|---|---|---|---|---|---|---|"


def test_summary_tables_per_concurrency_rows_in_mode_then_start_order() -> None:
    """A run from before blocks: each repeat is its own start, block 0."""
    lines = render(RUN).splitlines()
    assert lines[:6] == [
        "# servegate bench: suite `cpu` on `cpu`",
        "",
        "- model: `SmolLM2`; sglang 0.5.23; torch 2.14.1; host `vm`",
        "- chunked prefill size 256, page size 64; started 2026-11-30T12:00:00Z",
        "- status: **complete**, 4 points",
        "",
    ]
    assert lines[6:19] == [
        "## concurrency 2", "", HEADER, RULE,
        "| on | 0 | 0 | 12.5 | 11.2 | 30.0 | 2.35 | 2.00 | 512.0 | 0% | 2 | 200 | no |",
        "",
        "## concurrency 4", "", HEADER, RULE,
        "| off | 0 | 0 | – | 11.2 | 30.0 | 2.35 | 2.00 | 512.0 | n/a | 0 | 200 | no |",
        "| off | 1 | 0 | 10.0 | 11.2 | 30.0 | 2.35 | 2.00 | 512.0 | 50% | 3 | 200 | no |",
        "| forced | 0 | 0 | 9.0 | 11.2 | 30.0 | 2.35 | 2.00 | 512.0 | 100% | 3 | 200 | yes |",
    ]
    assert lines[19:] == [
        "", "`aligned`: share of saturated prefill batches (prefill work left over, i.e. cut by "
        "the budget) that are exactly the chunk size; warm-up and health-check batches "
        "excluded. `exact fill`: read back from the server (hook line and gate value)."]
    assert render(RUN).endswith("(hook line and gate value).\n")   # the file ends its last line


def test_in_server_rows_show_start_and_block_in_that_order() -> None:
    """Every mode inside each start: a row per block, ordered by mode, start, then block (not
    by the running point index ``repeat``, nor by the file's order)."""
    points = [_point("on", 4, 0, 1.0, 1, 1.0, False, start=0, block=0),
              _point("off", 4, 1, 2.0, 1, 1.0, False, start=1, block=0),
              _point("off", 4, 2, 3.0, 1, 1.0, False, start=0, block=1),
              _point("off", 4, 3, 4.0, 1, 1.0, False, start=0, block=0)]
    lines = render({**RUN, "points": points}).splitlines()
    assert HEADER in lines and RULE in lines
    rows = [line.split(" | ")[:4] for line in lines if line.startswith(("| off", "| on"))]
    assert rows == [["| off", "0", "0", "4.0"], ["| off", "0", "1", "3.0"],
                    ["| off", "1", "0", "2.0"], ["| on", "0", "0", "1.0"]]


def test_incomplete_run_without_fingerprint_says_so() -> None:
    run = {"suite": "cpu", "runner_class": "cpu", "model_profile": "smollm2-135m",
           "complete": False, "error": "interrupted (KeyboardInterrupt)"}
    lines = render(run).splitlines()   # type: ignore[arg-type]
    assert lines[2] == "- model: `smollm2-135m`; sglang ?; torch ?; host `?`"
    assert lines[3] == "- chunked prefill size None, page size None; started None"
    assert lines[4] == "- status: **INCOMPLETE (interrupted (KeyboardInterrupt))**, 0 points"
    assert not any(line.startswith("## ") for line in lines)
    still = dict(run)
    still.pop("error")
    assert "- status: **INCOMPLETE (running)**, 0 points" in render(still)   # type: ignore[arg-type]


def test_head_vs_base_rows_name_their_tree() -> None:
    from servegate.measure.summary import render

    point = {"mode": "off", "concurrency": 2, "repeat": 0, "exact_fill_effective": False,
             "metrics": {"mean_ttft_ms": 5.0},
             "alignment": {"aligned_fraction": 0.5, "saturated_batches": 2,
                           "min_saturated_tokens": 236}}
    run = {"suite": "ab-cpu", "runner_class": "cpu", "complete": True,
           "points": [{**point, "arm": "head"}, {**point, "arm": "base", "repeat": 1}]}
    rows = [line for line in render(run).splitlines() if line.startswith("| ") and "-off" in line]
    assert [row.split(" | ")[0] for row in rows] == ["| base-off", "| head-off"]


def test_the_time_line_sums_each_kind_and_older_runs_have_none() -> None:
    timings = {"server_starts": [{"label": "s0", "seconds": 31.2, "attempt": 1},
                                 {"label": "s1", "seconds": 29.0, "attempt": 1}],
               "warmups": [{"seconds": 2.0}, {"seconds": 2.4}],
               "blocks": [{"seconds": 2.8}] * 10, "switches": [{"seconds": 0.4}],
               "gsm8k": [{"seconds": 3.6}], "serving_seconds": 40.4, "total_seconds": 110.6}
    lines = render({**RUN, "timings": timings}).splitlines()   # type: ignore[arg-type]
    assert lines[5] == ("- time: 2 server starts (60 s), blocks 28 s, warm-ups 4 s, "
                        "switches 0 s, GSM8K 4 s, total 111 s")
    assert lines[6] == ""
    assert not any(line.startswith("- time:") for line in render(RUN).splitlines())  # type: ignore[arg-type]
    running = {"server_starts": [{"label": "s0", "seconds": 31.0, "attempt": 1}]}
    assert "- time: 1 server start (31 s), blocks 0 s, warm-ups 0 s, switches 0 s, GSM8K 0 s, " \
           "total –" in render({**RUN, "timings": running})   # type: ignore[arg-type]
