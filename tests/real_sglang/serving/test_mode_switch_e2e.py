"""Every mode inside ONE real sglang CPU server: off, then forced, then off again.

The server is launched as bench launches the ``cpu`` suite's (SmolLM2-135M, page 64, chunk
256) plus ``SERVEGATE_MODE_CONTROL``; after each switch a block of 300-token prompts is sent
together and the block's server-log slice (from before the switch to after its requests) is
read back: every scheduler pid acknowledged the block's mode, forced blocks' saturated prefill
batches are exactly 256 tokens and off blocks' are not (236 = a 44-token tail charged as a
64-token page + a 192-token chunk). One server, a few requests per block; hold the machine's
server lock next to other server tests (two CPU servers at once slow decode 20-30x).
"""

from __future__ import annotations

import json
import random
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from servegate.config import load_suite, suite_path
from servegate.measure import logparse
from servegate.measure.exactfill import check_block_effective
from servegate.serve.launch import build_launch
from servegate.serve.modelprep import ensure_gguf_model
from servegate.serve.modeswitch import ModeControl
from servegate.serve.process import Server, descendants, free_port

PROMPTS = 4             # sent together: the second one's chunk lands behind the first's tail
INPUT_LEN = 300         # suites/cpu.toml [load].input_len
FIRED_UP = "The server is fired up and ready to roll!"


def _generate(base_url: str, input_ids: list[int]) -> dict[str, object]:
    body = json.dumps({"input_ids": input_ids, "sampling_params": {
        "max_new_tokens": 4, "temperature": 0, "ignore_eos": True}}).encode()
    request = urllib.request.Request(f"{base_url}/generate", data=body,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        return dict(json.loads(response.read()))


def _block(server: Server, seed: int) -> None:
    """Distinct random prompts per block (nothing for the radix cache to reuse)."""
    rng = random.Random(seed)
    prompts = [[rng.randrange(100, 40000) for _ in range(INPUT_LEN)] for _ in range(PROMPTS)]
    with ThreadPoolExecutor(PROMPTS) as pool:
        results = list(pool.map(lambda ids: _generate(server.base_url, ids), prompts))
    assert all(r["meta_info"]["prompt_tokens"] == INPUT_LEN for r in results)  # type: ignore[index]


def _wait_for(path: Path, text: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while text not in path.read_text(errors="replace"):
        assert time.monotonic() < deadline, f"no {text!r} in {path} after {timeout_s} s"
        time.sleep(0.5)


@pytest.mark.e2e
@pytest.mark.slow   # the same attribution through bench runs by default: test_in_server_blocks_e2e
def test_one_server_switches_off_forced_off(tmp_path: Path) -> None:
    pytest.importorskip("sglang.srt")
    started = time.monotonic()
    suite = load_suite(suite_path("cpu"))
    runner = suite.server_for("cpu")
    assert (runner.chunked_prefill_size, runner.page_size) == (256, 64)
    assert suite.model.prepare is not None
    model = ensure_gguf_model(suite.model.name, suite.model.prepare.package_file)
    control = ModeControl(tmp_path / "control.json")
    control.write("off", 0)
    spec = build_launch(python=sys.executable, model_path=str(model), runner=runner, mode="off",
                        port=free_port(), extra_env=control.env())
    log = tmp_path / "server.log"
    blocks = []
    with Server(spec, log) as server:
        waited = server.wait_ready()
        _wait_for(log, FIRED_UP, 120)           # sglang's own warm-up request is done
        registered = control.register(expected=1, timeout_s=30)
        assert server.proc is not None
        assert set(registered) <= set(descendants(server.proc.pid))    # the scheduler child
        for index, mode in enumerate(["off", "forced", "off"]):
            start = 0 if index == 0 else server.log_offset()
            asked = time.monotonic()
            switched = control.switch(mode, timeout_s=60) if index else registered
            switch_s = time.monotonic() - asked
            _block(server, seed=index)
            blocks.append((mode, switched, logparse.read_slice(log, start, server.log_offset()),
                           switch_s))
    seconds = time.monotonic() - started

    for seq, (mode, switched, text, switch_s) in enumerate(blocks):
        acks = logparse.mode_acks(text)
        assert {a.pid for a in acks if a.seq == seq} == set(control.pids) == set(switched)
        assert all(a.mode == mode for a in acks if a.seq == seq)
        alignment = logparse.alignment(logparse.parse_prefill_lines(text), 256)
        effective = check_block_effective(mode, "cpu", acks, alignment)
        assert effective is (mode == "forced")
        assert alignment["saturated_batches"] >= 2, (mode, alignment)
        if mode == "forced":
            assert alignment["aligned_fraction"] == 1.0
            assert alignment["min_saturated_tokens"] == 256
        else:
            assert alignment["aligned_fraction"] < 1.0, (mode, alignment)
            assert alignment["min_saturated_tokens"] < 256
        print(f"\n{mode} (seq {seq}, acknowledged in {switch_s * 1000:.0f} ms): prefill "
              f"{alignment['prefill_tokens']}, aligned {alignment['aligned_fraction']:.0%} of "
              f"{alignment['saturated_batches']} saturated")
    full = log.read_text()
    assert "exact chunk fill forced" not in full and "exact chunk fill gate=" not in full
    print(f"mode-switch e2e: {seconds:.0f} s (server ready after {waited:.0f} s)")
