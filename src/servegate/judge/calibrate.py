"""``servegate calibrate``: simulate nights through the judge's own decision code, per suite design.

Why: a gate is only as good as its false-alarm rate at the sample sizes CI affords, and that
rate depends on repeats, prompts, the number of checks, floors and margins together. This
command measures it. Per design (a suite's repeats, concurrencies, prompts per concurrency,
GSM8K questions and ``[judge]`` table) and per true run-to-run CV it draws seeded nights and
reports the family-wise A/A false-alarm rate per night (with its Clopper-Pearson interval), the
no-op claim's false-failure rate and the power against TTFT slowdowns.

What is real and what is simulated: the family (which checks exist, their floors, margins,
methods and Bonferroni level) comes from :func:`baseline_pendings` and :func:`claim_pendings`
evaluated on a synthetic run of the design; each check is then decided for all nights at once
by the judge's own vectorised kernels (:func:`servegate.judge.arms.compare_arms`,
:func:`~servegate.judge.stats.classify`, the TOST power rule, the paired accuracy interval), the
same functions ``servegate compare`` calls for one night. Simulated: per-request lognormal TTFT
and TPOT (CVs from the stored CPU baseline for the cpu design, else 30 % / 10 %), E2E = TTFT +
TPOT x (output - 1), one lognormal run-to-run factor per server start (mode x repeat, shared
by every concurrency), and GSM8K outcomes at 93 % with 4 % of questions flaky between sittings.
The judged runner is one where exact fill is gated off, so the no-op claims are in the family.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps

from servegate.accuracy.paired import agresti_min
from servegate.config import ConfigError, load_suite, suite_path
from servegate.config.judge import JudgeConfig
from servegate.core.metrics import METRICS, direction, statistic_fn
from servegate.core.paths import BASELINES_DIR
from servegate.core.runner_classes import REGISTRY
from servegate.judge import calibrate_blocks as blocks
from servegate.judge.arms import ArmStats, NotJudgeable, compare_arms
from servegate.judge.baselines import baseline_from_run
from servegate.judge.claims import claim_pendings
from servegate.judge.compare import baseline_pendings
from servegate.judge.stats import (
    classify,
    classify_equivalence,
    log_bounds,
    log_se_within,
    per_check_confidence,
    t_quantile,
    tost_confidence,
    tost_power,
)

DEFAULT_SUITES = ("cpu", "premerge", "nightly")
DEFAULT_RUN_CVS = (0.01, 0.02, 0.04)
DEFAULT_BLOCK_CVS = (0.01,)        # GPU block-to-block CV inside a start: an assumption
CPU_BLOCK_CV = 0.065               # measured on this 2-core VM (4 starts x 6 blocks)
POWER_AT = (0.05, 0.10)
SLOWDOWN_GRID = (0.05, 0.10, 0.15, 0.20, 0.30, 0.50, 1.00)
ACCURACY, FLAKY = 0.93, 0.04
TTFT_MS, TPOT_MS = 1000.0, 50.0


@dataclass(frozen=True)
class Design:
    """What one suite runs, as the judge sees it."""

    suite: str
    repeats: int
    concurrencies: tuple[int, ...]
    num_prompts: tuple[int, ...]
    output_len: int
    questions: int
    config: JudgeConfig
    runner_class: str
    ttft_cv: float = 0.30
    tpot_cv: float = 0.10
    cv_source: str = "issue 11 (TTFT 30 %, TPOT 10 %)"
    modes: tuple[str, ...] = ("off", "on")


@dataclass(frozen=True)
class Spec:
    """One check of the family, as the vectorised simulation decides it."""

    kind: str                       # baseline | accuracy | noop | other (never fires here)
    metric: str
    mode: str | None
    concurrency: int | None
    floor: float


@dataclass
class Tally:
    aa_alarm: int = 0
    noop_fail: int = 0
    noop_gating: int = 0
    caught: dict[float, int] = field(default_factory=dict)


def _stored_request_cvs(model: str, suite: str) -> tuple[float, float] | None:
    """Per-request log-sd of TTFT and TPOT from a stored real baseline (its points averaged)."""
    path = BASELINES_DIR / "cpu" / model / f"{suite}.json"
    if not path.is_file():
        return None
    doc = json.loads(path.read_bytes())               # JSON is UTF-8: json detects it
    sds: dict[str, list[float]] = {"ttft_ms": [], "tpot_ms": []}
    for point in doc.get("points", []):
        for key, out in sds.items():
            values = [v for v in (point.get("requests") or {}).get(key, []) if v > 0]
            if len(values) >= 3:
                out.append(float(np.std(np.log(values), ddof=1)))
    if not sds["ttft_ms"] or not sds["tpot_ms"]:
        return None
    return float(np.mean(sds["ttft_ms"])), float(np.mean(sds["tpot_ms"]))


def design_for(name: str) -> Design:
    """The design of ``suites/<name>.toml`` (judged on a runner where exact fill is off)."""
    suite = load_suite(suite_path(name))
    classes = [c for c in suite.runner_classes() if c in REGISTRY and not REGISTRY[c].gated]
    runner = classes[0] if classes else "mi300x"
    questions = blocks.suite_questions(suite)
    modes = tuple(m for m in ("off", "on") if m in suite.modes)
    design = Design(name, suite.repeats, tuple(suite.load.concurrency),
                    tuple(suite.load.num_prompts), suite.load.output_len, questions, suite.judge,
                    runner, modes=modes)
    if runner == "cpu":
        cvs = _stored_request_cvs(suite.model.name, name)
        if cvs is not None:
            return Design(**{**design.__dict__, "ttft_cv": cvs[0], "tpot_cv": cvs[1],
                             "cv_source": f"stored CPU baseline baselines/cpu/{suite.model.name}/"
                                          f"{name}.json (log-sd per point, averaged)"})
    return design


# ------------------------------------------------------------------------------ the family

def _skeleton_run(design: Design) -> dict[str, Any]:
    points = []
    for repeat in range(design.repeats):
        for conc, n in zip(design.concurrencies, design.num_prompts, strict=True):
            for mode in design.modes:
                metrics = {m: 1.0 + 0.01 * repeat for m in design.config.metrics}
                requests = {q: [1.0, 1.1, 0.9] for q in ("ttft_ms", "tpot_ms", "e2e_latency_ms")}
                points.append({"mode": mode, "concurrency": conc, "repeat": repeat,
                               "metrics": metrics, "requests": requests,
                               "alignment": {"prefill_tokens": [256, 236]},
                               "exact_fill_effective": False, "n": n})
    run: dict[str, Any] = {"suite": design.suite, "runner_class": design.runner_class,
                           "model_profile": "calibrate", "complete": True, "points": points,
                           "fingerprint": {"runner_class": design.runner_class}}
    if design.questions:
        run["accuracy"] = {m: {"n": design.questions, "correct": design.questions // 2}
                           for m in design.modes}
    return run


def family(design: Design) -> tuple[list[Spec], float]:
    """The design's counted checks, from the judge's own pending lists, and the per-check
    confidence Bonferroni gives them."""
    run = _skeleton_run(design)
    label = Path("<calibrate>")  # pragma: no mutate (a name only: no check of the family reads it)
    baseline = baseline_from_run(run, label)   # type: ignore[arg-type]
    pendings = baseline_pendings(run, baseline, design.config)  # type: ignore[arg-type]
    pendings += claim_pendings(run, design.config)               # type: ignore[arg-type]
    counted = [p for p in pendings if p.counts]
    confidence = per_check_confidence(design.config.confidence, len(counted))
    specs = []
    for pending in counted:
        check = pending.evaluate(confidence)
        if check.kind == "baseline":
            kind = "baseline"
        elif check.kind == "accuracy":
            kind = "accuracy"
        elif check.kind == "claim" and check.metric == "aligned_fraction":
            # the no-op's prefill-batch test: counted in the family (it lowers every other
            # check's level) but not simulated - a one-sided Fisher exact test has a false-alarm
            # rate <= its alpha by construction (conservative on discrete counts)
            kind = "prefill"
        elif check.kind == "claim" and check.name.startswith("no-op:"):
            kind = "noop"
        else:
            kind = "other"
        specs.append(Spec(kind, check.metric, check.mode, check.concurrency,
                          float(check.floor or 0.0)))
    return specs, confidence


# ------------------------------------------------------------------------------ simulation

def _draw(rng: np.random.Generator, design: Design, nights: int, run_cv: float
          ) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]:
    """One run per night: (TTFT, TPOT) arrays (nights, repeats, prompts) per (mode, conc)."""
    out = {}
    for mode in design.modes:
        server = np.exp(rng.normal(0.0, run_cv, (nights, design.repeats, 1)))
        for conc, n in zip(design.concurrencies, design.num_prompts, strict=True):
            shape = (nights, design.repeats, n)
            st, sp = design.ttft_cv, design.tpot_cv
            ttft = TTFT_MS * server * np.exp(rng.normal(-st * st / 2, st, shape))
            tpot = TPOT_MS * server * np.exp(rng.normal(-sp * sp / 2, sp, shape))
            out[(mode, conc)] = (ttft, tpot)
    return out


def _arm(ttft: np.ndarray, tpot: np.ndarray, metric: str, design: Design,
         conc: int) -> ArmStats:
    """ArmStats for every night at once, computed the way bench and the judge compute them."""
    e2e = ttft + tpot * (design.output_len - 1)
    registered = METRICS[metric]
    nights, repeats, n = ttft.shape
    if registered.quantity is not None and registered.statistic is not None:
        samples = {"ttft_ms": ttft, "tpot_ms": tpot, "e2e_latency_ms": e2e}[registered.quantity]
        func = statistic_fn(registered.statistic)
        pooled = samples.reshape(nights, repeats * n)
        return ArmStats(func(samples), func(pooled),
                        log_se_within(pooled, registered.statistic), repeats * n)
    if "throughput" in metric:              # tokens (or requests) per second of the point
        per = design.output_len if "output" in metric or "total" in metric else 1
        return ArmStats(per * n / (e2e.sum(axis=-1) / conc / 1000.0))
    if metric.endswith("_itl_ms"):          # the client's ITL summary: no per-request samples
        stat = registered.name.split("_")[0]
        return ArmStats(statistic_fn(stat)(tpot))
    raise ValueError(f"calibrate: no simulation for metric {metric!r}")


def _codes_ratio(cur: ArmStats, ref: ArmStats, config: JudgeConfig, paired: bool
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(theta, se, df) for every night; NaN where the judge would say not judgeable."""
    try:
        comp = compare_arms(cur, ref, config=config, paired=paired)
    except NotJudgeable:
        nan = np.full(len(cur.values), np.nan)         # values: (nights, repeats)
        return nan, nan, nan
    return comp.theta, comp.se, comp.df


