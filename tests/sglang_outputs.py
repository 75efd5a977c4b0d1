"""What sglang writes, as the measure stage reads it: the prefill lines of a real server log
(``tests/data/sglang-cpu-logs``) and a record of its benchmark client's JSONL output."""

from __future__ import annotations

import re
from pathlib import Path

PREFILL_LINE = re.compile(r"^\[(?P<stamp>[^\]]+)\] (?P<message>Prefill batch.*)$")


def measured_prefill_lines(test_data: Path, name: str) -> list[tuple[str, str]]:
    """(stamp, message) of the real log's prefill lines after its start-up warm-up (2 lines)."""
    text = (test_data / "sglang-cpu-logs" / f"{name}.log").read_text()
    found = [(m["stamp"], m["message"]) for line in text.splitlines()
             if (m := PREFILL_LINE.match(line))]
    assert len(found) > 10, f"{name}: expected real prefill lines"
    return found[2:]


def dp_rank_line(stamp: str, message: str, dp: int, tp: int) -> str:
    """sglang's form for a DP rank's line (--tp > 1): ``[stamp DP<dp> TP<tp>] message``."""
    return f"[{stamp} DP{dp} TP{tp}] {message}"


def client_record(**override: object) -> dict[str, object]:
    """One line of ``bench_serving --output-file``: three requests, overridable per key."""
    record: dict[str, object] = {
        "completed": 3, "duration": 3.5, "median_ttft_ms": 1.0, "median_tpot_ms": 1.0,
        "ttfts": [0.5, 0.0, 0.7], "itls": [[0.1], [], [0.2]], "input_lens": [300, 301, 302],
        "output_lens": [2, 2, 2], "errors": ["", "", ""]}
    record.update(override)
    return record
