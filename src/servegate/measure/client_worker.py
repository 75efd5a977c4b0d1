"""A long-lived host for sglang's own serving client: imports sglang once and runs
``sglang.benchmark.serving.cli_main`` (same argv) per request, without the 10-15 s import
(docs/guide/run.md). Protocol, a JSON object a line: stdin ``{"argv": [...], "log": "path"}``;
stdout ``{"rc": 0}`` or ``{"rc": N, "error": "..."}``; EOF ends it. Stdlib and sglang only."""

from __future__ import annotations

import contextlib
import inspect
import json
import sys
import traceback
import types
from collections.abc import Callable
from typing import Any


def memoized(load: Callable[..., Any]) -> Callable[..., Any]:
    """``load`` with its results kept per (hashable) argument set; unhashable arguments load
    afresh every time."""
    kept: dict[tuple[object, ...], Any] = {}

    def cached(*args: object, **kwargs: object) -> Any:
        key = (args, tuple(sorted(kwargs.items())))
        try:
            hash(key)
        except TypeError:
            return load(*args, **kwargs)
        if key not in kept:
            kept[key] = load(*args, **kwargs)
        return kept[key]

    return cached


def _keep_tokenizers() -> None:
    """One tokenizer load per worker instead of two per block (one worker serves one model)."""
    try:
        from transformers import AutoTokenizer
    except ImportError:     # no transformers, no tokenizer to keep (a stand-in client's tests)
        return

    AutoTokenizer.from_pretrained = staticmethod(memoized(AutoTokenizer.from_pretrained))


SETTLE_PAUSE_S = 1.0


def skip_settle_pause(serving: types.ModuleType) -> None:
    """sglang's client sleeps a fixed 1 s before every run, after its cache flush has returned
    (0.5.23 python/sglang/benchmark/serving.py, ``benchmark``: ``await asyncio.sleep(1.0)``):
    the server idles through it, ~1 s of a 2.9 s block on the 2-core CPU. Only that call is
    skipped (a 1 s sleep in ``benchmark``'s own frame); request pacing, any other sleep of
    ``benchmark`` and everything else sleep as before."""
    real, benchmark = getattr(serving, "asyncio", None), getattr(serving, "benchmark", None)
    if real is None or benchmark is None:
        return
    code = inspect.unwrap(benchmark).__code__

    class _Asyncio:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        @staticmethod
        def sleep(delay: float, *args: Any, **kwargs: Any) -> Any:
            pause = delay == SETTLE_PAUSE_S and sys._getframe(1).f_code is code
            return real.sleep(0 if pause else delay, *args, **kwargs)

    serving.asyncio = _Asyncio()


def _run_one(argv: list[str], log_path: str) -> dict[str, object]:
    from sglang.benchmark import serving

    saved = sys.argv
    with open(log_path, "a", encoding="utf-8") as log, \
            contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        sys.argv = ["sglang.benchmark.serving", *argv]
        try:
            serving.cli_main()
        except SystemExit as err:           # argparse errors and explicit exits
            # as the interpreter exits: None is success, an int its status, anything else 1
            code = 0 if err.code is None else err.code if isinstance(err.code, int) else 1
            return {"rc": code, "error": f"client exited with {err.code!r}"} if code else \
                {"rc": 0}
        except BaseException as err:        # the client's own failure, kept in its log
            traceback.print_exc()
            return {"rc": 1, "error": f"{type(err).__name__}: {err}"}
        finally:
            sys.argv = saved
    return {"rc": 0}


def main() -> int:
    from sglang.benchmark import serving  # import once, before the first block

    _keep_tokenizers()
    skip_settle_pause(serving)

    print(json.dumps({"ready": True}), flush=True)      # flushed: bench waits for each line
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        reply = _run_one([str(a) for a in request["argv"]], str(request["log"]))
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
