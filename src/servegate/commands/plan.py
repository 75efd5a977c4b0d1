"""``servegate plan --suite S [--runner R] [--json]``: what a suite will cost before it is booked.

Per CI cell, the counts and minutes :mod:`servegate.plan.cost` prices, every speed figure with its
source; a history store (``--history`` / ``$SERVEGATE_HISTORY``) replaces model figures with
measured ones, ``--sglang-src TREE`` reads the gate from that tree (``gate_open``). Fields and
examples: docs/guide/before-gpu.md (Plan). Exit 0; 2 for bad input (the message names the file,
key or option).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from servegate.commands.learned import learned_design, measured_figures
from servegate.config import load_suite, suite_path
from servegate.config._schema import ConfigError
from servegate.config.suites import Suite
from servegate.core.errors import ServegateError
from servegate.history.cli import ENV_STORE
from servegate.plan.cost import HEAD_VS_BASE_SUITES, Cell, CostError, cells, estimate

EXIT_OK, EXIT_USAGE = 0, 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="servegate plan", description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", required=True, help="suite name or path")
    p.add_argument("--runner", action="append", default=None,
                   help="runner class or architecture (repeatable; default: the suite's runners)")
    p.add_argument("--workflow", choices=("nightly", "premerge"), default=None,
                   help="the CI workflow's cells (default: premerge for a head-vs-base suite "
                        f"({', '.join(HEAD_VS_BASE_SUITES)}), else nightly)")
    p.add_argument("--modes", default=None, help="comma-separated modes (one cell)")
    p.add_argument("--skip-accuracy", action="store_true", help="no GSM8K passes")
    p.add_argument("--profile", action="store_true",
                   help="price the profiled blocks too (bench --profile; a suite's [profile] "
                        "enabled = true prices them without it)")
    p.add_argument("--history", type=Path, default=None,
                   help="history store with measured runs (default: $SERVEGATE_HISTORY)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--sglang-src", type=Path, default=None, metavar="PATH",
                   help="read each runner's exact-fill gate from this sglang tree (evaluated "
                        "with this Python); default: released sglang's gate")
    return p


def _gates(tree_path: Path | None, runners: list[str]) -> dict[str, bool]:
    """runner -> the tree's gate on it (empty without a tree)."""
    if tree_path is None:
        return {}
    from servegate.serve.gate import read_tree
    from servegate.serve.trees import resolve_tree

    readings = read_tree(sys.executable, resolve_tree(tree_path), runners)
    return {runner: reading.gate_open for runner, reading in readings.items()}


def plan_cells(args: argparse.Namespace) -> dict[str, Any]:
    path = suite_path(args.suite)
    suite = load_suite(path)
    workflow = args.workflow or ("premerge" if suite.name in HEAD_VS_BASE_SUITES else "nightly")
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip()) if args.modes else None
    store = args.history or (Path(os.environ[ENV_STORE]) if os.environ.get(ENV_STORE)
                             else None)
    out: list[dict[str, Any]] = []
    runners = args.runner or list(suite.runners)
    gates = _gates(args.sglang_src, runners)
    for runner in runners:
        for cell in cells(suite, runner, workflow, modes, gates.get(runner)):
            out.append({**_priced(suite, cell, not args.skip_accuracy, store,
                                  True if args.profile else None),
                        "gate_open": gates.get(runner)})
    return {"suite": suite.name, "suite_file": str(path), "workflow": workflow,
            "design": suite.effective_design.record(), "cells": out}


def gsm8k_sizing(suite: Suite, cell: Cell) -> dict[str, Any] | None:
    """The cell's GSM8K questions against their need (servegate.accuracy.sizing): at the
    smallest margin a gated GSM8K check uses, in the cell's gated family (the judge's own
    pending list, as the calibration builds it)."""
    if suite.gsm8k is None:
        return None
    from servegate.accuracy.sizing import size
    from servegate.calibration import block_design, family, suite_questions

    design = replace(block_design(suite, cell.runner_class), modes=cell.modes)
    checks = len(family(design))
    margin = min(suite.judge.accuracy_noninferiority_margin, suite.judge.accuracy_floor)
    sized = size(margin, suite_questions(suite), checks)
    return {**sized.to_json(), "line": sized.line()}


