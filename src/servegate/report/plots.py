"""PNG plots (matplotlib, Agg): TTFT and TPOT vs concurrency per mode with the baseline band,
and per-request TTFT CDFs of off vs on (and forced) at each concurrency.

Plots are for people reading a run; every number that decides anything is in verdict.json.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from servegate.core.atomic import write_bytes
from servegate.core.metrics import METRICS
from servegate.core.results import MODES, Run
from servegate.judge.baselines import group_points

if TYPE_CHECKING:
    from servegate.judge.judgement import Judgement

COLOURS = {"off": "tab:blue", "on": "tab:orange", "forced": "tab:green"}


def _save(fig: Any, path: Path) -> Path:
    """Write-then-rename like every other servegate artefact."""
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    finally:
        plt.close(fig)
    write_bytes(path, buffer.getvalue())
    return path


def _vs_concurrency(run: Run, baseline: dict[str, Any] | None, metric: str,
                    path: Path) -> Path:
    groups = group_points(run)
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for mode in MODES:
        concs = sorted(c for (m, c) in groups if m == mode)
        if not concs:
            continue
        colour = COLOURS.get(mode)
        series = [[p["metrics"][metric] for p in groups[(mode, c)] if metric in p["metrics"]]
                  for c in concs]
        keep = [(c, s) for c, s in zip(concs, series, strict=False) if s]
        if keep:
            xs = [c for c, _ in keep]
            means = np.array([np.mean(s) for _, s in keep])
            lows = means - np.array([min(s) for _, s in keep])
            highs = np.array([max(s) for _, s in keep]) - means
            ax.errorbar(xs, means, yerr=[lows, highs], marker="o", capsize=3, color=colour,
                        label=f"{mode} (run)")
        base = [p for p in (baseline or {}).get("points", [])
                if p["mode"] == mode and metric in p["metrics"]]
        if base:
            base.sort(key=lambda p: p["concurrency"])
            bx = [p["concurrency"] for p in base]
            values = np.array([p["metrics"][metric]["value"] for p in base])
            reps = [p["metrics"][metric]["blocks"] for p in base]
            spread = np.array([p["metrics"][metric].get("spread") or 0.0 for p in base])
            low = np.minimum(values - spread, [min(r) for r in reps])
            high = np.maximum(values + spread, [max(r) for r in reps])
            ax.fill_between(bx, low, high, color=colour, alpha=0.15, label=f"{mode} baseline")
            ax.plot(bx, values, linestyle="--", color=colour, alpha=0.6)
    ax.set_xscale("log", base=2)
    ticks = sorted({c for (_, c) in groups})
    ax.set_xticks(ticks, [str(c) for c in ticks])
    ax.set_xlabel("concurrency")
    registered = METRICS.get(metric)
    ax.set_ylabel(f"{registered.label} ({registered.unit})" if registered else metric)
    ax.set_title(f"{run.get('suite', '?')} on {run.get('runner_class', '?')}: {metric}")
    ax.grid(True, alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    return _save(fig, path)


def _ttft_cdfs(run: Run, path: Path) -> Path:
    groups = group_points(run)
    concs = sorted({c for (_, c) in groups})
    fig, axes = plt.subplots(1, max(1, len(concs)), figsize=(4.2 * max(1, len(concs)), 3.6),
                             squeeze=False)
    for ax, conc in zip(axes[0], concs, strict=False):
        for mode in MODES:
            samples = sorted(v for p in groups.get((mode, conc), [])
                             for v in (p.get("requests") or {}).get("ttft_ms", []))
            if samples:
                ys = np.arange(1, len(samples) + 1) / len(samples)
                ax.step(samples, ys, where="post", color=COLOURS.get(mode),
                        label=f"{mode} (n={len(samples)})")
        ax.set_title(f"TTFT CDF, concurrency {conc}")
        ax.set_xlabel("TTFT (ms)")
        ax.set_ylabel("fraction of requests")
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    return _save(fig, path)


def write(judgement: Judgement) -> list[Path]:
    """Write ``plots/<metric>_vs_concurrency.png`` for every gated metric and
    ``plots/ttft_cdf.png`` for a run with points; returns their paths."""
    run, run_dir, baseline, config = (judgement.run, judgement.run_dir, judgement.baseline,
                                      judgement.config)
    if run is None or not run.get("points"):
        return []
    names = {name for p in run.get("points", []) for name in p.get("metrics", {})}
    out = Path(run_dir) / "plots"
    # One plot per gated metric the run has (the metric registry gives unit and label).
    plotted = [m for m in dict.fromkeys(config.metrics) if m in names]
    return ([_vs_concurrency(run, baseline, m, out / f"{m}_vs_concurrency.png") for m in plotted]
            + [_ttft_cdfs(run, out / "ttft_cdf.png")])
