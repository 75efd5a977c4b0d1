"""``measure/interference.py``: what else used the machine during a block, worked out exactly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import namedtuple
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import psutil
import pytest
from hung_tool import timing_out_subprocess

from servegate.measure import interference
from servegate.measure.interference import (
    BlockMonitor,
    _amd_pids,
    _tree_cpu,
    interference_note,
    other_gpu_processes,
)

Times = namedtuple("Times", "user nice system idle iowait steal")


IDLE = Times(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)              # the counters at a block's start


def _monitor(monkeypatch: pytest.MonkeyPatch, end: Any, server: tuple[float, float],
             own: tuple[float, float], wall: tuple[float, float], start: Any = IDLE,
             gpu_users: Callable[[set[int]], int | None] = lambda ours: None,
             server_pid: int | None = 4242, tree_calls: list[int] | None = None
             ) -> dict[str, Any]:
    """A block between two snapshots whose every figure the test chose. Only the module's own
    names are replaced (its ``time`` and ``psutil`` bindings), never the stdlib's or psutil's
    functions themselves, which pytest and mutmut also call. ``tree_calls`` collects the pids
    the server's CPU was asked for."""
    snapshots = iter([(start, server[0], own[0], wall[0]), (end, server[1], own[1], wall[1])])
    current: dict[str, Any] = {}
    calls = [] if tree_calls is None else tree_calls

    def tree_cpu(pid: int) -> float:
        calls.append(pid)
        return current["server"]

    def advance() -> None:
        current["cpu"], current["server"], current["own"], current["wall"] = next(snapshots)

    advance()
    monkeypatch.setattr(interference, "psutil", SimpleNamespace(
        cpu_times=lambda: current["cpu"], Process=psutil.Process, Error=psutil.Error))
    monkeypatch.setattr(interference, "time", SimpleNamespace(monotonic=lambda: current["wall"]))
    monkeypatch.setattr(interference, "_tree_cpu", tree_cpu)
    monkeypatch.setattr(interference, "_own_cpu", lambda: current["own"])
    monkeypatch.setattr(interference, "other_gpu_processes", gpu_users)
    monitor = BlockMonitor(server_pid)
    advance()
    return monitor.finish()


def test_other_processes_share_is_what_neither_the_server_nor_we_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # 100 s of machine time: 20 idle, 4 iowait, 6 steal, 70 busy; the server took 40, we 5
    end = Times(50.0, 5.0, 15.0, 20.0, 4.0, 6.0)
    record = _monitor(monkeypatch, end, server=(10.0, 50.0), own=(1.0, 6.0), wall=(100.0, 150.0))
    assert record == {"wall_s": 50.0, "cpu_steal_pct": 6.0, "other_cpu_pct": 25.0,
                      "server_cpu_pct": 40.0}


