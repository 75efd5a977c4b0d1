"""``[profile]`` in a suite (or ``servegate bench --profile``): one profiled block per mode, tree
and server start under sglang's profiler, for the attribution of kernel time by family
(``servegate.attribution``). Off unless asked: a profiled block costs a block plus the
profiler's overhead and the trace export."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servegate.config._schema import ConfigError, Field, check_table

_PROFILE = {"enabled": Field(bool), "decode_steps": Field(int), "floor": Field(float),
            "block_cv": Field(float), "keep_traces": Field(bool)}
DEFAULT_DECODE_STEPS = 4
DEFAULT_FLOOR = 0.10
# A prior, unmeasured on a GPU: how far one family's kernel time moves between two profiled
# blocks of the same mode beyond what its forwards' spread shows. Used only while a mode has one
# profiled block; with two or more (one per server start) the blocks' own spread replaces it.
DEFAULT_BLOCK_CV = 0.05


@dataclass(frozen=True)
class ProfileSettings:
    """What the profiled blocks record: every prefill round of one wave at the suite's highest
    concurrency plus ``decode_steps`` decode steps; ``floor`` is the relative change the
    attribution calls moved; ``block_cv`` is the between-block log-sd of a family's time the
    interval carries when a mode has one profiled block; raw traces are kept only with
    ``keep_traces``."""

    enabled: bool = False
    decode_steps: int = DEFAULT_DECODE_STEPS
    floor: float = DEFAULT_FLOOR
    block_cv: float = DEFAULT_BLOCK_CV
    keep_traces: bool = False

    def num_steps(self, concurrency: int, input_len: int, chunk: int) -> int:
        """Forward steps to profile: the wave's prefill rounds (one more for the round a tail
        chunk may add) and the decode steps."""
        return math.ceil(concurrency * input_len / max(chunk, 1)) + 1 + self.decode_steps


def parse_profile_table(path: Path, table: Any) -> ProfileSettings:
    """``[profile]`` validated (unknown keys and wrong types name file and key)."""
    if table is None:
        return ProfileSettings()
    checked = check_table(path, "profile", table, _PROFILE)
    settings = ProfileSettings(enabled=bool(checked.get("enabled", True)),
                               decode_steps=int(checked.get("decode_steps",
                                                            DEFAULT_DECODE_STEPS)),
                               floor=float(checked.get("floor", DEFAULT_FLOOR)),
                               block_cv=float(checked.get("block_cv", DEFAULT_BLOCK_CV)),
                               keep_traces=bool(checked.get("keep_traces", False)))
    if settings.decode_steps < 0:
        raise ConfigError(f"{path}: profile.decode_steps: expected >= 0")
    if not 0.0 < settings.floor < 1.0:
        raise ConfigError(f"{path}: profile.floor: expected a fraction in (0, 1)")
    if not 0.0 <= settings.block_cv < 1.0:
        raise ConfigError(f"{path}: profile.block_cv: expected a log-sd in [0, 1)")
    return settings
