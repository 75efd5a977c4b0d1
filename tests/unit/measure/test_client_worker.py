"""servegate.measure.client_worker: a block's client run reuses the worker's tokenizer, and the
worker's own rules (exit codes, the block's log, sys.argv, the line protocol).

The loader here is a counting function (the real one is ``AutoTokenizer.from_pretrained``,
which needs a model folder); what is pinned is the keep-per-arguments rule."""

from __future__ import annotations

import asyncio
import io
import json
import sys
import types
from pathlib import Path

import pytest

from servegate.measure import client_worker
from servegate.measure.client_worker import memoized


def _counting_loader() -> tuple[list[tuple[object, ...]], object]:
    calls: list[tuple[object, ...]] = []

    def load(*args: object, **kwargs: object) -> object:
        calls.append((args, tuple(sorted(kwargs.items()))))
        return object()

    return calls, load


def test_same_arguments_load_once_and_return_the_same_object() -> None:
    calls, load = _counting_loader()
    cached = memoized(load)
    first = cached("/models/m", trust_remote_code=True)
    assert cached("/models/m", trust_remote_code=True) is first
    assert len(calls) == 1


def test_different_arguments_load_separately() -> None:
    calls, load = _counting_loader()
    cached = memoized(load)
    a = cached("/models/a", trust_remote_code=True)
    b = cached("/models/b", trust_remote_code=True)
    c = cached("/models/a", trust_remote_code=False)
    assert len({id(a), id(b), id(c)}) == 3 and len(calls) == 3


def test_unhashable_arguments_load_every_time() -> None:
    calls, load = _counting_loader()
    cached = memoized(load)
    first = cached("/models/m", extra={"k": 1})
    assert cached("/models/m", extra={"k": 1}) is not first
    assert len(calls) == 2


def test_positional_and_keyword_arguments_both_reach_the_loader() -> None:
    cached = memoized(lambda *args, **kwargs: (args, kwargs))
    assert cached("/models/m", use_fast=True) == (("/models/m",), {"use_fast": True})
    assert cached("/models/m", extra={"k": 1}) == (("/models/m",), {"extra": {"k": 1}})


def test_the_worker_keeps_each_tokenizer_it_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """``AutoTokenizer.from_pretrained`` (a stand-in ``transformers``: the real one needs a model
    folder) is kept per argument set once the worker starts; nothing breaks without it."""
    loads: list[str] = []

    class AutoTokenizer:
        @staticmethod
        def from_pretrained(path: str, **kwargs: object) -> object:
            loads.append(path)
            return object()

    monkeypatch.setitem(sys.modules, "transformers",
                        types.SimpleNamespace(AutoTokenizer=AutoTokenizer))
    client_worker._keep_tokenizers()
    first = AutoTokenizer.from_pretrained("/models/m", trust_remote_code=False)
    assert AutoTokenizer.from_pretrained("/models/m", trust_remote_code=False) is first
    assert AutoTokenizer.from_pretrained("/models/n") is not first
    assert loads == ["/models/m", "/models/n"]
    monkeypatch.setitem(sys.modules, "transformers", None)      # import fails: left as it is
    client_worker._keep_tokenizers()


class _FlushRecorder(io.StringIO):
    """A pipe's reader sees only what was flushed: keep the text at every flush."""

    def __init__(self) -> None:
        super().__init__()
        self.flushed: list[str] = []

    def flush(self) -> None:
        self.flushed.append(self.getvalue())


# _run_one and main drive sglang's client in-process. Here a stand-in module named
# ``sglang.benchmark.serving`` (a test double for the client, whose real runs are the
# real-sglang tier's) pins the worker's own rules: exit codes, the log, sys.argv, the protocol.

def _stand_in_client(monkeypatch: pytest.MonkeyPatch, behaviour: object) -> list[list[str]]:
    """Install a stand-in ``sglang.benchmark.serving`` whose cli_main does ``behaviour``."""
    seen: list[list[str]] = []

    def cli_main() -> None:
        seen.append(list(sys.argv))
        print("client output line")
        print("client warning", file=sys.stderr)
        sys.stderr.write("client stderr write\n")
        if isinstance(behaviour, BaseException):
            raise behaviour

    async def benchmark() -> None:      # the shape skip_settle_pause looks for
        pass

    serving = types.ModuleType("sglang.benchmark.serving")
    serving.cli_main, serving.benchmark = cli_main, benchmark  # type: ignore[attr-defined]
    serving.asyncio = asyncio  # type: ignore[attr-defined]
    benchmark = types.ModuleType("sglang.benchmark")
    benchmark.serving = serving  # type: ignore[attr-defined]
    sglang = types.ModuleType("sglang")
    sglang.benchmark = benchmark  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sglang", sglang)
    monkeypatch.setitem(sys.modules, "sglang.benchmark", benchmark)
    monkeypatch.setitem(sys.modules, "sglang.benchmark.serving", serving)
    return seen


