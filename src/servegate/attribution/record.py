"""run.json's ``profile``: the profiled blocks, reduced and stored compactly, and the table of
kernel time per forward by family that every reader (compare, the plot) starts from (the layout:
docs/serve.md, Profiled blocks). The table is per ``arm-mode`` and per prefill batch size too,
so M-aligned and unaligned batches are told apart.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from servegate.attribution.families import FAMILIES
from servegate.attribution.trace import Reduced

OTHER_NAMES_KEPT = 20


def block_record(reduced: Reduced, *, arm: str, mode: str, start: int | None,
                 seconds: float, trace: str | None = None) -> dict[str, Any]:
    """One profiled block as run.json keeps it."""
    names = sorted(reduced.other_names.items(), key=lambda kv: -kv[1])[:OTHER_NAMES_KEPT]
    out: dict[str, Any] = {"arm": arm, "mode": mode, "start": start, "device": reduced.device,
                           "forwards": [f.record() for f in reduced.forwards],
                           "other_names": {k: round(v, 1) for k, v in names},
                           "seconds": round(seconds, 3)}
    if reduced.unlinked_us:
        out["unlinked_us"] = round(reduced.unlinked_us, 1)
    if trace:
        out["trace"] = trace
    return out


def label(arm: str, mode: str) -> str:
    """The table's key for a tree's mode (``head-forced``; ``forced`` without trees)."""
    return f"{arm}-{mode}" if arm else mode


def blocks_by_label(blocks: Iterable[Mapping[str, Any]]) -> dict[str, list[list[dict[str, Any]]]]:
    """Each tree's mode's profiled blocks (one per server start), each as its list of forwards:
    the attribution's between-block spread is read from these."""
    out: dict[str, list[list[dict[str, Any]]]] = defaultdict(list)
    for block in blocks:
        out[label(str(block.get("arm", "")), str(block["mode"]))].append(list(block["forwards"]))
    return dict(out)


def forwards_by_label(blocks: Iterable[Mapping[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Every profiled forward of each tree's mode, pooled over server starts."""
    return {key: [f for forwards in grouped for f in forwards]
            for key, grouped in blocks_by_label(blocks).items()}


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 1) if values else None


def table(blocks: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Per tree's mode: mean family time (us) per prefill forward, per prefill token, per
    decode forward, and per prefill batch size."""
    out: dict[str, Any] = {}
    for key, forwards in forwards_by_label(blocks).items():
        prefill = [f for f in forwards if f["kind"] == "prefill"]
        decode = [f for f in forwards if f["kind"] == "decode"]
        row: dict[str, Any] = {"prefill_forwards": len(prefill),
                               "decode_forwards": len(decode), "families": {}}
        for family in FAMILIES:
            per_token = [f["us"].get(family, 0.0) / f["tokens"] for f in prefill
                         if f.get("tokens")]
            row["families"][family] = {
                "per_prefill_forward_us": _mean([f["us"].get(family, 0.0) for f in prefill]),
                "per_prefill_token_us": _mean(per_token),
                "per_decode_forward_us": _mean([f["us"].get(family, 0.0) for f in decode])}
        sizes: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for f in prefill:
            if f.get("tokens"):
                sizes[int(f["tokens"])].append(f)
        row["by_prefill_tokens"] = {
            str(tokens): {"forwards": len(group),
                          "us": {family: _mean([f["us"].get(family, 0.0) for f in group])
                                 for family in FAMILIES}}
            for tokens, group in sorted(sizes.items())}
        out[key] = row
    return out
