"""Hand-built judgements for the report tests: real Check and Interval objects, no judge run.

``cpu_like`` is the shape of a ``cpu`` suite run after the judge's primary family: 30 checks, 8
of them gated (6 baseline aggregates, the no-op's prefill test, one accuracy check), the rest
reported with their intervals.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from servegate.config.judge import JudgeConfig
from servegate.judge.checks import Check
from servegate.judge.judgement import Judgement
from servegate.judge.stats import Interval

ROUTINE = ["judge settings from suites/cpu.toml", "judge seed 7 (suite seed mixed with run r)",
           "gated family of 8 checks (Holm step-down, family-wise 95%, suite [judge] family = "
           "['claims', 'baseline-aggregate']); 22 more reported at 95%, not gating"]

RUN_FP = {"runner_class": "cpu", "host": "ci-7", "cpu_model": "Intel Xeon Gold 6338",
          "cpu_count": 4, "gpu_name": "none (CPU: x86_64, 4 cores)", "sglang": "0.5.24",
          "torch": "2.14.1+cu130", "python": "3.11.7", "model": "m"}
BASE_FP = {**RUN_FP, "host": "vm", "cpu_model": "AMD EPYC", "sglang": "0.5.23",
           "python": "3.11.9"}


def repeats_ratio(est: float, low: float, high: float) -> Interval:
    """A ratio from 3 repeats per side at 99 %: the intervals of :func:`seven_verdicts`."""
    return Interval(est, low, high, 0.99, "repeats", 3, 3)


def seven_verdicts(run_dir: Path) -> Judgement:
    """One check of every verdict and kind the writers render (6 gated, 1 experiment), with
    two regressions and an infra error: exit 1, a family of 6."""
    run_dir.mkdir(parents=True, exist_ok=True)
    iv = repeats_ratio
    checks = [
        Check("baseline", "a pass", "mean_ttft_ms", "pass", mode="off", concurrency=4,
              interval=iv(1.0, 0.98, 1.02), floor=0.05),
        Check("baseline", "a regression", "mean_ttft_ms", "regression", mode="on",
              concurrency=4, interval=iv(1.2, 1.15, 1.25), floor=0.05),
        Check("baseline", "another regression", "output_throughput", "regression", mode="on",
              concurrency=8, interval=iv(0.8, 0.75, 0.85), floor=0.05),
        Check("baseline", "an inconclusive", "median_tpot_ms", "inconclusive", mode="off",
              concurrency=8, interval=iv(1.03, 0.9, 1.2), floor=0.05),
        Check("integrity", "an infra error", "points", "error", mode="on", concurrency=16,
              reason="point missing"),
        Check("experiment", "an experiment", "mean_ttft_ms", "regression", gate=False,
              mode="forced", concurrency=4, reference="off", interval=iv(1.1, 1.06, 1.14),
              floor=0.05),
        Check("baseline", "an improvement", "mean_ttft_ms", "improvement", mode="off",
              concurrency=16, interval=iv(0.8, 0.78, 0.82), floor=0.05),
    ]
    return Judgement(run_dir, None, JudgeConfig(), checks, family_size=6,
                     per_check_confidence=0.99)


def ratio(est: float, low: float, high: float, *, se: float | None = None, df: float = math.inf,
          run_var: float = 0.0, n: int = 12, starts: int | None = 1,
          method: str = "blocks (1x12 vs 1x12 starts x blocks, trimmed 20%)",
          confidence: float = 0.99) -> Interval:
    return Interval(est, low, high, confidence, method, n, n, se=se, df=df, run_var=run_var,
                    n_starts=starts)


def difference(est: float, low: float, high: float, *, se: float | None = 0.02,
               n: int = 100) -> Interval:
    return Interval(est, low, high, 0.99, "paired (Agresti-Min)", n, n, scale="difference",
                    se=se)


def check(name: str, verdict: str, *, metric: str = "mean_ttft_ms", kind: str = "baseline",
          mode: str | None = "off", concurrency: int | None = 4,
          interval: Interval | None = None, floor: float | None = 0.05, gate: bool = True,
          primary: bool = True, reason: str = "", reference: str = "baseline") -> Check:
    return Check(kind, name, metric, verdict, gate=gate, mode=mode,  # type: ignore[arg-type]
                 concurrency=concurrency, interval=interval, floor=floor, reason=reason,
                 primary=primary, reference=reference)


def judgement(run_dir: Path, checks: list[Check], *, family: dict[str, Any] | None = None,
              notes: list[str] | None = None, run: dict[str, Any] | None = None,
              baseline: dict[str, Any] | None = None, strict: bool = False,
              family_size: int | None = None) -> Judgement:
    run_dir.mkdir(parents=True, exist_ok=True)
    size = sum(1 for c in checks if c.gate and c.primary) if family_size is None else family_size
    return Judgement(run_dir, run, JudgeConfig(), checks,  # type: ignore[arg-type]
                     baseline_file=None if baseline is None else run_dir / "baseline.json",
                     baseline=baseline, family_size=size,
                     per_check_confidence=1 - 0.05 / max(1, size), notes=list(notes or []),
                     strict=strict, family=family or {})


def undecided(name: str, est: float = 1.05, *, metric: str = "mean_ttft_ms",
              run_var: float = 0.008, primary: bool = True, mode: str = "off",
              concurrency: int = 4) -> Check:
    """An inconclusive ratio whose guidance asks for server starts (prompts cannot decide)."""
    return check(name, "inconclusive", metric=metric, mode=mode, concurrency=concurrency,
                 interval=ratio(est, est * 0.75, est * 1.35, se=0.1, df=20, run_var=run_var),
                 floor=0.1, gate=primary, primary=primary)


def cpu_like(run_dir: Path, *, run: dict[str, Any] | None = None,
             baseline: dict[str, Any] | None = None, notes: list[str] | None = None) -> Judgement:
    """30 checks, 8 primary (gated), the rest reported."""
    primary = [undecided(f"{mode} {metric} aggregate vs baseline", 1.02 + i / 100,
                         metric=metric, run_var=0.008 if i else 0.001, mode=mode)
               for i, (mode, metric) in enumerate(
                   (m, x) for m in ("off", "on", "forced")
                   for x in ("mean_ttft_ms", "median_tpot_ms"))]
    primary[1] = check("off median_tpot_ms aggregate vs baseline", "pass",
                       metric="median_tpot_ms", interval=ratio(0.99, 0.96, 1.02, se=0.01),
                       floor=0.1)
    primary.append(check("no-op: on@c4 prefill batches not aligned beyond off", "pass",
                         kind="claim", metric="aligned_fraction", mode="on", interval=None,
                         floor=None, reason="aligned on 0/3 vs off 0/3 saturated batches "
                                            "(one-sided Fisher p=1); batch sequences identical"))
    primary.append(check("off GSM8K accuracy vs baseline", "inconclusive", kind="accuracy",
                         metric="accuracy", concurrency=None,
                         interval=difference(0.0, -0.08, 0.08, se=0.03), floor=0.02))
    reported = []
    for i in range(22):
        mode, conc = ("off", "on", "forced")[i % 3], (2, 4)[i // 3 % 2]
        metric = ("mean_ttft_ms", "median_tpot_ms", "mean_e2e_latency_ms", "p99_ttft_ms")[i % 4]
        name = f"{mode}@c{conc} {metric} vs baseline #{i}"
        if i == 0:
            reported.append(check(name, "regression", metric=metric, mode=mode,
                                  concurrency=conc, interval=ratio(1.4, 1.2, 1.6, se=0.05),
                                  floor=0.1, gate=False, primary=False))
        elif i == 1:
            reported.append(check(name, "improvement", metric=metric, mode=mode,
                                  concurrency=conc, interval=ratio(0.7, 0.6, 0.8, se=0.05),
                                  floor=0.1, gate=False, primary=False))
        elif i < 4:
            reported.append(check(name, "pass", metric=metric, mode=mode, concurrency=conc,
                                  interval=ratio(1.0, 0.97, 1.03, se=0.01), floor=0.1,
                                  gate=False, primary=False))
        else:
            reported.append(undecided(name, metric=metric, primary=False, mode=mode,
                                      concurrency=conc))
    checks = primary + reported
    fam = {"method": "holm", "size": 8, "checks": [c.name for c in primary]}
    return judgement(run_dir, checks, family=fam, run=run, baseline=baseline,
                     notes=ROUTINE + list(notes or []))
