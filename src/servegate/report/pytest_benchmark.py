"""Each serving point in pytest-benchmark's saved-JSON format (``pytest_benchmark.json``), so its
``compare`` / ``list`` and dashboards read servegate runs: one benchmark per (mode,
concurrency), its rounds the requests, its ``stats`` per-request E2E latencies in seconds, every
serving metric in ``extra_info`` (shown, never gated)."""

from __future__ import annotations

import datetime as dt
import platform
import statistics
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servegate.core.atomic import write_json
from servegate.core.results import Run
from servegate.judge.baselines import group_points, point_sort_key

if TYPE_CHECKING:
    from servegate.judge.judgement import Judgement

FORMAT_VERSION = "5.1.0"   # the pytest-benchmark JSON layout this mirrors (fields since 3.1)


def _quartiles(data: list[float]) -> tuple[float, float]:
    """pytest-benchmark's own quartile rule (methods 2/3 on Wikipedia's Quartile page)."""
    rounds = len(data)
    if rounds == 1:
        return data[0], data[0]
    if rounds % 2:
        n, q = rounds // 4, rounds % 4
        if q == 1:
            return (0.25 * data[n - 1] + 0.75 * data[n],
                    0.75 * data[3 * n] + 0.25 * data[3 * n + 1])
        return (0.75 * data[n] + 0.25 * data[n + 1],
                0.25 * data[3 * n + 1] + 0.75 * data[3 * n + 2])
    return statistics.median(data[: rounds // 2]), statistics.median(data[rounds // 2:])


def timing_stats(samples: list[float]) -> dict[str, Any]:
    """pytest-benchmark's ``stats`` block for ``samples`` (seconds), same definitions."""
    data = sorted(samples)
    mean = statistics.mean(data)
    stddev = statistics.stdev(data) if len(data) > 1 else 0
    q1, q3 = _quartiles(data)
    iqr = q3 - q1
    if len(data) == 1:
        ld15iqr = hd15iqr = data[0]
    else:
        ld15iqr = data[bisect_left(data, q1 - 1.5 * iqr)]
        hd15iqr = data[bisect_right(data, q3 + 1.5 * iqr) - 1]
    stddev_outliers = sum(1 for v in data if v < mean - stddev or v > mean + stddev)
    iqr_outliers = sum(1 for v in data if v < q1 - 1.5 * iqr or v > q3 + 1.5 * iqr)
    total = sum(data)
    return {
        "min": data[0], "max": data[-1], "mean": mean, "stddev": stddev, "rounds": len(data),
        "median": statistics.median(data), "iqr": iqr, "q1": q1, "q3": q3,
        "iqr_outliers": iqr_outliers, "stddev_outliers": stddev_outliers,
        "outliers": f"{stddev_outliers};{iqr_outliers}", "ld15iqr": ld15iqr,
        "hd15iqr": hd15iqr, "ops": len(data) / total if total else 0, "total": total,
        "data": list(samples), "iterations": 1,
    }


def _benchmark(run: Run, mode: str, conc: int, points: list[dict[str, Any]]) -> dict[str, Any]:
    latencies = [v / 1000.0 for p in points
                 for v in (p.get("requests") or {}).get("e2e_latency_ms", [])]
    names = sorted({k for p in points for k in p.get("metrics", {})})
    mean_metrics = {}
    for name in names:
        vals = [p["metrics"][name] for p in points if isinstance(p["metrics"].get(name),
                                                                 (int, float))]
        if vals:
            mean_metrics[name] = statistics.mean(vals)
    param = f"{mode}-c{conc}"
    suite = run.get("suite", "suite")
    return {
        "group": f"{suite} c{conc}",
        "name": f"serve[{param}]",
        "fullname": f"servegate/{suite}::serve[{param}]",
        "params": {"mode": mode, "concurrency": conc},
        "param": param,
        "extra_info": {
            "unit_of_stats": "per-request end-to-end latency, seconds",
            "metrics": mean_metrics,
            "metrics_per_repeat": [dict(p["metrics"], repeat=p["repeat"]) for p in points],
            "repeats": len(points),
            "aligned_fraction": [(p.get("alignment") or {}).get("aligned_fraction")
                                 for p in points],
            "exact_fill_effective": [p.get("exact_fill_effective") for p in points],
            "runner_class": run.get("runner_class"),
            "model_profile": run.get("model_profile"),
        },
        "options": {"disable_gc": False, "timer": "servegate-client", "min_rounds": 1,
                    "max_time": 0, "min_time": 0, "warmup": False},
        "stats": timing_stats(latencies) if latencies else None,
    }


def build(run: Run) -> dict[str, Any]:
    fingerprint = dict(run.get("fingerprint") or {})
    benchmarks = [_benchmark(run, mode, conc, points)
                  for (mode, conc), points in sorted(group_points(run).items(),
                                                     key=lambda kv: point_sort_key(kv[0]))]
    return {
        "machine_info": {
            "node": fingerprint.get("host", platform.node()),
            "machine": platform.machine(),
            "system": platform.system(),
            "python_version": fingerprint.get("python", platform.python_version()),
            "python_implementation": platform.python_implementation(),
            "servegate_fingerprint": fingerprint,   # GPU identity pytest-benchmark lacks
        },
        "commit_info": {
            "id": fingerprint.get("sglang_commit") or "unknown",
            "project": "sglang",
            "version": fingerprint.get("sglang"),
            "dirty": False,
            "branch": "(unknown)",
            "time": run.get("started_at"),
        },
        "benchmarks": [b for b in benchmarks if b["stats"] is not None],
        "datetime": run.get("finished_at")
        or dt.datetime.now(dt.timezone.utc).isoformat(),
        "version": FORMAT_VERSION,
    }


def write(judgement: Judgement) -> list[Path]:
    """``pytest_benchmark.json`` for a run with points (nothing for a run without)."""
    run = judgement.run
    if run is None or not run.get("points"):
        return []
    path = judgement.run_dir / "pytest_benchmark.json"
    write_json(path, build(run))
    return [path]
