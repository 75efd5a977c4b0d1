"""run.json's ``timings``: the measured seconds of every server start, warm-up, block, mode
switch and GSM8K pass of a ``servegate bench`` run (issue 29: ``servegate plan`` prices a
suite from these once a runner class has nights in the history store).

The lists live in the run dict itself and grow as the run goes; the session saves run.json
after every point and on failure, so an interrupted run keeps what it had measured.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any, Literal

from servegate.core.results import Run, Timings

Kind = Literal["server_starts", "warmups", "blocks", "switches", "gsm8k", "profiles"]
KINDS: tuple[Kind, ...] = ("server_starts", "warmups", "blocks", "switches", "gsm8k")
# the profiled blocks (servegate.commands.bench_profile): recorded only in a run that profiles,
# and not serving time (plan prices them apart; they are no part of the timing evidence)
PROFILES: Kind = "profiles"
# what a server does for the run once it is up (server starts are priced apart: per start)
SERVING: tuple[Kind, ...] = ("warmups", "blocks", "switches", "gsm8k")
DIGITS = 3                              # milliseconds: a mode switch can take well under 0.1 s


def empty() -> Timings:
    """Timings with every list present (a run that fails before a server start still says so)."""
    return {"server_starts": [], "warmups": [], "blocks": [], "switches": [], "gsm8k": [],
            "serving_seconds": 0.0}


def _timings(run: Run) -> Timings:
    timings = run.setdefault("timings", empty())
    for kind in KINDS:
        timings.setdefault(kind, [])     # type: ignore[misc]
    return timings


def add(run: Run, kind: Kind, seconds: float, **entry: Any) -> dict[str, Any]:
    """Append one measured entry (``seconds`` rounded) and keep ``serving_seconds`` its sum."""
    timings = _timings(run)
    item = {**entry, "seconds": round(float(seconds), DIGITS)}
    timings.setdefault(kind, []).append(item)   # type: ignore[misc]
    timings["serving_seconds"] = serving_seconds(timings)
    return item


def serving_seconds(timings: Timings) -> float:
    """Warm-ups + blocks + switches + GSM8K: the seconds the servers spent on the run's work."""
    return round(sum(float(item.get("seconds", 0.0))
                     for kind in SERVING for item in timings.get(kind, [])),  # type: ignore[attr-defined]
                 DIGITS)


@contextlib.contextmanager
def timed(run: Run, kind: Kind, **entry: Any) -> Iterator[None]:
    """Record the wall of the ``with`` body as one entry of ``kind``, if the body finishes
    (a failed warm-up or GSM8K pass is the run's error, not a duration to plan with)."""
    began = time.monotonic()
    yield
    add(run, kind, time.monotonic() - began, **entry)


def mean_block_wall(run: Run) -> float | None:
    """The run's mean measured block wall (its points' ``wall_s``; None before any block):
    run.json's ``design.block_seconds`` and the minutes an early stop saved."""
    walls = [float(p["wall_s"]) for p in run.get("points", []) if "wall_s" in p]
    return sum(walls) / len(walls) if walls else None


def finish(run: Run, started: float, now: float | None = None) -> None:
    """``total_seconds``: bench's wall from ``started`` (time.monotonic) to now, set just before
    the run is marked complete or failed."""
    timings = _timings(run)
    ended = time.monotonic() if now is None else now
    timings["serving_seconds"] = serving_seconds(timings)
    timings["total_seconds"] = round(ended - started, DIGITS)
