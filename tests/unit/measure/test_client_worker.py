"""servegate.measure.client_worker.memoized: a block's client run reuses the worker's tokenizer.

The loader here is a counting function (the real one is ``AutoTokenizer.from_pretrained``,
which needs a model folder); what is pinned is the keep-per-arguments rule."""

from __future__ import annotations

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
