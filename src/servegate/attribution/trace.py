"""Reduce one sglang profiler trace (torch's Chrome trace JSON, ``.json`` or ``.json.gz``) to
kernel time per forward step by family (docs/serve.md, Profiled blocks).

sglang wraps every ``ModelRunner.forward`` in a span ``step[EXTEND bs=2 toks=256]`` /
``step[DECODE bs=2]``. On a GPU trace the step's time is every kernel launched inside the span,
by the kernel's name (else the innermost named torch op around its launch); on a CPU trace, the
outermost torch ops inside the span, whole, by the op's name (an op no rule names is opened up).
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servegate.attribution.families import OTHER, classify

STEP = re.compile(r"^step\[(?P<stage>[A-Z_]+) bs=(?P<bs>\d+)(?: toks=(?P<toks>\d+))?")
PREFILL_STAGES = ("EXTEND", "MIXED", "DRAFT_EXTEND", "DRAFT_EXTEND_V2")
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver", "hip_runtime")


class TraceError(ValueError):
    """A trace that cannot be reduced (not Chrome trace JSON, no step spans)."""


@dataclass
class Forward:
    """One profiled forward step: its stage, batch size, prefill tokens and family times."""

    stage: str
    bs: int
    tokens: int | None
    span_us: float
    us: dict[str, float] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return "prefill" if self.stage in PREFILL_STAGES else "decode"

    def record(self) -> dict[str, Any]:
        """Compact JSON: microseconds rounded to 0.1."""
        out: dict[str, Any] = {"stage": self.stage, "kind": self.kind, "bs": self.bs,
                               "span_us": round(self.span_us, 1),
                               "us": {k: round(v, 1) for k, v in sorted(self.us.items()) if v}}
        if self.tokens is not None:
            out["tokens"] = self.tokens
        return out


@dataclass
class Reduced:
    """A trace reduced: its forwards in order and the names that fell into ``other``."""

    forwards: list[Forward]
    other_names: dict[str, float]       # name -> microseconds over every forward
    device: str                         # "gpu" (kernel time) or "cpu" (op time)
    # GPU: kernel time whose correlation names no launch in the trace (e.g. a graph replay the
    # profiler did not link): in no forward, reported so that nothing vanishes silently
    unlinked_us: float = 0.0


def load_events(path: Path) -> list[dict[str, Any]]:
    """The complete (``ph`` X) events of a Chrome trace file."""
    opener = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError, EOFError) as err:
        raise TraceError(f"{path}: not a readable Chrome trace: {err}") from err
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise TraceError(f"{path}: no traceEvents list")
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X"
            and "ts" in e and "dur" in e]


def _step(event: Mapping[str, Any]) -> re.Match[str] | None:
    """The step span on the host thread (a GPU trace mirrors it as ``gpu_user_annotation`` on
    the device timeline: not counted twice)."""
    if event.get("cat") not in ("user_annotation", None):
        return None
    return STEP.match(str(event.get("name", "")))


def _inside(event: Mapping[str, Any], span: Mapping[str, Any]) -> bool:
    start, end = float(span["ts"]), float(span["ts"]) + float(span["dur"])
    return start <= float(event["ts"]) and float(event["ts"]) + float(event["dur"]) <= end + 1e-3


def _children(events: list[dict[str, Any]]) -> tuple[list[int], dict[int, list[int]]]:
    """The nesting of time-sorted events on one thread: (roots, children by index)."""
    roots: list[int] = []
    kids: dict[int, list[int]] = defaultdict(list)
    stack: list[int] = []
    for i, e in enumerate(events):
        while stack and float(events[stack[-1]]["ts"]) + float(events[stack[-1]]["dur"]) \
                <= float(e["ts"]) + 1e-3:
            stack.pop()
        (kids[stack[-1]] if stack else roots).append(i)
        stack.append(i)
    return roots, kids


def _cpu_time(ops: list[dict[str, Any]], out: dict[str, float],
              other: dict[str, float]) -> None:
    """Outermost ops whole by their name's family; an unnamed op is opened up."""
    ops = sorted(ops, key=lambda e: (float(e["ts"]), -float(e["dur"])))
    roots, kids = _children(ops)

    def visit(i: int) -> None:
        name = str(ops[i].get("name", ""))
        dur = float(ops[i]["dur"])
        family = classify(name)
        if family != OTHER or not kids.get(i):
            out[family] = out.get(family, 0.0) + dur
            if family == OTHER:
                other[name] = other.get(name, 0.0) + dur
            return
        inner = sum(float(ops[k]["dur"]) for k in kids[i])
        own = max(0.0, dur - inner)
        out[OTHER] = out.get(OTHER, 0.0) + own
        other[name] = other.get(name, 0.0) + own
        for k in kids[i]:
            visit(k)

    for i in roots:
        visit(i)


