"""The verdict names what else used the machine during the blocks (run.json ``machine``)."""

from __future__ import annotations

from servegate.judge.evaluate import interference_note


def _point(mode: str, block: int, other: float, steal: float = 0.0, gpu: int = 0) -> dict:
    machine = {"other_cpu_pct": other, "cpu_steal_pct": steal, "wall_s": 10.0}
    if gpu:
        machine["other_gpu_processes"] = gpu
    return {"mode": mode, "concurrency": 2, "start": 0, "block": block, "machine": machine}


def test_a_quiet_run_has_no_note() -> None:
    assert interference_note([_point("off", 0, 0.4), _point("on", 0, 4.9)]) is None
    assert interference_note([{"mode": "off", "concurrency": 2}]) is None


def test_busy_blocks_are_counted_and_the_worst_named() -> None:
    note = interference_note([_point("off", 0, 0.5), _point("on", 1, 22.3),
                              _point("forced", 2, 3.0, steal=2.5), _point("off", 3, 27.1)])
    assert note is not None
    assert "during 3 of 4 blocks" in note
    assert "worst 27 % in off@c2 s0 b3" in note
    assert "other GPU processes" not in note


def test_other_gpu_processes_make_a_block_busy() -> None:
    note = interference_note([_point("off", 0, 0.0, gpu=2), _point("on", 0, 0.0)])
    assert note is not None and "during 1 of 2 blocks" in note
    assert "other GPU processes in 1" in note
