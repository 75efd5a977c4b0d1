"""summary.md: one table per concurrency, a row per mode and block (start, block within it),
for a human reviewer."""

from __future__ import annotations

from typing import Any

from servegate.core.results import MODES, Point, Run, point_slot


def _f(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _label(point: Point) -> str:
    """``off``, or ``head-off`` / ``base-off`` in a head-vs-base run (the tree first)."""
    arm = point.get("arm")
    return f"{arm}-{point['mode']}" if arm else point["mode"]


def _seconds(entries: Any) -> float:
    return sum(float(e.get("seconds", 0.0)) for e in entries or [] if isinstance(e, dict))


def time_line(run: Run) -> str | None:
    """One line of where the run's time went (run.json ``timings``); None for older runs."""
    timings = run.get("timings")
    if not isinstance(timings, dict):
        return None
    starts = timings.get("server_starts") or []
    total = timings.get("total_seconds")
    return (f"- time: {len(starts)} server start{'' if len(starts) == 1 else 's'} "
            f"({_seconds(starts):.0f} s), blocks {_seconds(timings.get('blocks')):.0f} s, "
            f"warm-ups {_seconds(timings.get('warmups')):.0f} s, switches "
            f"{_seconds(timings.get('switches')):.0f} s, GSM8K "
            f"{_seconds(timings.get('gsm8k')):.0f} s, total "
            f"{'–' if total is None else f'{float(total):.0f} s'}")


def render(run: Run) -> str:
    points: list[Point] = list(run.get("points", []))
    lines = [f"# servegate bench: suite `{run.get('suite')}` on `{run.get('runner_class')}`", ""]
    fp = run.get("fingerprint", {})
    lines.append(f"- model: `{fp.get('model', run.get('model_profile'))}`; sglang "
                 f"{fp.get('sglang', '?')}; torch {fp.get('torch', '?')}; host "
                 f"`{fp.get('host', '?')}`")
    lines.append(f"- chunked prefill size {run.get('chunk_size')}, page size "
                 f"{run.get('page_size')}; started {run.get('started_at')}")
    status = "complete" if run.get("complete") else f"INCOMPLETE ({run.get('error', 'running')})"
    lines.append(f"- status: **{status}**, {len(points)} points")
    time_text = time_line(run)
    lines += [time_text, ""] if time_text else [""]
    for conc in sorted({p["concurrency"] for p in points}):
        lines += [f"## concurrency {conc}", "",
                  "| mode | start | block | TTFT mean ms | TTFT median ms | TTFT p99 ms | TPOT median ms "
                  "| ITL median ms | output tok/s | aligned | saturated | min saturated | "
                  "exact fill |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        # one arm default for every point (single-tree runs have none): any default sorts alike
        for p in sorted((p for p in points if p["concurrency"] == conc),
                        key=lambda p: (p.get("arm", ""),  # pragma: no mutate
                                       MODES.index(p["mode"]), point_slot(p))):
            m, a = p["metrics"], p["alignment"]
            aligned = f"{a['aligned_fraction']:.0%}" if a["saturated_batches"] else "n/a"
            lines.append(
                f"| {_label(p)} | {point_slot(p)[0]} | {point_slot(p)[1]} | "
                f"{_f(m.get('mean_ttft_ms'))} | "
                f"{_f(m.get('median_ttft_ms'))} | {_f(m.get('p99_ttft_ms'))} | "
                f"{_f(m.get('median_tpot_ms'), 2)} | {_f(m.get('median_itl_ms'), 2)} | "
                f"{_f(m.get('output_throughput'))} | {aligned} | {a['saturated_batches']} | "
                f"{a['min_saturated_tokens']} | "
                f"{'yes' if p['exact_fill_effective'] else 'no'} |")
        lines.append("")
    lines += ["`aligned`: share of saturated prefill batches (prefill work left over, i.e. cut "
              "by the budget) that are exactly the chunk size; warm-up and health-check batches "
              "excluded. `exact fill`: read back from the server (hook line and gate value).", ""]
    return "\n".join(lines)