def _gpu_time(step: Mapping[str, Any], thread_ops: list[dict[str, Any]],
              launches: list[dict[str, Any]], kernels: Mapping[Any, list[dict[str, Any]]],
              out: dict[str, float], other: dict[str, float]) -> None:
    """Kernels launched inside the step: by kernel name, else by the launching op's name."""
    for launch in launches:
        if not _inside(launch, step):
            continue
        correlation = (launch.get("args") or {}).get("correlation")
        for kernel in kernels.get(correlation, ()):
            name = str(kernel.get("name", ""))
            family = classify(name)
            if family == OTHER:
                around = [op for op in thread_ops if _inside(launch, op)]
                for op in sorted(around, key=lambda e: float(e["dur"])):   # innermost first
                    if classify(str(op.get("name", ""))) != OTHER:
                        family = classify(str(op.get("name", "")))
                        break
            out[family] = out.get(family, 0.0) + float(kernel["dur"])
            if family == OTHER:
                other[name] = other.get(name, 0.0) + float(kernel["dur"])


def reduce_events(events: Iterable[dict[str, Any]]) -> Reduced:
    """Forward steps with their family times (see the module doc for the rules)."""
    events = list(events)
    steps = sorted((e for e in events if _step(e)), key=lambda e: float(e["ts"]))
    if not steps:
        raise TraceError("no sglang step spans (step[...]) in the trace: not a forward profile")
    by_thread: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e.get("cat") == "cpu_op":
            by_thread[(e.get("pid"), e.get("tid"))].append(e)
    kernels: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e.get("cat") in DEVICE_CATS:
            kernels[(e.get("args") or {}).get("correlation")].append(e)
    launches_by_thread: dict[tuple[Any, Any], list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        if e.get("cat") in LAUNCH_CATS:
            launches_by_thread[(e.get("pid"), e.get("tid"))].append(e)
    device = "gpu" if kernels else "cpu"
    launched = {(e.get("args") or {}).get("correlation")
                for thread in launches_by_thread.values() for e in thread}
    unlinked = sum(float(k["dur"]) for corr, group in kernels.items() if corr not in launched
                   for k in group)
    forwards: list[Forward] = []
    other: dict[str, float] = {}
    for step in steps:
        match = _step(step)
        assert match is not None
        thread = (step.get("pid"), step.get("tid"))
        ops = [op for op in by_thread.get(thread, ()) if _inside(op, step)]
        out: dict[str, float] = {}
        if device == "gpu":
            _gpu_time(step, ops, launches_by_thread.get(thread, []), kernels, out, other)
        else:
            _cpu_time(ops, out, other)
        toks = match.group("toks")
        forwards.append(Forward(stage=match.group("stage"), bs=int(match.group("bs")),
                                tokens=int(toks) if toks else None,
                                span_us=float(step["dur"]), us=out))
    return Reduced(forwards=forwards, other_names=other, device=device, unlinked_us=unlinked)


def reduce_trace(path: Path) -> Reduced:
    """:func:`reduce_events` over one trace file."""
    return reduce_events(load_events(path))
