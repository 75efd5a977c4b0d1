"""A runner section's speed model (``[runners.<key>.speed]`` in a model profile): what a server
start, a prefill token and a decode step cost on that runner class, so ``servegate plan`` can
price a suite before a GPU is booked. Every figure carries its source (``sources``): a public
measurement, an estimate with its arithmetic, or this machine's own run; a figure without one
is refused, so a price never rests on an unnamed number.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servegate.config._schema import ConfigError, Field, check_table

FIGURES: tuple[str, ...] = ("prefill_tokens_per_s", "decode_step_ms", "model_load_s",
                            "block_overhead_s", "gsm8k_output_tokens")
_SPEED = {
    "prefill_tokens_per_s": Field(float, required=True),
    "decode_step_ms": Field(dict, required=True, item=float),
    "model_load_s": Field(float, required=True),
    "block_overhead_s": Field(float, required=True),
    "gsm8k_output_tokens": Field(float, required=True),
    "sources": Field(dict, required=True, item=str),
}


@dataclass(frozen=True)
class SpeedModel:
    """Per-server speed on one runner class (one TP group; a live pair runs two of them)."""

    prefill_tokens_per_s: float     # prompt tokens per second of prefill compute
    decode_steps_ms: tuple[tuple[int, float], ...]   # (running batch, ms per decode step)
    model_load_s: float             # launch -> /health ready, weights and first compiles
    block_overhead_s: float         # per block: cache flush, mode switch, client start
    gsm8k_output_tokens: float      # mean answer length (capped by [gsm8k] max_tokens)
    sources: dict[str, str] = field(default_factory=dict)

    def decode_step_ms(self, batch: int) -> float:
        """Decode step time at ``batch`` running requests: the table's points joined linearly
        in log2(batch), held flat beyond its ends (a batch the table does not reach is
        priced at its nearest measured neighbour, never extrapolated)."""
        points = self.decode_steps_ms
        if batch <= points[0][0]:
            return points[0][1]
        for (b0, ms0), (b1, ms1) in itertools.pairwise(points):
            if batch <= b1:
                t = (math.log2(batch) - math.log2(b0)) / (math.log2(b1) - math.log2(b0))
                return ms0 + t * (ms1 - ms0)
        return points[-1][1]

    def figures(self) -> dict[str, dict[str, Any]]:
        """Every figure with its source, as ``servegate plan --json`` prints them."""
        values: dict[str, Any] = {
            "prefill_tokens_per_s": self.prefill_tokens_per_s,
            "decode_step_ms": {str(b): ms for b, ms in self.decode_steps_ms},
            "model_load_s": self.model_load_s,
            "block_overhead_s": self.block_overhead_s,
            "gsm8k_output_tokens": self.gsm8k_output_tokens,
        }
        return {name: {"value": value, "source": self.sources[name]}
                for name, value in values.items()}


def parse_speed(path: Path, where: str, raw: object) -> SpeedModel:
    """Validate ``[<where>]`` (a runner section's ``speed`` table); errors name file and key."""
    table = check_table(path, where, raw, _SPEED)
    for name in ("prefill_tokens_per_s", "model_load_s", "gsm8k_output_tokens"):
        if table[name] <= 0:
            raise ConfigError(f"{path}: {where}.{name}: expected a positive number, "
                              f"got {table[name]!r}")
    if table["block_overhead_s"] < 0:
        raise ConfigError(f"{path}: {where}.block_overhead_s: expected >= 0, "
                          f"got {table['block_overhead_s']!r}")
    steps: list[tuple[int, float]] = []
    for key, ms in table["decode_step_ms"].items():
        if not key.isdigit() or int(key) < 1 or ms <= 0:
            raise ConfigError(f"{path}: {where}.decode_step_ms: expected batch size = ms "
                              f"pairs (positive integers = positive numbers), got "
                              f"{key!r} = {ms!r}")
        steps.append((int(key), float(ms)))
    if not steps:
        raise ConfigError(f"{path}: {where}.decode_step_ms: needs at least one batch size")
    sources = table["sources"]
    missing = [name for name in FIGURES if not sources.get(name, "").strip()]
    if missing:
        raise ConfigError(f"{path}: {where}.sources: no source for {', '.join(missing)} "
                          f"(every figure names where it comes from)")
    unknown = sorted(set(sources) - set(FIGURES))
    if unknown:
        raise ConfigError(f"{path}: {where}.sources: unknown figure(s) {', '.join(unknown)} "
                          f"(known: {', '.join(FIGURES)})")
    return SpeedModel(
        prefill_tokens_per_s=float(table["prefill_tokens_per_s"]),
        decode_steps_ms=tuple(sorted(steps)), model_load_s=float(table["model_load_s"]),
        block_overhead_s=float(table["block_overhead_s"]),
        gsm8k_output_tokens=float(table["gsm8k_output_tokens"]), sources=dict(sources))