def _accuracy_codes(rng: np.random.Generator, nights: int, questions: int, floor: float,
                    confidence: float) -> np.ndarray:
    """The gate's paired accuracy test (Agresti-Min at the family level) on simulated nights."""
    shared = rng.random((nights, questions)) < ACCURACY
    flaky = rng.random((nights, questions)) < FLAKY
    base = np.where(flaky, rng.random((nights, questions)) < 0.5, shared)
    cur = np.where(flaky, rng.random((nights, questions)) < 0.5, shared)
    a_only = (cur & ~base).sum(axis=1)
    b_only = (base & ~cur).sum(axis=1)
    diff, se = agresti_min(a_only, b_only, questions)
    q = float(t_quantile(confidence, math.inf))
    return classify(diff - q * se, diff + q * se, floor, "higher")


def _judge_batch(design: Design, specs: list[Spec], confidence: float, current: dict,
                 baseline: dict, rng: np.random.Generator, nights: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(any gating regression, any gating no-op regression, any no-op gating) per night.

    ``rng`` draws the accuracy nights of the ``accuracy`` specs (a design with questions)."""
    config = design.config
    alarm = np.zeros(nights, dtype=bool)
    noop_fail = np.zeros(nights, dtype=bool)
    noop_gating = np.zeros(nights, dtype=bool)
    cache: dict[tuple[int, str, int, str], ArmStats] = {}

    def arm(run: dict, mode: str, conc: int, metric: str) -> ArmStats:
        key = (id(run), mode, conc, metric)       # run: ``current`` or ``baseline``, both alive
        if key not in cache:
            ttft, tpot = run[(mode, conc)]
            cache[key] = _arm(ttft, tpot, metric, design, conc)
        return cache[key]

    for spec in specs:
        if spec.kind == "baseline":
            assert spec.mode is not None and spec.concurrency is not None
            theta, se, df = _codes_ratio(arm(current, spec.mode, spec.concurrency, spec.metric),
                                         arm(baseline, spec.mode, spec.concurrency, spec.metric),
                                         config, False)
            low, high = log_bounds(theta, se, df, confidence)
            codes = classify(np.expm1(low), np.expm1(high), spec.floor, direction(spec.metric))
            alarm |= codes == 1
        elif spec.kind == "noop":
            assert spec.concurrency is not None
            level = tost_confidence(confidence)
            theta, se, df = _codes_ratio(arm(current, "on", spec.concurrency, spec.metric),
                                         arm(current, "off", spec.concurrency, spec.metric),
                                         config, True)
            low, high = log_bounds(theta, se, df, level)
            codes = classify_equivalence(np.expm1(low), np.expm1(high), spec.floor)
            gating = np.nan_to_num(tost_power(se, df, level, spec.floor)) >= \
                config.noop_min_power
            noop_gating |= gating
            failed = (codes == 1) & gating
            noop_fail |= failed
            alarm |= failed
        elif spec.kind == "accuracy":           # in the family only when the design has questions
            alarm |= _accuracy_codes(rng, nights, design.questions, spec.floor, confidence) == 1
    return alarm, noop_fail, noop_gating


def calibrate(design: Design, run_cv: float, *, nights: int, seed: int, batch: int = 200,
              slowdowns: Sequence[float] = SLOWDOWN_GRID) -> dict[str, Any]:
    """Simulate ``nights`` A/A nights and slowed nights of ``design`` at true ``run_cv``."""
    specs, confidence = family(design)
    tally = Tally(caught={s: 0 for s in slowdowns})
    rng = np.random.default_rng([seed, int(run_cv * 1e6), len(design.suite)])
    done = 0
    while done < nights:
        size = min(batch, nights - done)
        baseline = _draw(rng, design, size, run_cv)
        current = _draw(rng, design, size, run_cv)
        alarm, noop_fail, noop_gating = _judge_batch(design, specs, confidence, current,
                                                     baseline, rng, size)
        tally.aa_alarm += int(alarm.sum())
        tally.noop_fail += int(noop_fail.sum())
        tally.noop_gating += int(noop_gating.sum())
        for slowdown in slowdowns:
            slowed = {key: (ttft * (1 + slowdown), tpot) for key, (ttft, tpot) in current.items()}
            caught, _, _ = _judge_batch(design, [s for s in specs if s.kind == "baseline"],
                                        confidence, slowed, baseline, rng, size)
            tally.caught[slowdown] += int(caught.sum())
        done += size

    def ci(k: int) -> list[float]:
        low, high = sps.binomtest(k, nights).proportion_ci()     # 95 %, exact (Clopper-Pearson)
        return [round(float(low), 5), round(float(high), 5)]

    power = {f"{s:.2f}": round(tally.caught[s] / nights, 4) for s in slowdowns}
    reach = [s for s in sorted(slowdowns) if tally.caught[s] / nights >= 0.8]
    return {
        "suite": design.suite, "repeats": design.repeats, "run_cv": run_cv, "nights": nights,
        "checks": len(specs), "aa_false_alarm": round(tally.aa_alarm / nights, 5),
        "aa_false_alarm_ci": ci(tally.aa_alarm),
        "noop_false_failure": round(tally.noop_fail / nights, 5),
        "noop_false_failure_ci": ci(tally.noop_fail),
        "noop_gating_nights": round(tally.noop_gating / nights, 4),
        "power": {f"{s:.2f}": power[f"{s:.2f}"] for s in POWER_AT if f"{s:.2f}" in power},
        "power_curve": power,
        "slowdown_80": reach[0] if reach else None,
        "per_check_confidence": round(confidence, 8),
        "assumed_run_cv": design.config.run_to_run_cv,
        "assumed_run_cv_dof": design.config.run_to_run_cv_dof,
        "request_cv": {"ttft": round(design.ttft_cv, 4), "tpot": round(design.tpot_cv, 4),
                       "source": design.cv_source},
        "runner_class": design.runner_class, "seed": seed,
    }


def _runner_classes(suite_name: str, runner: str | None) -> list[str]:
    """``--runner``: a class, or an architecture (its first class); default: one class the
    suite covers where exact fill is gated off and one where it is gated on."""
    from servegate.core import runner_classes

    if runner is not None:
        if runner in runner_classes.ARCHES:
            return [runner_classes.of_arch(runner)[0].name]
        return [runner_classes.get(runner).name]
    suite = load_suite(suite_path(suite_name))
    classes = [c for c in suite.runner_classes() if c in REGISTRY]
    picked: dict[bool, str] = {}
    for name in classes:
        picked.setdefault(REGISTRY[name].gated, name)
    return [picked[g] for g in (False, True) if g in picked] or ["mi300x"]


def _block_rows(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Rows of an in-server ([design]) suite: per runner class, run CV and block CV."""
    suite = load_suite(suite_path(name))
    rows = []
    for runner in _runner_classes(name, args.runner):
        design = blocks.block_design(suite, runner)
        block_cvs = args.block_cv or ((CPU_BLOCK_CV,) if runner.startswith("cpu")
                                      else DEFAULT_BLOCK_CVS)
        for run_cv in args.run_cv:
            for block_cv in block_cvs:
                interaction = suite.judge.interaction_cv if args.interaction_cv is None \
                    else args.interaction_cv
                noise = blocks.Noise(run_cv, block_cv, interaction)
                # head vs base of this design (servegate ab): both trees' servers alive
                pair = blocks.live_pair_calibration(
                    suite.judge, design.starts, design.blocks, len(design.modes), noise,
                    nights=args.nights, seed=args.seed)
                if blocks.family(design):
                    row = blocks.calibrate_design(design, noise, nights=args.nights,
                                                  seed=args.seed, batch=args.batch)
                else:               # a head-vs-base suite: its family is the pair's alone
                    row = _pair_row(name, runner, noise, pair, args.nights)
                row["head_vs_base"] = pair
                rows.append(row)
    return rows


def _pair_row(suite: str, runner: str, noise: blocks.Noise, pair: dict[str, Any],
              nights: int) -> dict[str, Any]:
    """The row of a suite gated only head vs base: its A/A and power are the live pair's."""
    return blocks.design_row(
        suite, runner, "live-pair", starts=pair["starts"], blocks=pair["blocks"],
        server_starts=pair["server_starts"], noise=noise, nights=nights,
        family_size=pair["family_size"], aa=(pair["aa_false_alarm"], pair["aa_false_alarm_ci"]),
        power_curve=pair["power_curve"], slowdown_80=pair["slowdown_80"])


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split(",") if v.strip())


