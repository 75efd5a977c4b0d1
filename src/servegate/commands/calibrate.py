"""``servegate calibrate``: simulate nights through the judge's own decision code, per suite design.

Why: a gate is only as good as its false-alarm rate and its power at the sample sizes CI
affords, and both depend on the design and the ``[judge]`` table together. The simulation is
:mod:`servegate.calibration`; the rows it reports (A/A with Clopper-Pearson, power, claim
honesty, ``--history-nights``) are described in docs/judge.md, Calibration.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from servegate import calibration as blocks
from servegate.calibration import history as honesty
from servegate.calibration import pairs, sustained
from servegate.config import ConfigError, load_suite, suite_path
from servegate.core.runner_classes import REGISTRY
from servegate.plan.cost import Cell, CostError, estimate
from servegate.plan.design import live_pair_layout

DEFAULT_SUITES = ("cpu", "premerge", "nightly")
DEFAULT_RUN_CVS = (0.01, 0.02, 0.04)
DEFAULT_BLOCK_CVS = (0.01,)        # GPU block-to-block CV inside a start: an assumption
CPU_BLOCK_CV = 0.065               # measured on this 2-core VM (4 starts x 6 blocks)
TIMED_BLOCK_CVS = (0.05, 0.10, 0.15, 0.20)  # a design sized in time: the range it must gate at


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
    timed = suite.effective_design.max_minutes is not None
    for runner, slower in ((r, x) for r in _runner_classes(name, args.runner)
                           for x in (args.slower if timed else (1.0,))):
        design = blocks.block_design(suite, runner, slower)
        block_cvs = args.block_cv or ((TIMED_BLOCK_CVS if timed else (CPU_BLOCK_CV,))
                                      if runner.startswith("cpu") else DEFAULT_BLOCK_CVS)
        for run_cv in args.run_cv:
            for block_cv in block_cvs:
                interaction = suite.judge.interaction_cv if args.interaction_cv is None \
                    else args.interaction_cv
                noise = blocks.Noise(run_cv, block_cv, interaction, half_cv=args.half_cv)
                # head vs base of this design (servegate ab: a timed one counted), both
                # trees' servers alive, its start level learned from --stored-pairs, a
                # crossover on GPU halves
                ab = suite.effective_design.counted() if timed else design
                crossover = live_pair_layout(suite, runner).crossover(ab.starts, ab.looks)
                pair = pairs.live_pair_calibration(
                    suite.judge, ab.starts, ab.blocks, len(design.modes), noise,
                    nights=args.nights, seed=args.seed, looks=ab.looks,
                    stored=args.stored_pairs, changes=args.stored_changes,
                    crossover=crossover)
                if blocks.family(design):
                    row = blocks.calibrate_design(design, noise, nights=args.nights,
                                                  seed=args.seed, batch=args.batch)
                    _health(row, design, noise, args)
                else:               # a head-vs-base suite: its family is the pair's alone
                    row = _pair_row(name, runner, noise, pair, args.nights)
                row["head_vs_base"] = pair
                # a claim's interval honesty: first night (typed priors) vs learned ones
                claim = honesty.claim_honesty(design, noise, nights=args.nights,
                                              seed=args.seed, history=args.history_nights,
                                              batch=args.batch) \
                    if args.history_nights > 0 else None
                if claim is not None:
                    row["claim_honesty"] = claim
                if args.history_nights >= 3 and any(
                        c.kind == "versus" for c in blocks.family(design)):
                    # nights as evidence: the CUSUM over the gated aggregates (a quarter)
                    row["sustained_shift"] = sustained.sustained_calibration(
                        design, noise, histories=max(1, args.nights // 5), seed=args.seed,
                        reference=args.history_nights)
                    # one night against compare --baseline history:N
                    row["one_night_vs_history"] = sustained.one_night_against_history(
                        design, noise, nights=args.nights, seed=args.seed,
                        history=args.history_nights)
                _expected_minutes(suite, design, row, slower)
                if timed:
                    row["sized_in_time"] = {"slower": slower,
                                            "max_minutes": suite.effective_design.max_minutes}
                rows.append(row)
    return rows


def _health(row: dict[str, Any], design: blocks.BlockDesign, noise: blocks.Noise,
            args: argparse.Namespace) -> None:
    """``runner_health`` (with ``--history-nights``) and ``heavy_tailed_bursty``: the design in
    the heavy-tailed, bursty block world (A/A, a healthy night's PASS, claim power, health)."""
    heavy = replace(noise, heavy=True)
    health = [honesty.runner_health(design, world, nights=max(1, args.nights // 5),
                                    seed=args.seed, history=args.history_nights)
              if args.history_nights > 0 else None for world in (noise, heavy)]
    rough = blocks.calibrate_design(design, heavy, nights=args.nights, seed=args.seed,
                                    batch=args.batch)
    row["runner_health"] = health[0]
    row["heavy_tailed_bursty"] = {key: rough.get(key) for key in (
        "aa_false_alarm", "aa_pass_share", "claim_power", "slowdown_80")} | {
        "runner_health": health[1]}


def _expected_minutes(suite: Any, design: blocks.BlockDesign, row: dict[str, Any],
                      slower: float = 1.0) -> None:
    """``expected_serving_minutes`` per simulated world (A/A, the claims, the slowdowns): the
    suite's serving minutes on the class (:mod:`servegate.plan.cost`) with its blocks scaled by the
    share a world's nights ran before they stopped (1 without looks); ``max`` with none
    skipped. The head-vs-base pair's the same way, both trees priced."""
    for record, trees in ((row, 1), (row["head_vs_base"], 2)):
        try:
            priced = estimate(suite, Cell(design.runner, design.modes, "gate", trees),
                              measured_scale=slower)
        except (CostError, ValueError):
            continue                        # a class the profile has no speed table for
        minutes = priced["minutes"]
        fixed = minutes["warmups"] + minutes["gsm8k"]
        worlds = {"aa": 1.0, **(record.get("blocks_run_fraction") or {})}
        if record.get("claim_power") and not any(k.startswith("claim") for k in worlds):
            worlds.update({f"claim {size}": 1.0 for size in record["claim_power"]})
        cross = record.get("crossover_run") or {}   # nights that ran a second start
        second = minutes["warmups"] + minutes["blocks"] if cross else 0.0
        worlds |= {world: worlds.get(world, 1.0) for world in cross}
        record["expected_point_minutes"] = {world: round(minutes["blocks"] * share, 1)
                                            for world, share in worlds.items()}
        record["expected_serving_minutes"] = {
            "max": round(fixed + minutes["blocks"] + second, 1),
            **{world: round(fixed + minutes["blocks"] * share + second * cross.get(world, 0.0),
                            1) for world, share in worlds.items()}}


def _pair_row(suite: str, runner: str, noise: blocks.Noise, pair: dict[str, Any],
              nights: int) -> dict[str, Any]:
    """The row of a suite gated only head vs base: its A/A and power are the live pair's."""
    return blocks.design_row(
        suite, runner, "live-pair", starts=pair["starts"], blocks=pair["blocks"],
        server_starts=pair["server_starts"], noise=noise, nights=nights,
        family_size=pair["family_size"], aa=(pair["aa_false_alarm"], pair["aa_false_alarm_ci"]),
        power_curve=pair["power_curve"], slowdown_80=pair["slowdown_80"])


def _honesty_line(honest: dict[str, Any]) -> str:
    """The claim's honesty, first night | with history, in one line of the table."""
    parts = (honest["first_night"], honest["with_history"])

    def both(key: str, size: str | None = None) -> str:
        return " | ".join(f"{(p[key] if size is None else p[key][size]):.3f}" for p in parts)
    claimed = 100 * float(honest["claimed_improvement"])
    return (f"claim (first night | {honest['history_nights']} nights of history): coverage at "
            f"5.4% {both('claim_coverage', '0.054')}, false refutation at {claimed:g}% "
            f"{both('false_refutation_at_claim')}, power at 5.4% "
            f"{both('claim_power', '0.054')}, A/A {both('aa_false_alarm')}")


def _sustained_line(shift: dict[str, Any]) -> str:
    """The sustained-shift rule over a quarter, in one line of the table."""
    three = shift["0.03"]
    return (f"sustained 3% over {shift['reference_nights']} reference nights: flagged within 3 "
            f"nights {three['flagged_within_3_nights']:.3f} (7: "
            f"{three['flagged_within_7_nights']:.3f}); false alarms a quarter "
            f"{shift['false_alarms_per_quarter']:.2f} ({shift['series']} series), nights with "
            f"one {shift['false_alarm_nights_per_quarter']:.2f}")


def _floats(text: str) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split(",") if v.strip())


def build_parser() -> argparse.ArgumentParser:
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
    parser.add_argument("--slower", type=_floats, default=(1.0, 2.0),
                        help="a design sized in time ([design] max_minutes) on machines this "
                             "many times slower than the model profile's speed model")
    parser.add_argument("--interaction-cv", type=float,
                        help="true start x mode interaction CV (default: the suite's prior)")
    parser.add_argument("--stored-pairs", type=int, default=0,
                        help="earlier live pairs of the class in the history store the "
                             "head_vs_base start level is learned from (0: the suite's prior)")
    parser.add_argument("--stored-changes", type=int, default=0,
                        help="of --stored-pairs, how many were real changes (head 20 %% slower)")
    parser.add_argument("--half-cv", type=float, default=0.0,
                        help="true level-sd of each half of a halves runner a night (default 0)")
    parser.add_argument("--history-nights", type=int, default=honesty.HISTORY_NIGHTS,
                        help="nights of history a runner's learned priors come from in the "
                             "claim-honesty worlds (claim_honesty), and the reference nights "
                             "of the sustained-shift rule (sustained_shift, nights/5 "
                             "histories of a quarter each); 0: neither simulated")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``servegate calibrate [--suite S ...] [--run-cv 0.01,0.02,0.04] [--nights N] [--json]``."""
    args = build_parser().parse_args(list(argv) if argv is not None else None)
    if args.nights < 1 or args.batch < 1 or not args.run_cv or min(args.run_cv) < 0:
        print("servegate calibrate: --nights and --batch must be >= 1, --run-cv >= 0",
              file=sys.stderr)
        return 2
    if not 0 <= args.stored_changes <= args.stored_pairs:
        print("servegate calibrate: --stored-changes must be in [0, --stored-pairs], got "
              f"{args.stored_changes} of {args.stored_pairs}", file=sys.stderr)
        return 2
    if args.history_nights < 0 or (args.interaction_cv is not None
                                   and not 0 <= args.interaction_cv < 1):
        print("servegate calibrate: --history-nights must be >= 0 and --interaction-cv in "
              f"[0, 1), got {args.history_nights} and {args.interaction_cv}", file=sys.stderr)
        return 2
    started = time.monotonic()
    rows = []
    try:
        for name in list(args.suite or DEFAULT_SUITES):
            rows += _block_rows(name, args)
    except (ConfigError, OSError, KeyError, ValueError) as err:
        print(f"servegate calibrate: {err}", file=sys.stderr)
        return 2
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
        shape = f"{row['starts']}x{row['blocks']}"
        block_cv = f"{100 * row['block_cv']:.1f}%"
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
            cross = pair.get("crossover_run")
            print(f"{'':<10} head vs base, live pair ({pair['server_starts']} server starts "
                  f"at most, {pair['family_size']} gated" + (
                      f", crossover on {100 * cross['aa']:.0f}% of A/A" if cross else "")
                  + f"): A/A {pair['aa_false_alarm']:.4f} [{p_low:.4f}, {p_high:.4f}], 80 % "
                  f"power at a {p_at} TTFT slowdown")
        timed = row.get("sized_in_time")
        if timed:
            points = row.get("expected_point_minutes") or {}
            print(f"{'':<10} sized in time, {timed['slower']:g}x the speed model's time: up to "
                  f"{row['blocks']} blocks within {timed['max_minutes']:g} min: no-op TOST power "
                  f"{100 * (row.get('noop_tost_power') or 0):.1f}% (gating on "
                  f"{100 * (row.get('noop_gating_nights') or 0):.1f}% of A/A nights); minutes "
                  f"of points: A/A {points.get('aa', '-')}")
        honest = row.get("claim_honesty")
        if honest:
            print(f"{'':<10} {_honesty_line(honest)}")
        shift = row.get("sustained_shift")
        if shift:
            print(f"{'':<10} {_sustained_line(shift)}")
    print(f"{args.nights} nights per row, seed {args.seed}, {elapsed:.1f} s")
    return 0


if __name__ == "__main__":   # pragma: no cover
    sys.exit(main())
