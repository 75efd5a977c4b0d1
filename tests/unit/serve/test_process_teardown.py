"""How a teardown finds and ends a server's process tree, on real short-lived processes (sh and
sleep, never sglang): every generation of descendants, the process group rather than the session,
/proc's stat parsed at the last ')' of a name, a zombie or reaped process counted dead and a live
one left alone by the check; ``kill_tree`` granting exactly its grace to a process deaf to
SIGTERM, returning at once when the tree obeys, SIGKILLing a grandchild that escaped the group,
and not tripping over a member reaped during the grace. Each teardown runs in a thread with a
deadline, so a teardown that hangs fails the test instead of blocking it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from servegate.serve.process import _alive, descendants, group_members, kill_tree, tail

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

DEAF = ["sh", "-c", "trap '' TERM; exec sleep 3600"]       # ignores SIGTERM, sleeps


def _teardown(proc: subprocess.Popen[bytes], grace_s: float) -> float:
    """Seconds ``kill_tree`` took; fails if it raised or is still running after grace + 10 s."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            kill_tree(proc, grace_s=grace_s)
        except BaseException as err:       # reported below, whatever it is
            errors.append(err)

    worker = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(timeout=grace_s + 10)
    took = time.monotonic() - started
    assert not worker.is_alive(), f"kill_tree still running after {took:.1f} s"
    assert errors == []
    return took