def main(argv: Sequence[str] | None = None) -> int:
    """``servegate calibrate [--suite S ...] [--run-cv 0.01,0.02,0.04] [--nights N] [--json]``."""
    parser = argparse.ArgumentParser(prog="servegate calibrate", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--suite", action="append", help="suite name (repeatable); default "
                        + ", ".join(DEFAULT_SUITES))
    parser.add_argument("--run-cv", type=_floats, default=DEFAULT_RUN_CVS,
                        help="true run-to-run CVs to simulate, comma-separated")
    parser.add_argument("--nights", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=20261130)
    parser.add_argument("--batch", type=int, default=200, help="nights simulated at once")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--runner",
                        help="runner class or architecture to judge as (in-server designs; "
                             "default: one gated-off and one gated-on class the suite covers)")
    parser.add_argument("--block-cv", type=_floats,
                        help="true block-to-block CVs inside a start (in-server designs; "
                             f"default {CPU_BLOCK_CV} on cpu classes, "
                             f"{','.join(map(str, DEFAULT_BLOCK_CVS))} on GPUs)")
    parser.add_argument("--interaction-cv", type=float,
                        help="true start x mode interaction CV (default: the suite's prior)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.nights < 1 or args.batch < 1 or not args.run_cv or min(args.run_cv) < 0:
        print("servegate calibrate: --nights and --batch must be >= 1, --run-cv >= 0",
              file=sys.stderr)
        return 2
    started = time.monotonic()
    rows = []
    try:
        names = list(args.suite or DEFAULT_SUITES)
        in_server = {name for name in names
                     if load_suite(suite_path(name)).design is not None}
        designs = [design_for(name) for name in names if name not in in_server]
        block_rows = [row for name in names if name in in_server
                      for row in _block_rows(name, args)]
    except (ConfigError, OSError, KeyError, ValueError) as err:
        print(f"servegate calibrate: {err}", file=sys.stderr)
        return 2
    for design in designs:
        for run_cv in args.run_cv:
            rows.append(calibrate(design, run_cv, nights=args.nights, seed=args.seed,
                                  batch=args.batch))
    rows += block_rows
    elapsed = time.monotonic() - started
    if args.json:
        print(json.dumps({"designs": rows, "seed": args.seed,
                          "wall_time_s": round(elapsed, 1)}, indent=1))
        return 0
    print(f"{'suite':<10} {'runner':<9} {'SxB':>5} {'run_cv':>6} {'blk_cv':>6} {'checks':>6} "
          f"{'A/A alarm [95% CI]':>24} {'no-op fail':>10} {'power 5%':>8} {'power 10%':>9} "
          f"{'80% at':>7} {'claim 5.4/9.5%':>14}")
    for row in rows:
        low, high = row["aa_false_alarm_ci"]
        at = "-" if row["slowdown_80"] is None else f"{100 * row['slowdown_80']:.0f}%"
        shape = f"{row['starts']}x{row['blocks']}" if "starts" in row else f"r{row['repeats']}"
        block_cv = f"{100 * row['block_cv']:.1f}%" if "block_cv" in row else "-"
        claim = row.get("claim_power")
        claim_text = "-" if not claim else f"{claim['0.054']:.2f}/{claim['0.095']:.2f}"
        noop = "-" if row["noop_false_failure"] is None else f"{row['noop_false_failure']:.4f}"
        print(f"{row['suite']:<10} {row['runner_class']:<9} {shape:>5} "
              f"{100 * row['run_cv']:>5.1f}% {block_cv:>6} "
              f"{row['checks']:>6} {row['aa_false_alarm']:>8.4f} [{low:.4f}, {high:.4f}] "
              f"{noop:>10} {row['power'].get('0.05', 0):>8.3f} "
              f"{row['power'].get('0.10', 0):>9.3f} {at:>7} {claim_text:>14}")
        pair = row.get("head_vs_base")
        if pair:
            p_low, p_high = pair["aa_false_alarm_ci"]
            p_at = "-" if pair["slowdown_80"] is None else f"{100 * pair['slowdown_80']:.0f}%"
            print(f"{'':<10} head vs base, live pair ({pair['server_starts']} server starts, "
                  f"{pair['family_size']} gated): A/A {pair['aa_false_alarm']:.4f} "
                  f"[{p_low:.4f}, {p_high:.4f}], 80 % power at a {p_at} TTFT slowdown")
    print(f"{args.nights} nights per row, seed {args.seed}, {elapsed:.1f} s")
    return 0


if __name__ == "__main__":   # pragma: no cover
    sys.exit(main())
