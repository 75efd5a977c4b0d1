"""The kernel attribution beside the verdict (reported, never gating): ``attribution.json``
(the per-family table per mode and every comparison with its interval), a plot of time per
family per mode, and the lines the terminal and summary.md show (:func:`lines`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from servegate.attribution.families import FAMILIES, label
from servegate.attribution.ratios import compare
from servegate.attribution.record import label as block_label
from servegate.attribution.record import table
from servegate.config.profiling import DEFAULT_BLOCK_CV, DEFAULT_FLOOR
from servegate.core.atomic import write_json
from servegate.core.results import Run

if TYPE_CHECKING:
    from servegate.judge.judgement import Judgement

TITLE = "attribution (kernel time per forward by family; reported, never gating)"


def comparisons(run: Run | None) -> list[dict[str, Any]]:
    """Every comparison of the run's profiled blocks (none without ``profile``)."""
    profile = (run or {}).get("profile") or {}
    blocks = profile.get("blocks") or []
    if not blocks:
        return []
    return compare(blocks, float(profile.get("floor", DEFAULT_FLOOR)),
                   float(profile.get("block_cv", DEFAULT_BLOCK_CV)))


def lines(run: Run | None) -> list[str]:
    """The title, one line per comparison and one per failed profiled block (nothing without
    profiling)."""
    profile = (run or {}).get("profile") or {}
    failed = [f"  profiled block {block_label(str(e.get('arm', '')), str(e.get('mode')))} "
              f"s{e.get('start')} failed: {e.get('error')}" for e in profile.get("errors", [])]
    found = comparisons(run)
    if not found:
        if profile.get("blocks") or failed:
            return [f"{TITLE}: nothing to compare (one mode, no off, or failed blocks)",
                    *failed]
        return []
    return [f"{TITLE}:"] + [f"  {c['line']}" for c in found] + failed


def _plot(tab: dict[str, Any], path: Path) -> Path | None:
    """Stacked bars: mean kernel time per prefill forward and per decode forward, by family."""
    from servegate.report.plots import _save, plt

    keys = list(tab)
    if not keys:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for ax, quantity, title in ((axes[0], "per_prefill_forward_us", "per prefill forward"),
                                (axes[1], "per_decode_forward_us", "per decode forward")):
        bottom = [0.0] * len(keys)
        for family in FAMILIES:
            values = [(tab[k]["families"][family][quantity] or 0.0) / 1000.0 for k in keys]
            if not any(values):
                continue
            ax.bar(keys, values, bottom=bottom, label=label(family))
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.set_title(f"kernel time {title}")
        ax.set_ylabel("ms")
    axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return _save(fig, path)


def write(judgement: Judgement) -> list[Path]:
    """``attribution.json`` and ``plots/kernel_families.png`` for a run with profiled blocks."""
    run = judgement.run
    blocks = ((run or {}).get("profile") or {}).get("blocks") or []
    if not blocks:
        return []
    tab = table(blocks)
    path = judgement.run_dir / "attribution.json"
    write_json(path, {"gating": False, "table": tab, "comparisons": comparisons(run),
                      "other_names": {f"{b.get('arm', '')}-{b['mode']}-s{b.get('start')}":
                                      b.get("other_names", {}) for b in blocks}})
    written = [path]
    plot = _plot(tab, judgement.run_dir / "plots" / "kernel_families.png")
    if plot is not None:
        written.append(plot)
    return written
