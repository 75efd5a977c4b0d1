"""servegate.measure.client_host / client_worker: one long-lived worker process runs sglang's
client once per block.

Two environments: the unit venv's own python, where sglang is not installed (the worker's
import of ``sglang.benchmark.serving`` fails: the host must say so, naming the worker log, and
leave no process behind), and a fake sglang client: a ``sglang/benchmark/serving.py`` written to
``tmp_path`` whose ``cli_main()`` reports its ``sys.argv`` and pid, exits with a code, raises or
sleeps as its argv asks. The fake stands in only for the client package, to pin the worker's
protocol (argv, per-block log, exit codes, reuse, timeout, watch) without sglang."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from repo_files import SRC

from servegate.measure.client import ClientError
from servegate.measure.client_host import WORKER, ClientHost

FAKE_SERVING = '''"""fake sglang client (tests/unit/measure/test_client_host.py): not sglang."""
import json
import os
import subprocess
import sys
import time

print("fake sglang client imported", file=sys.stderr, flush=True)


def cli_main():
    args = sys.argv[1:]
    print(json.dumps({"argv": args, "argv0": sys.argv[0], "pid": os.getpid()}), flush=True)
    if args[0] == "exit":
        sys.exit(None if args[1] == "none" else int(args[1]))
    if args[0] == "raise":
        raise RuntimeError("client boom")
    if args[0] == "sleep":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        print(json.dumps({"grandchild": child.pid}), flush=True)
        time.sleep(float(args[1]))
'''


def env_with(*paths: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in paths)}


@pytest.fixture
def fake_env(tmp_path: Path) -> dict[str, str]:
    """PYTHONPATH: the fake sglang client first, then servegate's sources."""
    root = tmp_path / "fake-client"
    package = root / "sglang" / "benchmark"
    package.mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("")
    (package / "__init__.py").write_text("")
    (package / "serving.py").write_text(FAKE_SERVING)
    return env_with(root, SRC)


@pytest.fixture
def host(tmp_path: Path, fake_env: dict[str, str]) -> Iterator[ClientHost]:
    with ClientHost(sys.executable, fake_env, tmp_path / "logs" / "client-worker.log") as h:
        yield h
    assert worker_children() == []


def worker_children() -> list[int]:
    """Our child processes running the worker (zombies too: a dead worker must be reaped)."""
    out = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if WORKER in " ".join(proc.cmdline()):
                out.append(proc.pid)
        except psutil.ZombieProcess:
            out.append(proc.pid)
        except psutil.NoSuchProcess:
            continue
    return out


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def replies(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]


# ------------------------------------------------------------------------ no sglang installed


def test_without_sglang_the_worker_fails_naming_its_log_and_leaves_no_process(
        tmp_path: Path) -> None:
    if importlib.util.find_spec("sglang") is not None:          # pragma: no cover
        pytest.skip("sglang is importable here: this test needs an environment without it")
    log = tmp_path / "run" / "client" / "client-worker.log"          # folders made on launch
    host = ClientHost(sys.executable, env_with(SRC), log)
    host.launch()
    assert len(worker_children()) == 1           # the scan sees the worker it must not leave
    started = time.monotonic()
    with pytest.raises(ClientError) as err:
        host.run(["--backend", "sglang"], tmp_path / "block.log", timeout_s=60)
    assert time.monotonic() - started < 30       # the exit is noticed, not waited out
    message = str(err.value)
    assert message.startswith(f"client worker exited (starting the client worker; log: {log})\n")
    assert "No module named 'sglang'" in message              # the log's tail, in the error
    assert "No module named 'sglang'" in log.read_text()
    assert worker_children() == []
    host.close()
    host.close()


def test_close_is_idempotent(tmp_path: Path, fake_env: dict[str, str]) -> None:
    host = ClientHost(sys.executable, fake_env, tmp_path / "client-worker.log")
    host.close()                                 # never started
    host.launch()
    host.launch()                                # already running: still one worker
    assert len(worker_children()) == 1
    host.close()
    assert worker_children() == []
    host.close()
    with host:                                   # the context manager closes too
        host.run(["echo"], tmp_path / "block.log", timeout_s=30)
        assert len(worker_children()) == 1
    assert worker_children() == []


# ------------------------------------------------------------------------ the protocol


