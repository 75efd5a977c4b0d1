"""PNG per (runner, model, suite, metric): nights on x, one line per point, change points marked
(docs/history.md, Plots). Every (mode, concurrency) shares the nights axis, so a step that hits
all points and one that hits one mode look different at a glance."""

from __future__ import annotations

import io
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from servegate.core.atomic import write_bytes
from servegate.history.load import series_changes
from servegate.history.report import SeriesReport, change_point_json
from servegate.history.svg import short_commit

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def plot_name(runner: str, model: str, suite: str, metric: str) -> str:
    return "__".join(_UNSAFE.sub("_", part) for part in (runner, model, suite, metric)) + ".png"


def write_plots(reports: Sequence[SeriesReport], out_dir: Path) -> list[Path]:
    """One PNG per (runner, model, suite, metric); returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups: dict[tuple[str, str, str, str], list[SeriesReport]] = defaultdict(list)
    for report in reports:
        runner, model, suite, _mode, _conc, metric = report.key
        groups[(runner, model, suite, metric)].append(report)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for (runner, model, suite, metric), members in groups.items():
        # a shared nights axis: every run of this runner/model/suite, in time order
        axis = sorted({(n.time, n.run_id) for r in members for n in r.nights})
        position = {run_id: i for i, (_, run_id) in enumerate(axis)}
        fig, ax = plt.subplots(figsize=(max(6.0, min(16.0, 0.25 * len(axis) + 4)), 4.2))
        marked: set[tuple[int, str]] = set()
        for report in members:
            mode, conc = report.key[3], report.key[4]
            xs = [position[n.run_id] for n in report.nights]
            means = [float(np.mean(n.values)) for n in report.nights]
            label = mode if conc is None else f"{mode}@c{conc}"
            line, = ax.plot(xs, means, marker="o", markersize=3, linewidth=1, label=label)
            for x, night in zip(xs, report.nights, strict=True):
                if len(night.values) > 1:
                    ax.scatter([x] * len(night.values), night.values, s=6, alpha=0.35,
                               color=line.get_color())
            for index in series_changes(report.nights):     # another load from this night
                ax.axvline(xs[index] - 0.5, color="purple", linewidth=1.5, alpha=0.6)
            for index in report.detection.transients:
                ax.scatter([xs[index]], [means[index]], marker="x", s=60, color="black")
            for cp in change_point_json(report):
                x = xs[cp["index"]] - 0.5
                commits = f"{short_commit(cp['sglang_commits'][0])}..{short_commit(cp['sglang_commits'][1])}"
                style = "--" if cp["status"] == "confirmed" else ":"
                ax.axvline(x, color=line.get_color(), linestyle=style, linewidth=1.2)
                if (round(x * 2), commits) not in marked:
                    marked.add((round(x * 2), commits))
                    ax.annotate(f"{cp['status']} x{cp['ratio']:.3f}\nsglang {commits}",
                                (x, 1.0), xycoords=("data", "axes fraction"), rotation=90,
                                fontsize=7, ha="right", va="top")
        ticks = list(range(0, len(axis), max(1, len(axis) // 10)))
        ax.set_xticks(ticks)
        ax.set_xticklabels([axis[i][0][5:16].replace("T", " ") for i in ticks], rotation=30, ha="right",
                           fontsize=7)
        ax.set_xlabel("night (run start, UTC)")
        ax.set_ylabel(metric)
        ax.set_title(f"{runner} / {model} / {suite}: {metric}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        path = out_dir / plot_name(runner, model, suite, metric)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=110)
        plt.close(fig)
        write_bytes(path, buffer.getvalue())
        written.append(path)
    return written