def _priced(suite: Suite, cell: Cell, with_accuracy: bool, store: Path | None,
            profile: bool | None = None) -> dict[str, Any]:
    """One cell from the speed model, then again with the runner's measured figures if any."""
    model = estimate(suite, cell, with_accuracy, with_profile=profile)
    if with_accuracy:
        model["gsm8k_sizing"] = gsm8k_sizing(suite, cell)
    measured = measured_figures(store, suite.name, cell.runner_class,
                                model["mean_point_seconds"])
    scale, load_s = (measured or {}).get("block_scale"), (measured or {}).get("model_load_s")
    extra: dict[str, Any] = {"learned": learned_design(suite, cell, store, with_accuracy, scale,
                                                       load_s)}
    design = suite.effective_design
    if design.max_minutes is not None and cell.trees == 1:      # counted by need: the least
        first = estimate(replace(suite, design=replace(design, blocks=design.looks[0], looks=(),
                                                       max_minutes=None)), cell, False,
                         measured_scale=scale)
        extra["first_look"] = {"blocks": first["blocks"], "minutes": first["minutes"]["blocks"]}
    if measured is None:
        return {**model, "figures": "speed model (models/ profile)", **extra}
    priced = estimate(suite, cell, with_accuracy, measured_scale=scale, measured_load_s=load_s,
                      with_profile=profile)
    return {**priced, "gsm8k_sizing": model.get("gsm8k_sizing"),
            "figures": f"measured: {measured['runs']} stored run(s) of {suite.name} on "
                       f"{cell.runner_class}",
            "measured": measured, "speed_model_estimate": {
                k: model[k] for k in ("serving_minutes", "wall_minutes", "gpu_minutes")},
            **extra}


def _print(result: dict[str, Any]) -> None:
    design, sizing = result["design"], result["design"].get("sizing") or {}
    print(f"servegate plan: {result['suite']} ({result['suite_file']}), workflow "
          f"{result['workflow']}, design {design['starts']} start(s) x "
          + (f"up to {design['blocks']} blocks, counted by need within "
             f"{sizing['max_minutes']:g} min of points (the cells: the blocks that fit)"
             if "max_minutes" in sizing else f"{design['blocks']} blocks"))
    for c in result["cells"]:
        trees = "head vs base" + (" (live pair)" if c["live_pair"] else "") \
            if c["trees"] == 2 else "one tree" + (", two starts at once (halves)"
                                                  if c["halves"] else "")
        m = c["minutes"]
        print(f"  {c['runner_class']} [{','.join(c['modes'])}] {c['role']}, {trees}: "
              f"{c['server_starts']} server start(s), {c['blocks']} blocks ({c['points']} "
              f"points, {c['warmup_points']} warm-up), {c['waves']} waves, {c['requests']} "
              f"requests, {c['prefill_tokens']:,} prompt tokens, {c['decode_steps']:,} decode "
              f"steps, {c['gsm8k_questions']} GSM8K questions")
        print(f"    serving {c['serving_minutes']} min ("
              + ("server-minutes, two at once: " if c["halves"] else "")
              + f"blocks {m['blocks']}, warm-ups "
              f"{m['warmups']}, GSM8K {m['gsm8k']}"
              + (f", profiled blocks {m['profiles']}" if c.get("profiled_blocks") else "")
              + f"), model loads {m['model_loads']} min, wall {c['wall_minutes']} min; "
              f"figures: {c['figures']}")
        print(f"    {c['gpus_held']} GPUs held: {c['gpu_minutes']} GPU-minutes held, "
              f"{c['gpu_minutes_used']} used serving, {100 * c['idle_share']:.0f} % idle while "
              f"serving" if c["gpus_held"] else "    no GPUs held (a CPU runner)")
        if c.get("first_look"):
            print(f"    decided at the first look: {c['first_look']['blocks']} blocks, "
                  f"{c['first_look']['minutes']} min of blocks (the least; above: the most)")
        learned = c.get("learned")
        if learned and learned["starts"] is None:
            print(f"    learned design ({learned['source']}): {learned['why']}")
        elif learned:
            print(f"    learned design ({learned['source']}: interaction log-sd "
                  f"{learned['interaction_log_sd']:g}, block log-sd {learned['block_log_sd']:g})"
                  f": {learned['starts']} start(s) x {learned['blocks']} blocks, serving "
                  f"{learned['serving_minutes']} min, wall {learned['wall_minutes']} min; the "
                  f"TOML design {c['server_starts']} start(s) x "
                  f"{c['blocks'] // max(len(c['modes']) * c['server_starts'], 1)} blocks: "
                  f"serving {c['serving_minutes']} min, wall {c['wall_minutes']} min")
        if c.get("gsm8k_sizing"):
            print(f"    {c['gsm8k_sizing']['line']}")
        if c["gate_open"] is not None:
            print(f"    gate (read from the tree): {'open' if c['gate_open'] else 'closed'}")
        for note in c["notes"]:
            print(f"    note: {note}")


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = plan_cells(args)
    except (ConfigError, CostError, ServegateError, FileNotFoundError) as err:
        print(f"servegate plan: {err}", file=sys.stderr)
        return EXIT_USAGE
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print(result)
    return EXIT_OK