@pytest.mark.parametrize(("behaviour", "reply"), [
    (None, {"rc": 0}),
    (SystemExit(None), {"rc": 0}),
    (SystemExit(0), {"rc": 0}),
    (SystemExit(2), {"rc": 2, "error": "client exited with 2"}),
    (SystemExit("bad args"), {"rc": 1, "error": "client exited with 'bad args'"}),
    (ValueError("no server"), {"rc": 1, "error": "ValueError: no server"}),
])
def test_one_run_maps_the_clients_exit_to_a_reply(monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path, behaviour: object,
                                                  reply: dict[str, object]) -> None:
    seen = _stand_in_client(monkeypatch, behaviour)
    log = tmp_path / "block.log"
    log.write_text("earlier block\n")
    argv_before = list(sys.argv)
    assert client_worker._run_one(["--num-prompts", "2"], str(log)) == reply
    assert seen == [["sglang.benchmark.serving", "--num-prompts", "2"]]
    assert sys.argv == argv_before                        # restored for the next block
    text = log.read_text()
    assert text.startswith("earlier block\nclient output line\n")   # appended, both streams
    assert "client warning" in text and "client stderr write" in text
    assert ("Traceback" in text) is isinstance(behaviour, ValueError)


def test_the_worker_answers_one_line_per_request_and_skips_blank_lines(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen = _stand_in_client(monkeypatch, None)
    monkeypatch.setattr(client_worker, "_keep_tokenizers", lambda: None)
    requests = [{"argv": ["--seed", 1], "log": str(tmp_path / "a.log")},
                {"argv": ["--seed", "2"], "log": str(tmp_path / "b.log")}]
    stdin = io.StringIO("\n".join([json.dumps(requests[0]), "", "  ",
                                   json.dumps(requests[1])]) + "\n")
    stdout = _FlushRecorder()
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.setattr(sys, "stdout", stdout)
    assert client_worker.main() == 0
    lines = [json.loads(line) for line in stdout.getvalue().splitlines()]
    assert lines == [{"ready": True}, {"rc": 0}, {"rc": 0}]
    # every line reaches bench as it is written (bench blocks on it), not at exit
    assert [len(text.splitlines()) for text in stdout.flushed][-3:] == [1, 2, 3]
    assert stdout.flushed[-1] == stdout.getvalue()
    assert seen == [["sglang.benchmark.serving", "--seed", "1"],   # argv items as strings
                    ["sglang.benchmark.serving", "--seed", "2"]]
    assert (tmp_path / "a.log").exists() and (tmp_path / "b.log").exists()
    patched = sys.modules["sglang.benchmark.serving"].asyncio     # the pause skipped once
    assert patched is not asyncio and patched.gather is asyncio.gather


def test_only_the_clients_fixed_pause_before_a_run_is_skipped() -> None:
    """sglang's ``benchmark`` sleeps 1 s after its cache flush (a stand-in ``serving`` module
    of that shape: the real one needs a server); the worker skips that sleep and no other:
    the request pacing's sleeps, benchmark's other sleeps and any other caller's reach asyncio
    with their delays."""
    delays: list[float] = []

    async def sleep(delay: float, result: object = None) -> object:
        delays.append(delay)
        return result

    fake_asyncio = types.SimpleNamespace(sleep=sleep, run=lambda c: None)
    serving = types.ModuleType("serving")

    async def pace() -> None:
        await serving.asyncio.sleep(0.25)

    async def benchmark() -> None:
        await serving.asyncio.sleep(1.0)        # the pause after the flush
        await pace()                            # a request's arrival time
        await serving.asyncio.sleep(2.0)        # another sleep of benchmark's own: kept

    serving.asyncio, serving.benchmark = fake_asyncio, benchmark
    client_worker.skip_settle_pause(serving)
    assert serving.asyncio.run is fake_asyncio.run          # the rest of asyncio untouched
    coroutine = benchmark()
    with pytest.raises(StopIteration):
        coroutine.send(None)
    assert delays == [0, 0.25, 2.0]
    for call in (serving.asyncio.sleep(0.5, "positional"), serving.asyncio.sleep(0.5, result="kw")):
        with pytest.raises(StopIteration) as done:        # asyncio.sleep's own arguments pass
            call.send(None)
        assert done.value.value in ("positional", "kw")
    assert delays == [0, 0.25, 2.0, 0.5, 0.5]
    bare = types.ModuleType("older")                        # no benchmark(): left as it is
    bare.asyncio = fake_asyncio
    client_worker.skip_settle_pause(bare)
    assert bare.asyncio is fake_asyncio
    client_worker.skip_settle_pause(types.ModuleType("empty"))     # nothing to patch: no error