def test_argv_reaches_cli_main_and_its_output_lands_in_the_blocks_log(
        tmp_path: Path, host: ClientHost) -> None:
    first, second = tmp_path / "blocks" / "b0.log", tmp_path / "blocks" / "b1.log"
    second.parent.mkdir(parents=True)
    second.write_text("stale output of an earlier attempt\n")
    argv = ["echo", "--backend", "sglang", "--num-prompts", "8", "--seed", "1", "a b"]
    host.run(argv, first, timeout_s=30)
    host.run(["echo", "--seed", "2"], second, timeout_s=30)
    [one] = replies(first)
    [two] = replies(second)
    assert one["argv"] == argv and one["argv0"] == "sglang.benchmark.serving"
    assert two["argv"] == ["echo", "--seed", "2"]
    assert "stale" not in second.read_text()      # each block's log starts empty
    assert one["pid"] == two["pid"]               # one worker for both blocks
    assert worker_children() == [one["pid"]]
    worker_log = host.log_path.read_text()
    assert worker_log.count("fake sglang client imported") == 1    # imported once
    assert "--num-prompts" not in worker_log


def test_exit_codes_and_exceptions(tmp_path: Path, host: ClientHost) -> None:
    host.run(["exit", "0"], tmp_path / "ok.log", timeout_s=30)          # SystemExit(0): fine
    with pytest.raises(ClientError) as err:
        host.run(["exit", "2"], tmp_path / "exit2.log", timeout_s=30)
    message = str(err.value)
    assert "load client failed: client exited with 2" in message
    assert str(tmp_path / "exit2.log") in message
    with pytest.raises(ClientError) as err:
        host.run(["raise"], tmp_path / "raise.log", timeout_s=30)
    assert "RuntimeError: client boom" in str(err.value)
    assert "Traceback" in (tmp_path / "raise.log").read_text()          # kept in its log
    assert "Traceback" in str(err.value)                                # and its tail shown
    # a failed block does not cost the worker
    host.run(["echo"], tmp_path / "after.log", timeout_s=30)
    pids = {r["pid"] for name in ("ok", "exit2", "raise", "after")
            for r in replies(tmp_path / f"{name}.log")}
    assert len(pids) == 1


def test_sys_exit_without_a_code_is_success(tmp_path: Path, host: ClientHost) -> None:
    host.run(["exit", "none"], tmp_path / "none.log", timeout_s=30)


def test_a_timeout_kills_the_worker_and_the_next_run_replaces_it(
        tmp_path: Path, host: ClientHost) -> None:
    host.run(["echo"], tmp_path / "before.log", timeout_s=30)
    [before] = replies(tmp_path / "before.log")
    started = time.monotonic()
    with pytest.raises(ClientError) as err:
        host.run(["sleep", "60"], tmp_path / "slow.log", timeout_s=1.5)
    assert time.monotonic() - started < 10
    message = str(err.value)
    assert "timed out" in message and str(host.log_path) in message
    assert f"(log: {tmp_path / 'slow.log'}; worker log: " in message      # the block's own log
    grandchild = next(r["grandchild"] for r in replies(tmp_path / "slow.log") if "grandchild" in r)
    assert worker_children() == []
    assert not alive(before["pid"]) and not alive(grandchild)    # the whole tree
    host.run(["echo"], tmp_path / "after.log", timeout_s=30)
    [after] = replies(tmp_path / "after.log")
    assert after["pid"] != before["pid"] and worker_children() == [after["pid"]]


def test_a_raising_watch_stops_the_block_and_kills_the_worker(
        tmp_path: Path, host: ClientHost) -> None:
    calls: list[float] = []

    def watch() -> None:
        calls.append(time.monotonic())
        raise RuntimeError("server died")

    started = time.monotonic()
    with pytest.raises(RuntimeError, match="server died"):
        host.run(["sleep", "60"], tmp_path / "slow.log", timeout_s=120, watch=watch)
    assert len(calls) == 1 and time.monotonic() - started < 10
    [pid] = {r["pid"] for r in replies(tmp_path / "slow.log") if "pid" in r}
    grandchild = next(r["grandchild"] for r in replies(tmp_path / "slow.log") if "grandchild" in r)
    assert worker_children() == []
    assert not alive(pid) and not alive(grandchild)


def test_a_quiet_watch_is_polled_while_the_block_runs(tmp_path: Path, host: ClientHost) -> None:
    calls: list[float] = []
    host.run(["sleep", "2.5"], tmp_path / "block.log", timeout_s=30,
             watch=lambda: calls.append(time.monotonic()))
    assert len(calls) >= 2                        # about once a second


def test_a_blocks_log_may_be_in_folders_not_made_yet(tmp_path: Path, host: ClientHost) -> None:
    log = tmp_path / "client" / "s0" / "b1" / "block.log"
    host.run(["echo"], log, timeout_s=30)
    assert replies(log)
