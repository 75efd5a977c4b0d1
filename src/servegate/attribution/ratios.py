"""The attribution: per family, the ratio of kernel time between two modes (``forced`` vs
``off``, ``on`` vs ``off``) or two trees (head vs base, per mode), with a 95 % interval across
the profiled forwards, and one line naming the families that moved beyond noise. Reported
beside the gated checks, never gating: a profiled block is one client run per mode and start,
its forwards are not independent server starts, and the profiler itself slows every op.

Quantities: prefill per token (a prefill forward's family time over its tokens: the tail chunk
of a wave differs between modes, per token compares like with like), prefill per forward, and
decode per forward. The interval is Welch's t on the log of the per-forward values (a ratio of
geometric means); a family "moved" when the whole interval lies beyond ``floor`` on one side.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scipy import stats

from servegate.attribution.families import FAMILIES, label
from servegate.attribution.record import forwards_by_label

QUANTITIES: tuple[str, ...] = ("prefill_per_token", "prefill_per_forward", "decode_per_forward")
QUANTITY_TEXT = {"prefill_per_token": "per prefill token",
                 "prefill_per_forward": "per prefill forward",
                 "decode_per_forward": "per decode forward"}
IN_LINE = ("prefill_per_token", "decode_per_forward")   # what the one line names
DEFAULT_FLOOR = 0.10
CONFIDENCE = 0.95
FLOOR_US = 1.0          # a family's time below 1 us in a forward is read as 1 us (log scale)


@dataclass(frozen=True)
class Ratio:
    """One family's ratio for one quantity: ``ratio`` [``low``, ``high``] over n forwards."""

    family: str
    quantity: str
    ratio: float
    low: float
    high: float
    n_a: int
    n_b: int
    moved: bool

    def record(self) -> dict[str, Any]:
        return {"family": self.family, "quantity": self.quantity, "ratio": round(self.ratio, 4),
                "low": round(self.low, 4), "high": round(self.high, 4), "n": [self.n_a, self.n_b],
                "moved": self.moved}

    def text(self) -> str:
        return f"{label(self.family)} {QUANTITY_TEXT[self.quantity]} x{self.ratio:.2f}"


def _values(forwards: Iterable[Mapping[str, Any]], family: str, quantity: str) -> list[float]:
    kind = quantity.split("_", 1)[0]
    out = []
    for f in forwards:
        if f["kind"] != kind:
            continue
        value = float(f["us"].get(family, 0.0))
        if quantity == "prefill_per_token":
            if not f.get("tokens"):
                continue
            value /= float(f["tokens"])
            out.append(max(value, FLOOR_US / float(f["tokens"])))
        else:
            out.append(max(value, FLOOR_US))
    return out


def ratio_interval(a: list[float], b: list[float], floor: float,
                   confidence: float = CONFIDENCE) -> tuple[float, float, float, bool] | None:
    """``a`` over ``b`` as a ratio of geometric means with Welch's t interval on the logs;
    None with fewer than two values a side."""
    if len(a) < 2 or len(b) < 2:
        return None
    la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
    ma, mb = sum(la) / len(la), sum(lb) / len(lb)
    va = sum((x - ma) ** 2 for x in la) / (len(la) - 1)
    vb = sum((x - mb) ** 2 for x in lb) / (len(lb) - 1)
    se2 = va / len(la) + vb / len(lb)
    diff = ma - mb
    if se2 <= 0:
        low = high = diff
    else:
        dof = se2 ** 2 / ((va / len(la)) ** 2 / (len(la) - 1)
                          + (vb / len(lb)) ** 2 / (len(lb) - 1)) if va and vb else \
            (len(la) - 1 if va else len(lb) - 1)
        half = float(stats.t.ppf(0.5 + confidence / 2, max(dof, 1.0))) * math.sqrt(se2)
        low, high = diff - half, diff + half
    edge = math.log1p(floor)
    moved = low > edge or high < -edge
    return math.exp(diff), math.exp(low), math.exp(high), moved


def pairs(labels: Iterable[str]) -> list[tuple[str, str]]:
    """What is compared: head vs base per mode when the run has trees, else every mode vs
    ``off`` (when the run has ``off``)."""
    labels = list(labels)
    if any(x.startswith(("head-", "base-")) for x in labels):
        return [(x, "base-" + x[5:]) for x in labels
                if x.startswith("head-") and "base-" + x[5:] in labels]
    return [(x, "off") for x in labels if x != "off" and "off" in labels]


def compare(blocks: Iterable[Mapping[str, Any]], floor: float = DEFAULT_FLOOR
            ) -> list[dict[str, Any]]:
    """Every pair's ratios per family and quantity, and its one line."""
    pooled = forwards_by_label(blocks)
    out = []
    for a, b in pairs(pooled):
        ratios: list[Ratio] = []
        for quantity in QUANTITIES:
            for family in FAMILIES:
                va = _values(pooled[a], family, quantity)
                vb = _values(pooled[b], family, quantity)
                if not any(f["us"].get(family) for f in pooled[a] + pooled[b]):
                    continue                    # absent on both sides (MoE on a dense model)
                got = ratio_interval(va, vb, floor)
                if got is not None:
                    ratios.append(Ratio(family, quantity, *got[:3], len(va), len(vb), got[3]))
        out.append({"a": a, "b": b, "floor": floor, "ratios": [r.record() for r in ratios],
                    "moved": sorted({r.family for r in ratios if r.moved}),
                    "line": line(a, b, ratios)})
    return out


def line(a: str, b: str, ratios: list[Ratio]) -> str:
    """``forced vs off: moved: dense GEMM per prefill token x3.95 [3.20, 4.87], ...; within
    noise: attention x1.01, ...`` (the line quantities only)."""
    shown = [r for r in ratios if r.quantity in IN_LINE]
    moved = [f"{r.text()} [{r.low:.2f}, {r.high:.2f}]" for r in shown if r.moved]
    moved_families = {r.family for r in shown if r.moved}
    calm = [r for r in shown if r.quantity == IN_LINE[0] and r.family not in moved_families]
    parts = [f"{a} vs {b}:"]
    parts.append(f"moved beyond noise: {', '.join(moved)};" if moved
                 else "no family moved beyond noise;")
    if calm:
        parts.append("within noise: " + ", ".join(f"{label(r.family)} x{r.ratio:.2f}"
                                                  for r in calm)
                     + f" ({QUANTITY_TEXT[IN_LINE[0]]})")
    return " ".join(parts).rstrip(";")
