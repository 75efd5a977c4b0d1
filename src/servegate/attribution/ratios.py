"""The attribution: per family, the ratio of kernel time between two modes or two trees with a 95 %
interval, and one line naming the families that moved beyond noise; reported, never gating (the
interval, its units and ``[profile] block_cv``: docs/serve.md, Profiled blocks and the kernel
attribution; calibrated in ``tests/unit/attribution/test_ratios.py``)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scipy import stats

from servegate.attribution.families import FAMILIES, label
from servegate.attribution.record import blocks_by_label
from servegate.config.profiling import DEFAULT_BLOCK_CV, DEFAULT_FLOOR

QUANTITIES: tuple[str, ...] = ("prefill_per_token", "prefill_per_forward", "decode_per_forward")
QUANTITY_TEXT = {"prefill_per_token": "per prefill token",
                 "prefill_per_forward": "per prefill forward",
                 "decode_per_forward": "per decode forward"}
IN_LINE = ("prefill_per_token", "decode_per_forward")   # what the one line names
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
    blocks: tuple[int, int]     # profiled blocks a side with a value
    between: str                # "blocks": the blocks' own spread; "prior": ``block_cv``

    def record(self) -> dict[str, Any]:
        return {"family": self.family, "quantity": self.quantity, "ratio": round(self.ratio, 4),
                "low": round(self.low, 4), "high": round(self.high, 4), "n": [self.n_a, self.n_b],
                "blocks": list(self.blocks), "between": self.between, "moved": self.moved}

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
                   confidence: float = CONFIDENCE, known_var: float = 0.0
                   ) -> tuple[float, float, float, bool] | None:
    """``a`` over ``b`` as a ratio of geometric means with Welch's t interval on the logs, plus
    ``known_var`` (a prior variance of the log difference: it widens the interval, the degrees
    of freedom stay those of the estimated part); None with fewer than two values a side."""
    if len(a) < 2 or len(b) < 2:
        return None
    la, lb = [math.log(x) for x in a], [math.log(x) for x in b]
    ma, mb = sum(la) / len(la), sum(lb) / len(lb)
    va = sum((x - ma) ** 2 for x in la) / (len(la) - 1)
    vb = sum((x - mb) ** 2 for x in lb) / (len(lb) - 1)
    sa, sb = va / len(la), vb / len(lb)
    se2 = sa + sb + known_var
    diff = ma - mb
    if se2 <= 0:
        low = high = diff
    else:
        # Welch's degrees of freedom of the estimated part alone: letting the known part add
        # degrees of freedom (Satterthwaite) made a chance-small estimate from three forwards
        # look certain (simulated: 2 % of runs named an untouched family at the prior's own
        # between-block spread, against < 0.5 % this way).
        estimated = sa ** 2 / (len(la) - 1) + sb ** 2 / (len(lb) - 1)
        dof = (sa + sb) ** 2 / estimated if estimated > 0 else math.inf
        half = float(stats.t.ppf(0.5 + confidence / 2, max(dof, 1.0))) * math.sqrt(se2)
        low, high = diff - half, diff + half
    edge = math.log1p(floor)
    moved = low > edge or high < -edge
    return math.exp(diff), math.exp(low), math.exp(high), moved


def family_interval(a: list[list[float]], b: list[list[float]], floor: float, block_cv: float
                    ) -> tuple[tuple[float, float, float, bool], str, tuple[int, int]] | None:
    """One family's ratio from its per-block values on each side (see the module doc): the
    blocks as units when both sides have two or more, else the pooled forwards widened by the
    prior between-block variance; with which of the two was used and the blocks a side that
    had values."""
    a = [values for values in a if values]
    b = [values for values in b if values]
    if len(a) >= 2 and len(b) >= 2:
        got = ratio_interval([_geomean(v) for v in a], [_geomean(v) for v in b], floor)
        between = "blocks"
    else:
        known = block_cv ** 2 * (1.0 / max(len(a), 1) + 1.0 / max(len(b), 1))
        got = ratio_interval([x for v in a for x in v], [x for v in b for x in v], floor,
                             known_var=known)
        between = "prior"
    return (got, between, (len(a), len(b))) if got is not None else None


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in values) / len(values))


def pairs(labels: Iterable[str]) -> list[tuple[str, str]]:
    """What is compared: head vs base per mode when the run has trees, else every mode vs
    ``off`` (when the run has ``off``)."""
    labels = list(labels)
    if any(x.startswith(("head-", "base-")) for x in labels):
        return [(x, "base-" + x[5:]) for x in labels
                if x.startswith("head-") and "base-" + x[5:] in labels]
    return [(x, "off") for x in labels if x != "off" and "off" in labels]


def compare(blocks: Iterable[Mapping[str, Any]], floor: float = DEFAULT_FLOOR,
            block_cv: float = DEFAULT_BLOCK_CV) -> list[dict[str, Any]]:
    """Every pair's ratios per family and quantity, and its one line."""
    grouped = blocks_by_label(blocks)
    out = []
    for a, b in pairs(grouped):
        ratios: list[Ratio] = []
        for quantity in QUANTITIES:
            for family in FAMILIES:
                if not any(f["us"].get(family) for block in grouped[a] + grouped[b]
                           for f in block):
                    continue                    # absent on both sides (MoE on a dense model)
                va = [_values(block, family, quantity) for block in grouped[a]]
                vb = [_values(block, family, quantity) for block in grouped[b]]
                found = family_interval(va, vb, floor, block_cv)
                if found is not None:
                    got, between, counted = found
                    ratios.append(Ratio(family, quantity, *got[:3], sum(map(len, va)),
                                        sum(map(len, vb)), got[3], counted, between))
        out.append({"a": a, "b": b, "floor": floor, "block_cv": block_cv,
                    "ratios": [r.record() for r in ratios],
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
