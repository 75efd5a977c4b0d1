"""servegate's half of the mode switch: the control file, acknowledgement files, timeouts and the
messages that name the seq, the mode and the pids. The acknowledgements here are written by the
test itself (the hook writing them in a real sglang interpreter is
``tests/real_sglang/scheduler/test_mode_switch.py``; in a real server, ``test_mode_switch_e2e.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from servegate.core.errors import EXIT_INFRA, ServegateError
from servegate.serve.modeswitch import Ack, ModeControl, ModeSwitchError


def _ack(control: ModeControl, seq: int, mode: str, gate: bool, pid: int) -> None:
    """What the hook writes: ``<control>.ack.<pid>``."""
    path = Path(f"{control.path}.ack.{pid}")
    path.write_text(json.dumps({"seq": seq, "mode": mode, "gate": gate, "pid": pid}))


@pytest.fixture
def pids() -> Iterator[list[int]]:
    """Two live processes standing for scheduler pids (switch checks that they are alive)."""
    sleepers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
                for _ in range(2)]
    yield sorted(p.pid for p in sleepers)
    for proc in sleepers:
        proc.kill()
        proc.wait()


def _registered(tmp_path: Path, pids: list[int], mode: str = "off") -> ModeControl:
    control = ModeControl(tmp_path / "control.json")
    control.write(mode, 0)
    for pid in pids:
        _ack(control, 0, mode, False, pid)
    control.register(expected=len(pids), timeout_s=5)
    return control


def test_error_is_an_infrastructure_error() -> None:
    assert issubclass(ModeSwitchError, ServegateError) and issubclass(ModeSwitchError, RuntimeError)
    assert ModeSwitchError("x").exit_code == EXIT_INFRA


def test_write_is_exact_and_atomic(tmp_path: Path) -> None:
    control = ModeControl(tmp_path / "control.json")
    assert control.env() == {"SERVEGATE_MODE_CONTROL": str(tmp_path / "control.json")}
    seen: list[object] = []
    stop = threading.Event()

    def read_all_the_time() -> None:
        while not stop.is_set():
            try:
                seen.append(json.loads(control.path.read_text()))
            except FileNotFoundError:       # before the first write
                continue
            except ValueError as err:       # a partial file
                seen.append(err)

    reader = threading.Thread(target=read_all_the_time)
    reader.start()
    try:
        for seq in range(60):
            control.write(("off", "on", "forced")[seq % 3], seq)
    finally:
        stop.set()
        reader.join()
    assert json.loads(control.path.read_text()) == {"seq": 59, "mode": "forced"}
    assert control.seq == 59 and control.mode == "forced"
    assert seen and all(isinstance(s, dict) and set(s) == {"seq", "mode"} for s in seen)
    assert [p.name for p in tmp_path.iterdir()] == ["control.json"]   # no temp file left


def test_write_rejects_bad_input_and_nothing_written_yet(tmp_path: Path) -> None:
    control = ModeControl(tmp_path / "control.json")
    with pytest.raises(ModeSwitchError, match="no mode written yet"):
        _ = control.seq
    with pytest.raises(ModeSwitchError, match="no mode written yet"):
        _ = control.mode
    with pytest.raises(ModeSwitchError, match="unknown exact-fill mode 'fast'"):
        control.write("fast", 0)
    for seq in (-1, True, 1.0):
        with pytest.raises(ModeSwitchError, match="seq must be an integer >= 0"):
            control.write("off", seq)  # type: ignore[arg-type]
    assert not control.path.exists() and control.pids == ()


def test_seq_0_drops_a_previous_servers_acks(tmp_path: Path) -> None:
    control = ModeControl(tmp_path / "control.json")
    _ack(control, 4, "forced", True, 999999)
    control.write("on", 0)
    assert control.acks() == {}


def test_register_takes_the_seq_0_acknowledgers(tmp_path: Path, pids: list[int]) -> None:
    control = ModeControl(tmp_path / "control.json")
    control.write("forced", 0)
    (tmp_path / f".control.json.ack.{pids[0]}.x.tmp").write_text("{partial")   # hook's temp
    for pid in pids:
        _ack(control, 0, "forced", True, pid)
    acks = control.register(expected=2, timeout_s=5)
    assert acks == {pid: Ack(0, "forced", True, pid) for pid in pids}
    assert control.pids == tuple(pids)


def test_register_without_an_expected_count_waits_for_a_stable_set(tmp_path: Path,
                                                                  pids: list[int]) -> None:
    control = ModeControl(tmp_path / "control.json")
    control.write("off", 0)
    _ack(control, 0, "off", False, pids[0])
    threading.Timer(0.2, _ack, (control, 0, "off", False, pids[1])).start()
    started = time.monotonic()
    assert set(control.register(expected=None, timeout_s=10)) == set(pids)
    assert time.monotonic() - started >= 0.2 + 0.5         # the set settled after the late one


def test_register_names_who_acknowledged_when_the_count_is_wrong(tmp_path: Path,
                                                                 pids: list[int]) -> None:
    control = ModeControl(tmp_path / "control.json")
    control.write("off", 0)
    _ack(control, 0, "off", False, pids[0])
    with pytest.raises(ModeSwitchError) as few:
        control.register(expected=2, timeout_s=0.3)
    assert "expected 2 scheduler processes to acknowledge seq 0 (mode off) within 0.3 s" \
        in str(few.value)
    assert f"pid {pids[0]} seq=0 mode=off gate=False" in str(few.value)
    _ack(control, 0, "off", False, pids[1])
    with pytest.raises(ModeSwitchError, match="expected 1 scheduler processes, but 2 "
                                              "acknowledged seq 0") as many:
        control.register(expected=1, timeout_s=5)
    assert all(f"pid {pid} " in str(many.value) for pid in pids)
    assert control.pids == ()


def test_register_refuses_another_mode_and_no_ack_at_all(tmp_path: Path, pids: list[int]) -> None:
    control = ModeControl(tmp_path / "control.json")
    control.write("off", 0)
    with pytest.raises(ModeSwitchError, match=r"acknowledged: none \(is SERVEGATE_MODE_CONTROL"):
        control.register(expected=None, timeout_s=0.2)
    _ack(control, 0, "forced", True, pids[0])
    with pytest.raises(ModeSwitchError, match=f"seq 0 is mode off, but pid {pids[0]} seq=0 "
                                              f"mode=forced"):
        control.register(expected=1, timeout_s=5)


def test_switch_waits_for_every_registered_pid(tmp_path: Path, pids: list[int]) -> None:
    control = _registered(tmp_path, pids)
    for pid in pids:                        # the schedulers apply it a little later, one by one
        threading.Timer(0.1 + 0.1 * pids.index(pid), _ack,
                        (control, 1, "forced", True, pid)).start()
    started = time.monotonic()
    acks = control.switch("forced", timeout_s=10)
    assert time.monotonic() - started >= 0.2
    assert acks == {pid: Ack(1, "forced", True, pid) for pid in pids}
    assert json.loads(control.path.read_text()) == {"seq": 1, "mode": "forced"}
    assert (control.seq, control.mode) == (1, "forced")


def test_switch_names_the_missing_pids_seq_and_mode(tmp_path: Path, pids: list[int]) -> None:
    control = _registered(tmp_path, pids)
    threading.Timer(0.05, _ack, (control, 1, "on", False, pids[0])).start()
    with pytest.raises(ModeSwitchError) as info:
        control.switch("on", timeout_s=0.5)
    message = str(info.value)
    assert f"seq 1 (mode on) not acknowledged within 0.5 s by scheduler pids [{pids[1]}] " \
           f"(of {pids})" in message
    assert f"pid {pids[1]} seq=0 mode=off gate=False" in message     # where the laggard is
    assert "only once it is idle" in message


def test_switch_refuses_another_mode_and_strangers(tmp_path: Path, pids: list[int]) -> None:
    control = _registered(tmp_path, pids[:1])
    threading.Timer(0.05, _ack, (control, 1, "off", False, pids[0])).start()
    with pytest.raises(ModeSwitchError, match=f"seq 1 is mode forced, but pid {pids[0]} seq=1 "
                                              f"mode=off"):
        control.switch("forced", timeout_s=5)
    _ack(control, 2, "on", False, pids[1])
    _ack(control, 2, "on", False, pids[0])
    with pytest.raises(ModeSwitchError, match=rf"seq 2 \(mode on\) acknowledged by unregistered "
                                              rf"processes \(pid {pids[1]} .*did a scheduler "
                                              rf"restart\?"):
        control.switch("on", timeout_s=5)


def test_switch_fails_fast_when_a_scheduler_is_gone(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    gone = int(done.stdout)
    control = _registered(tmp_path, [gone])
    started = time.monotonic()
    with pytest.raises(ModeSwitchError, match=rf"seq 1 \(mode on\): scheduler pids \[{gone}\] "
                                              rf"exited before acknowledging"):
        control.switch("on", timeout_s=30)
    assert time.monotonic() - started < 5


def test_switch_before_register_and_register_after_a_switch(tmp_path: Path,
                                                            pids: list[int]) -> None:
    control = ModeControl(tmp_path / "control.json")
    control.write("off", 0)
    with pytest.raises(ModeSwitchError, match="no scheduler processes registered"):
        control.switch("on")
    control = _registered(tmp_path, pids[:1])
    _ack(control, 1, "on", False, pids[0])
    control.switch("on", timeout_s=5)
    with pytest.raises(ModeSwitchError, match="register\\(\\) belongs before the first switch"):
        control.register(expected=1, timeout_s=1)


@pytest.mark.parametrize("content", [
    "{not json", json.dumps([1, 2]), json.dumps({"seq": 1, "mode": "on", "gate": "False",
                                                 "pid": 7}),
    json.dumps({"seq": "1", "mode": "on", "gate": False, "pid": 7}),
    json.dumps({"seq": 1, "mode": "on", "gate": False})])
def test_a_malformed_ack_file_is_named(tmp_path: Path, content: str) -> None:
    control = ModeControl(tmp_path / "control.json")
    control.write("off", 0)
    bad = Path(f"{control.path}.ack.7")
    bad.write_text(content)
    with pytest.raises(ModeSwitchError, match=f"{bad}: (unreadable|malformed) acknowledgement"):
        control.acks()


def test_an_ack_file_naming_another_pid_is_refused(tmp_path: Path) -> None:
    control = ModeControl(tmp_path / "control.json")
    control.write("off", 0)
    Path(f"{control.path}.ack.7").write_text(
        json.dumps({"seq": 0, "mode": "off", "gate": False, "pid": 8}))
    with pytest.raises(ModeSwitchError, match="acknowledgement names pid 8"):
        control.acks()
