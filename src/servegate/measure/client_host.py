"""Drive :mod:`servegate.measure.client_worker`: sglang's own client, imported once, one block
per request (see that module for why). Contract: a timeout,
a ``watch`` callback polled while the block runs (a dead server stops it at once), and the
process killed with its children on every exit path (a timed-out worker is replaced)."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from servegate.measure.client import ClientError
from servegate.serve.process import kill_tree, tail

WORKER = "servegate.measure.client_worker"
READY_TIMEOUT_S = 300.0


class ClientHost:
    """One worker process per environment (an arm's sglang tree goes on its import path)."""

    def __init__(self, python: str, env: dict[str, str] | None, log_path: Path) -> None:
        self.python, self.env, self.log_path = python, env, log_path
        self._proc: subprocess.Popen[str] | None = None
        self._ready: bool                       # both set by launch, which _start always calls
        self._lines: queue.Queue[str | None]

    def launch(self) -> None:
        """Start importing the client now (e.g. while the server loads); :meth:`run` waits."""
        if self._proc is not None and self._proc.poll() is None:
            return
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            proc = subprocess.Popen([self.python, "-m", WORKER], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=log, text=True,
                                    env=self.env, start_new_session=True)
        self._lines = queue.Queue()
        threading.Thread(target=self._read, args=(proc, self._lines), daemon=True).start()
        self._proc, self._ready = proc, False

    def _start(self) -> subprocess.Popen[str]:
        self.launch()
        if not self._ready:
            self._reply(READY_TIMEOUT_S, None, "starting the client worker")
            self._ready = True
        assert self._proc is not None
        return self._proc

    @staticmethod
    def _read(proc: subprocess.Popen[str], lines: queue.Queue[str | None]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    def _reply(self, timeout_s: float, watch: Callable[[], None] | None,
               what: str) -> dict[str, object]:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                line = self._lines.get(timeout=min(1.0, max(0.0, deadline - time.monotonic())))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    self.close()
                    raise ClientError(f"load client timed out after {timeout_s:.0f} s "
                                      f"({what}; worker log: {self.log_path})") from None
                if watch is not None:
                    try:
                        watch()
                    except BaseException:
                        self.close()
                        raise
                continue
            if line is None:
                self.close()
                raise ClientError(f"client worker exited ({what}; log: {self.log_path})\n"
                                  f"{tail(self.log_path)}")
            try:
                return dict(json.loads(line))
            except (json.JSONDecodeError, TypeError, ValueError):
                continue                        # a stray print on stdout, not a reply

    def run(self, argv: list[str], log_path: Path, timeout_s: float,
            watch: Callable[[], None] | None = None) -> None:
        """One client run with ``argv`` (as after ``python -m sglang.benchmark.serving``)."""
        proc = self._start()
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log_path.write_text("")
        assert proc.stdin is not None
        proc.stdin.write(json.dumps({"argv": argv, "log": str(log_path)}) + "\n")
        proc.stdin.flush()
        reply = self._reply(timeout_s, watch, f"log: {log_path}")
        if reply.get("rc") != 0:
            raise ClientError(f"load client failed: {reply.get('error')} (log: {log_path})\n"
                              f"{tail(log_path)}")

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            kill_tree(proc, grace_s=5)  # type: ignore[arg-type]  # pragma: no mutate (timing only: the grace before SIGKILL)

    def __enter__(self) -> ClientHost:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
