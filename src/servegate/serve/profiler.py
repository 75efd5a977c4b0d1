"""sglang's own profiler around one block: ``POST /start_profile``, then the trace file it writes
(the request, and ``/stop_profile`` for a block shorter than ``num_steps``: docs/serve.md,
Profiled blocks)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from servegate.core.errors import ServegateError

HTTP_TIMEOUT_S = 600.0          # /stop_profile returns after the trace is exported


class ProfileError(ServegateError, RuntimeError):
    """sglang refused to profile, or wrote no trace."""


@dataclass(frozen=True)
class ProfileRequest:
    """One profiled block's request: where the trace goes, how many forwards, what to record."""

    output_dir: Path
    prefix: str
    num_steps: int
    activities: tuple[str, ...]

    def body(self) -> dict[str, object]:
        return {"output_dir": str(self.output_dir), "num_steps": self.num_steps,
                "activities": list(self.activities), "profile_prefix": self.prefix,
                "with_stack": False, "record_shapes": False}


def activities_for(arch: str) -> tuple[str, ...]:
    """CPU ops always (the step spans and kernel launches live there), device kernels on a GPU."""
    return ("CPU",) if arch == "cpu" else ("CPU", "GPU")


def _post(base_url: str, path: str, body: dict[str, object] | None) -> str:
    data = json.dumps(body or {}).encode()
    request = urllib.request.Request(base_url + path, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            return response.read().decode(errors="replace")
    except urllib.error.HTTPError as err:
        detail = err.read().decode(errors="replace")[:300]
        raise ProfileError(f"{path}: HTTP {err.code}: {detail}") from err
    except (urllib.error.URLError, OSError) as err:
        raise ProfileError(f"{path}: {err}") from err


def start(base_url: str, request: ProfileRequest) -> None:
    """Ask the server to profile its next ``num_steps`` forwards."""
    request.output_dir.mkdir(parents=True, exist_ok=True)
    _post(base_url, "/start_profile", request.body())


def traces(request: ProfileRequest) -> list[Path]:
    """The trace files this request wrote (one per TP rank), rank 0 first."""
    return sorted(request.output_dir.glob(f"{request.prefix}-*.trace.json*"),
                  key=lambda p: (not p.name.split(".trace")[0].endswith("TP-0"), p.name))


def finish(base_url: str, request: ProfileRequest, check_alive: Callable[[], None],
           timeout_s: float = 60.0) -> list[Path]:
    """After the block: the trace files, stopping the profiler first when the block had fewer
    forwards than ``num_steps`` (the scheduler exports when it stops)."""
    if not traces(request):
        check_alive()
        _post(base_url, "/stop_profile", None)
    deadline = time.monotonic() + timeout_s
    while not traces(request):
        check_alive()
        if time.monotonic() > deadline:
            raise ProfileError(f"no trace {request.prefix}-*.trace.json.gz in "
                               f"{request.output_dir} {timeout_s:.0f} s after the profile ended")
        time.sleep(0.2)
    return traces(request)
