"""A stand-in for the ``subprocess`` module whose ``run`` never returns in time (a hung device
tool, e.g. ``nvidia-smi`` on a wedged GPU, which these machines cannot produce): it records the
keyword arguments it was called with and raises ``TimeoutExpired``, so a test can pin the bound a
caller puts on the tool and what the caller does when it is hit."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace
from typing import Any


def timing_out_subprocess(seen: dict[str, Any]) -> SimpleNamespace:
    """``subprocess`` as the caller uses it (``run``, ``TimeoutExpired``); ``seen`` gets the
    keyword arguments of every ``run`` call."""

    def run(argv: list[str], **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise subprocess.TimeoutExpired(argv, kwargs.get("timeout") or 0)

    return SimpleNamespace(run=run, TimeoutExpired=subprocess.TimeoutExpired)