def test_shares_are_differences_of_the_counters_rounded_to_hundredths(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Counters already running at the block's start: 300 s of machine time, 100 idle + 10
    iowait, 1 steal, 189 busy; the server 100, we 5.5."""
    start = Times(10.0, 1.0, 5.0, 30.0, 2.0, 3.0)
    end = Times(160.0, 1.0, 44.0, 130.0, 12.0, 4.0)
    calls: list[int] = []
    record = _monitor(monkeypatch, end, server=(10.0, 110.0), own=(1.0, 6.5),
                      wall=(100.0, 150.12345), start=start, tree_calls=calls)
    assert record == {"wall_s": 50.123, "cpu_steal_pct": 0.33, "other_cpu_pct": 27.83,
                      "server_cpu_pct": 33.33}
    assert calls == [4242, 4242]                       # the server's tree, at start and end


def test_counters_without_iowait_or_steal_count_them_as_zero(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """psutil leaves out the fields a platform does not have (macOS: no iowait, no steal)."""
    bare = namedtuple("Bare", "user nice system idle")
    record = _monitor(monkeypatch, bare(41.0, 0.0, 11.0, 52.0), server=(0.0, 20.0),
                      own=(0.0, 5.0), wall=(0.0, 1.0), start=bare(1.0, 0.0, 1.0, 2.0))
    assert record == {"wall_s": 1.0, "cpu_steal_pct": 0.0, "other_cpu_pct": 25.0,
                      "server_cpu_pct": 20.0}


def test_one_second_of_machine_time_is_a_block_too(monkeypatch: pytest.MonkeyPatch) -> None:
    end = Times(0.5, 0.0, 0.0, 0.5, 0.0, 0.0)
    record = _monitor(monkeypatch, end, server=(0.0, 0.25), own=(0.0, 0.0), wall=(0.0, 0.5))
    assert record == {"wall_s": 0.5, "cpu_steal_pct": 0.0, "other_cpu_pct": 25.0,
                      "server_cpu_pct": 25.0}


def test_without_a_server_no_process_tree_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    end = Times(10.0, 0.0, 0.0, 10.0, 0.0, 0.0)
    record = _monitor(monkeypatch, end, server=(0.0, 0.0), own=(0.0, 1.0), wall=(0.0, 1.0),
                      server_pid=None, tree_calls=calls)
    assert calls == [] and record["server_cpu_pct"] == 0.0 and record["other_cpu_pct"] == 45.0


def test_counters_that_went_backwards_count_as_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server child that exited takes its CPU seconds with it: never a negative share."""
    end = Times(10.0, 0.0, 0.0, 10.0, 0.0, 0.0)
    record = _monitor(monkeypatch, end, server=(30.0, 5.0), own=(2.0, 1.0), wall=(0.0, 2.5))
    assert record == {"wall_s": 2.5, "cpu_steal_pct": 0.0, "other_cpu_pct": 50.0,
                      "server_cpu_pct": 0.0}


def test_ours_above_the_machines_busy_time_leaves_no_negative_other_share(
        monkeypatch: pytest.MonkeyPatch) -> None:
    end = Times(4.0, 0.0, 0.0, 6.0, 0.0, 0.0)
    record = _monitor(monkeypatch, end, server=(0.0, 8.0), own=(0.0, 1.0), wall=(0.0, 1.0))
    assert record["other_cpu_pct"] == 0.0 and record["server_cpu_pct"] == 80.0


def test_no_cpu_time_elapsed_records_only_the_wall_time(monkeypatch: pytest.MonkeyPatch) -> None:
    same = Times(1.0, 1.0, 1.0, 1.0, 1.0, 1.0)
    record = _monitor(monkeypatch, same, server=(0.0, 0.0), own=(0.0, 0.0),
                      wall=(10.0, 10.1234), start=same)
    assert record == {"wall_s": 0.123}


def test_gpu_users_are_recorded_when_a_gpu_tool_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    end = Times(1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
    seen: list[set[int]] = []
    monkeypatch.setattr(BlockMonitor, "_server_pids", lambda self: {7, 8})

    def gpu_users(ours: set[int]) -> int:
        seen.append(ours)
        return 3

    record = _monitor(monkeypatch, end, server=(0.0, 0.0), own=(0.0, 0.0), wall=(0.0, 1.0))
    assert "other_gpu_processes" not in record          # no GPU tool answered
    record = _monitor(monkeypatch, end, server=(0.0, 0.0), own=(0.0, 0.0), wall=(0.0, 1.0),
                      gpu_users=gpu_users)
    assert record["other_gpu_processes"] == 3 and seen == [{7, 8}]


def test_tree_cpu_counts_living_children_and_an_unknown_pid_is_zero() -> None:
    import time

    child = subprocess.Popen([sys.executable, "-c",
                              "import time\nend = time.process_time() + 0.3\n"
                              "while time.process_time() < end: pass\ntime.sleep(30)"])
    try:
        busy = psutil.Process(child.pid)
        deadline = time.monotonic() + 20
        while sum(busy.cpu_times()[:2]) < 0.25 and time.monotonic() < deadline:
            time.sleep(0.05)
        mine = sum(psutil.Process().cpu_times()[:2])
        assert _tree_cpu(child.pid) >= 0.25
        assert _tree_cpu(os.getpid()) >= mine + 0.25     # itself and the busy child
    finally:
        child.kill()
        child.wait()
    assert _tree_cpu(2 ** 22 + 12345) == 0.0              # no such process


FAKE_TIMES = {1: (1.0, 0.5), 3: (2.0, 0.25)}       # user, system per pid of the fake tree


class _FakeProcess:
    """A process tree at psutil's boundary: pid 1 with a child 2 (gone: its times raise)
    listed before a grandchild 3; ``children`` honours ``recursive`` as psutil does."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def children(self, recursive: bool = False) -> list[_FakeProcess]:
        return [_FakeProcess(2), _FakeProcess(3)] if recursive is True else [_FakeProcess(2)]

    def cpu_times(self) -> SimpleNamespace:
        if self.pid not in FAKE_TIMES:
            raise psutil.NoSuchProcess(self.pid)
        user, system = FAKE_TIMES[self.pid]
        return SimpleNamespace(user=user, system=system)


def test_tree_cpu_sums_every_descendant_past_one_that_is_gone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interference, "psutil", SimpleNamespace(
        Process=_FakeProcess, Error=psutil.Error))
    assert _tree_cpu(1) == 3.75
    monitor = BlockMonitor.__new__(BlockMonitor)      # no snapshot: only the tree is asked
    monitor.server_pid, monitor.siblings = 1, ()
    assert monitor._server_pids() == {1, 2, 3}


def test_own_cpu_is_this_process_and_its_finished_children(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interference, "os", SimpleNamespace(times=lambda: SimpleNamespace(
        user=1.0, system=2.0, children_user=4.0, children_system=8.0)))
    assert interference._own_cpu() == 15.0


def test_a_hung_gpu_tool_costs_a_block_at_most_ten_seconds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(interference, "subprocess", timing_out_subprocess(seen))
    assert interference._run(["nvidia-smi"]) is None
    assert seen == {"capture_output": True, "text": True, "timeout": 10}


def test_server_pids_are_the_tree_and_empty_without_a_server() -> None:
    assert BlockMonitor(None)._server_pids() == set()
    assert os.getpid() in BlockMonitor(os.getpid())._server_pids()
    assert BlockMonitor(2 ** 22 + 12345)._server_pids() == set()


def test_amd_smi_pids_are_found_at_any_depth() -> None:
    text = json.dumps([{"gpu": 0, "process_list": [{"process_info": {"pid": 11, "name": "a"}},
                                                    {"process_info": {"pid": 12}}]},
                       {"gpu": 1, "pid": 13, "mem": {"pid": "not a pid"}}])
    assert sorted(_amd_pids(text)) == [11, 12, 13]
    assert _amd_pids("not json") == []
    assert _amd_pids("{}") == []


def test_other_gpu_processes_from_nvidia_smi_excludes_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interference.shutil, "which",
                        lambda tool: "/usr/bin/nvidia-smi" if tool == "nvidia-smi" else None)
    calls: list[list[str]] = []

    def run(argv: list[str]) -> str:
        calls.append(argv)
        return "101\n102\n\n103\n"

    monkeypatch.setattr(interference, "_run", run)
    assert other_gpu_processes({101}) == 2
    assert calls == [["nvidia-smi", "--query-compute-apps=pid", "--format=csv,noheader"]]
    monkeypatch.setattr(interference, "_run", lambda argv: None)
    assert other_gpu_processes(set()) is None             # the tool failed: unknown, not 0


def test_other_gpu_processes_from_amd_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interference.shutil, "which",
                        lambda tool: "/usr/bin/amd-smi" if tool == "amd-smi" else None)
    calls: list[list[str]] = []

    def run(argv: list[str]) -> str:
        calls.append(argv)
        return json.dumps([{"process_list": [{"process_info": {"pid": 5}},
                                             {"process_info": {"pid": 6}}]}])

    monkeypatch.setattr(interference, "_run", run)
    assert other_gpu_processes({6}) == 1
    assert calls == [["amd-smi", "process", "--json"]]
    monkeypatch.setattr(interference, "_run", lambda argv: None)
    assert other_gpu_processes(set()) is None


def test_no_gpu_tool_means_the_field_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interference.shutil, "which", lambda tool: None)
    assert other_gpu_processes(set()) is None


def test_run_returns_output_only_for_a_clean_exit() -> None:
    assert interference._run([sys.executable, "-c", "print('ok')"]) == "ok\n"
    assert interference._run([sys.executable, "-c", "import sys; sys.exit(3)"]) is None
    assert interference._run(["/no/such/tool"]) is None


def test_contention_is_other_processes_plus_steal_a_missing_share_counting_zero() -> None:
    assert interference.contention_pct({"other_cpu_pct": 3.25, "cpu_steal_pct": 1.5}) == 4.75
    assert interference.contention_pct({"cpu_steal_pct": 2.0}) == 2.0
    assert interference.contention_pct({"other_cpu_pct": None}) == 0.0
    assert interference.contention_pct({}) == 0.0


def test_a_block_is_busy_from_busy_pct_of_others_cpu_or_any_other_gpu_user() -> None:
    below = interference.BUSY_PCT - 0.01
    assert not interference.is_busy({"other_cpu_pct": below})
    assert interference.is_busy({"other_cpu_pct": interference.BUSY_PCT})       # at the line
    assert interference.is_busy({"other_cpu_pct": below / 2, "cpu_steal_pct": below / 2 + 0.01})
    assert interference.is_busy({"other_gpu_processes": 1})
    assert not interference.is_busy({"other_gpu_processes": 0, "wall_s": 9.0})
    assert not interference.is_busy({})


# The verdict names what else used the machine during the blocks (run.json ``machine``).

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


def test_a_block_is_busy_from_five_percent_of_other_cpu_and_steal_together() -> None:
    assert interference_note([_point("off", 0, 3.0, steal=1.9)]) is None
    steal_only = {"mode": "on", "concurrency": 2, "machine": {"cpu_steal_pct": 4.5}}
    assert interference_note([steal_only]) is None          # a missing share counts as 0 %
    assert interference_note([_point("off", 0, 5.0)]) is not None
    assert interference_note([_point("off", 0, 3.0, steal=4.0)]) == (
        "interference: other processes or CPU steal took >= 5 % of the CPU during 1 of 1 "
        "blocks (worst 7 % in off@c2 s0 b0): their timings are suspect (points[*].machine)")


def test_only_blocks_with_other_gpu_processes_are_counted_as_such() -> None:
    note = interference_note([_point("off", 0, 30.0), _point("on", 0, 0.0, gpu=1)])
    assert note is not None and note.endswith(
        "(worst 30 % in off@c2 s0 b0), other GPU processes in 1: their timings are suspect "
        "(points[*].machine)")


def test_the_other_halfs_cpu_is_the_runs_own_and_recorded_apart() -> None:
    """A halves design's other server (here a process burning a core) is busy by design: its
    CPU is counted as the run's, recorded as ``other_half_cpu_pct``, and its tree is no other
    GPU user."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.2)                          # past the interpreter's start
        monitor = BlockMonitor(None, siblings=(burner.pid,))
        time.sleep(1.5)
        record = monitor.finish()
        assert burner.pid in monitor._server_pids()
    finally:
        burner.kill()
        burner.wait()
    assert record["other_half_cpu_pct"] > 1.0, record
    assert "other_half_cpu_pct" not in BlockMonitor(None).finish()
