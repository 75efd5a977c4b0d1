"""DP attention: every DP rank's scheduler logs its own prefill lines; each has chunk // attn_dp.

The inputs are REAL prefill lines from sglang 0.5.23 CPU servers (tests/data/sglang-cpu-logs, one
rank, no prefix), re-tagged the way sglang tags a DP rank's lines:

- the prefix: ``configure_scheduler_process`` (sglang/srt/managers/scheduler.py lines 6279-6291)
  builds ``" DP{dp_rank}"`` when the rank has a DP rank, then ``" TP{tp_rank}"`` when
  ``tp_size > 1`` (PP / ATTN_CP / MOE_DP / EP only when those sizes are > 1);
- the format: ``configure_logger`` (sglang/srt/utils/common.py lines 2629-2630) puts it inside
  the stamp: ``[%(asctime)s{prefix}] %(message)s``;
- only each DP group's attention-TP rank 0 logs (``is_stats_logging_rank``,
  sglang/srt/observability/metrics_collector.py lines 1361-1363), so with ``--tp 4
  --attn-dp-size 2`` the two streams are ``DP0 TP0`` and ``DP1 TP2``.

The sglang-marked tests format a real line through sglang's own ``configure_logger`` and check
the launch argv's attention-DP size against sglang's own ``ServerArgs`` resolution.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from sglang_outputs import measured_prefill_lines

from servegate.measure import logparse
from servegate.serve.launch import dp_attention_size


@pytest.mark.sglang
def test_sglang_configure_logger_writes_the_form_parsed(test_data: Path) -> None:
    """A real line formatted by sglang's own configure_logger with the prefix its scheduler
    builds for DP rank 1 / TP rank 2 parses as rank 1."""
    (_stamp, message), *_ = measured_prefill_lines(test_data, "srv64x")
    code = ("import logging, sys, types\n"
            "from sglang.srt.utils.common import configure_logger\n"
            "configure_logger(types.SimpleNamespace(log_level='info'), prefix=' DP1 TP2')\n"
            "logging.getLogger('sglang.srt.managers.scheduler').info(sys.argv[1])\n")
    out = subprocess.run([sys.executable, "-c", code, message], capture_output=True, text=True,
                         timeout=300, check=True)
    line = next(ln for ln in out.stderr.splitlines() if "Prefill batch" in ln)
    assert re.match(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d DP1 TP2\] Prefill batch", line), line
    (batch,) = logparse.parse_prefill_lines(line)
    assert batch.dp_rank == 1
    assert batch.new_tokens == logparse.parse_prefill_lines(message)[0].new_tokens


@pytest.mark.sglang
@pytest.mark.parametrize("args", [
    ["--tp", "4", "--dp-size", "2", "--enable-dp-attention"],
    ["--tp", "4", "--attn-dp-size", "2"],
    ["--tp", "4", "--dp-size", "2"],
    ["--tp", "8", "--attention-data-parallel-size=4"],
])
def test_launch_dp_size_matches_sglangs_resolution(args: list[str]) -> None:
    """bench's per-rank chunk (launch.dp_attention_size) equals what sglang's own ServerArgs
    resolves (read by preflight's budget, the parallel_hook division)."""
    import argparse

    from sglang.srt.server_args import ServerArgs

    from servegate.preflight.budget import resolve_budget

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    server_args = ServerArgs.from_cli_args(parser.parse_args(
        ["--model-path", "x", "--chunked-prefill-size", "1024", *args]))
    budget = resolve_budget(server_args)
    assert budget.chunk_size == 1024 // dp_attention_size(args)