def _until(found: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not found():
        assert time.monotonic() < deadline, "the processes did not start in time"
        time.sleep(0.02)


def _gone(pids: list[int], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while any(_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _pids(proc: subprocess.Popen[bytes]) -> list[int]:
    assert proc.stdout is not None
    return [int(p) for p in proc.stdout.readline().split()]



@contextlib.contextmanager
def _launched(code: str) -> Iterator[subprocess.Popen[bytes]]:
    """A launcher running ``code`` in a session of its own, killed whatever the test did."""
    launcher = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                start_new_session=True)
    try:
        yield launcher
    finally:
        launcher.kill()
        assert launcher.stdout is not None
        launcher.stdout.close()


@contextlib.contextmanager
def _escaped_deaf_grandchild() -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """A launcher whose grandchild, in a session of its own, ignores SIGTERM."""
    code = ("import subprocess, sys, time\n"
            f"g = subprocess.Popen({DEAF!r}, start_new_session=True)\n"
            "print(g.pid, flush=True); time.sleep(3600)\n")
    with _launched(code) as launcher:
        [grandchild] = _pids(launcher)
        _until(lambda: Path(f"/proc/{grandchild}/comm").read_text().strip() == "sleep")
        yield launcher, grandchild

def test_every_generation_of_descendants_is_found_and_killed() -> None:
    """launcher -> sh -> sleep, the sleep in a session of its own: all found, all gone."""
    launcher = subprocess.Popen(["sh", "-c", "sh -c 'setsid sleep 3600 & wait' & wait"],
                                start_new_session=True)
    try:
        _until(lambda: len(descendants(launcher.pid)) >= 2)
        found = descendants(launcher.pid)
        assert len(found) == 2
        _teardown(launcher, grace_s=5)
        assert _gone(found)
    finally:
        launcher.kill()


def test_group_members_are_the_process_group_not_the_session() -> None:
    """A child that made a group of its own (same session) is no member of the launcher's."""
    code = ("import os, subprocess, sys, time\n"
            "c = subprocess.Popen(['sleep', '3600'], process_group=0)\n"
            "print(c.pid, flush=True); time.sleep(3600)\n")
    with _launched(code) as launcher:
        [child] = _pids(launcher)
        assert group_members(launcher.pid) == [launcher.pid]
        assert child in descendants(launcher.pid)
        _teardown(launcher, grace_s=5)
        assert _gone([child])


def test_a_name_with_a_parenthesis_is_read_up_to_its_last_one() -> None:
    """/proc/<pid>/stat shows the name in parentheses; a name 'a) Z 1' must neither shift the
    parent's field nor read as the zombie state 'Z'."""
    code = ("import time\nopen('/proc/self/comm', 'w').write('a) Z 1')\n"
            "print('up', flush=True); time.sleep(3600)\n")
    named = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert named.stdout is not None and named.stdout.readline() == b"up\n"
        assert "a) Z 1" in Path(f"/proc/{named.pid}/stat").read_text()
        assert named.pid in descendants(os.getpid())
        assert _alive(named.pid)
    finally:
        named.kill()
        named.wait()
        assert named.stdout is not None
        named.stdout.close()


def test_a_zombie_and_a_reaped_process_are_dead_and_a_live_one_is_left_running() -> None:
    done = subprocess.Popen(["true"])
    _until(lambda: Path(f"/proc/{done.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
           == "Z")
    assert not _alive(done.pid)                      # exited, not yet reaped
    done.wait()
    assert not _alive(done.pid)                      # reaped
    running = subprocess.Popen(["sleep", "3600"])
    try:
        assert _alive(running.pid)
        with pytest.raises(subprocess.TimeoutExpired):
            running.wait(timeout=0.3)                # the check sent it nothing
    finally:
        running.kill()
        running.wait()


def test_a_process_deaf_to_sigterm_gets_its_grace_then_sigkill() -> None:
    deaf = subprocess.Popen(DEAF, start_new_session=True)
    _until(lambda: Path(f"/proc/{deaf.pid}/comm").read_text().strip() == "sleep")
    took = _teardown(deaf, grace_s=0.5)
    assert deaf.returncode == -signal.SIGKILL
    assert 0.5 <= took < 4.0, took


def test_a_tree_that_obeys_sigterm_ends_the_teardown_without_waiting_out_the_grace() -> None:
    obedient = subprocess.Popen(["sleep", "3600"], start_new_session=True)
    took = _teardown(obedient, grace_s=20)
    assert obedient.returncode == -signal.SIGTERM
    assert took < 10, took


def test_a_grandchild_that_escaped_the_group_deaf_to_sigterm_is_killed() -> None:
    """The launcher dies on SIGTERM, orphaning a grandchild in its own session that ignores
    SIGTERM: no longer a descendant nor a group member, it is still SIGKILLed after the grace."""
    with _escaped_deaf_grandchild() as (launcher, grandchild):
        _teardown(launcher, grace_s=0.5)
        assert _gone([grandchild])


def test_a_member_reaped_during_the_grace_is_skipped_at_sigkill() -> None:
    """The launcher ignores SIGTERM and reaps its child, which obeyed it: by SIGKILL time that
    child's pid is gone, and the teardown still completes without an error."""
    code = ("import signal, subprocess, time\n"
            "c = subprocess.Popen(['sleep', '3600'])\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print(c.pid, flush=True); c.wait(); time.sleep(3600)\n")
    with _launched(code) as launcher:
        [child] = _pids(launcher)
        _teardown(launcher, grace_s=0.5)
        assert launcher.returncode == -signal.SIGKILL and not _alive(child)


def test_a_log_with_bytes_that_are_not_utf8_is_read_with_replacement_marks(
        tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"ok\n\xff\xfe crash\nlast\n")
    assert tail(log) == "ok\n\ufffd\ufffd crash\nlast"


@pytest.mark.skipif(not hasattr(os, "setresuid") or os.geteuid() != 0,
                    reason="needs root to act as another user")
def test_a_process_that_refuses_the_callers_signals_is_alive() -> None:
    """Acting as nobody, PID 1 (root's) refuses signals (EPERM): alive, not gone. The saved
    user id stays root, so the test gets its own back."""
    os.setresuid(65534, 65534, 0)
    try:
        alive = _alive(1)
    finally:
        os.setresuid(0, 0, 0)
    assert alive


def test_waiting_for_an_orphan_deaf_to_sigterm_costs_no_cpu() -> None:
    """The launcher died at SIGTERM, its escaped grandchild ignores it: the grace is waited
    out asleep (it spun a core at 100 % for the whole grace before)."""
    with _escaped_deaf_grandchild() as (launcher, grandchild):
        cpu = time.process_time()
        took = _teardown(launcher, grace_s=2)
        assert took >= 2 and time.process_time() - cpu < 0.5 * took
        assert _gone([grandchild])


@pytest.mark.skipif(not hasattr(os, "setresuid") or os.geteuid() != 0,
                    reason="needs root to act as another user")
def test_a_tree_that_refuses_the_callers_signals_is_waited_out_not_raised_on() -> None:
    """Another user's server tree (a launcher and its child, root's; the teardown acting as
    nobody): every signal, to the group and to each process, is refused (EPERM). The teardown
    still returns, after its grace and the bounded waits, instead of raising PermissionError."""
    child = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', " \
            "'import time; time.sleep(60)']); time.sleep(60)"
    launcher = subprocess.Popen([sys.executable, "-c", child], start_new_session=True)
    try:
        _until(lambda: bool(descendants(launcher.pid)))
        os.setresuid(65534, 65534, 0)
        try:
            started = time.monotonic()
            kill_tree(launcher, grace_s=0.2)
            took = time.monotonic() - started
        finally:
            os.setresuid(0, 0, 0)
        assert launcher.poll() is None and took >= 5.0     # refused: alive, waits bounded
    finally:
        kill_tree(launcher, grace_s=1)
    assert launcher.poll() is not None
