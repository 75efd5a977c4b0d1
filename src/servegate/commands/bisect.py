"""``servegate bisect --good REF --bad REF``: from a red night to the first bad commit, each step the
admission stage first, then a live pair judged against the alarmed effect's midpoint, priced
before it starts and capped by ``--max-gpu-minutes`` (the steps and exit codes:
docs/guide/bisect.md)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from servegate.admission import classify
from servegate.admission.ab import AbError
from servegate.commands import bench
from servegate.config import ConfigError, Suite, load_suite, suite_path
from servegate.config.judge import parse_judge_table
from servegate.core.atomic import write_json
from servegate.core.errors import EXIT_INCONCLUSIVE, EXIT_INFRA, EXIT_OK, ServegateError
from servegate.core.metrics import direction
from servegate.core.paths import SUITES_DIR
from servegate.history.cli import ENV_STORE
from servegate.plan.cost import CostError, cells, estimate
from servegate.serve.detect import RunnerError, detect
from servegate.serve.trees import TreeError, git_output

PROG = "servegate bisect"
GOOD, BAD, SKIP = "good", "bad", "skip"
MAX_FLOOR = 0.9     # a judge floor is a fraction below 1: effects past x3.6 keep x1.9 as midpoint


class BisectError(ServegateError):
    """A range, tree or option the bisect cannot use; the message names it."""


@dataclass
class Step:
    index: int                          # the tree's place in the range (0: good, last: bad)
    tree: str
    verdict: str                        # good, bad or skip
    stage: str                          # admission or serving
    why: str
    admission: dict[str, Any]
    served: dict[str, Any] | None = None
    seconds: float = 0.0


def _metric(text: str) -> tuple[str, float | None]:
    name, _, effect = text.partition("=")
    try:
        value, worse = (float(effect) if effect else None), direction(name) == "lower"
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected NAME[=EFFECT]: {err}") from None
    if value is not None and not (value > 1 if worse else 0 < value < 1):
        raise argparse.ArgumentTypeError(f"{text}: the effect is the bad/good ratio of a "
                                         f"regression ({'> 1' if worse else 'in (0, 1)'})")
    return name, value


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", "--sglang-src", dest="repo", type=Path, default=Path("."),
                   help="the sglang checkout (default: .)")
    p.add_argument("--good", help="the last good commit")
    p.add_argument("--bad", help="the bad commit the alarm named")
    p.add_argument("--trees", nargs="+", type=Path, metavar="TREE",
                   help="sglang trees in order, the good one first (instead of a checkout)")
    p.add_argument("--suite", help="the suite served (default: cpu without a GPU, premerge)")
    p.add_argument("--runner", help="runner class (default: detected)")
    p.add_argument("--mode", help="the alarm's mode (default: the suite's first)")
    p.add_argument("--metric", action="append", type=_metric, metavar="NAME[=EFFECT]",
                   help="an alarmed metric and its bad/good ratio (default: the suite's "
                        "aggregate metrics, effects measured on the bad end)")
    p.add_argument("--admission-suite", type=Path, default=SUITES_DIR / "admission.toml")
    p.add_argument("--profile", action="store_true",
                   help="the culprit served against its parent, profiled: its kernel attribution")
    p.add_argument("--max-gpu-minutes", type=float, default=None)
    p.add_argument("--dry-run", action="store_true", help="print the price and stop")
    p.add_argument("--commits", type=int, default=16, help="--dry-run without a range: commits")
    p.add_argument("--out", type=Path, default=None, help="default: results/bisect-<UTC stamp>")
    p.add_argument("--json", action="store_true")
    return p


def _range(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(ref, label) per tree, the good one first: paths, or commits of ``--repo``."""
    if args.trees:
        if len(args.trees) < 2:
            raise BisectError("--trees: expected the good tree, any candidates, the bad tree")
        return [(str(t.absolute()), t.name) for t in args.trees]
    if not (args.good and args.bad):
        raise BisectError("--good and --bad (commits of --repo), or --trees, are required")
    good = git_output(args.repo, "rev-parse", "--verify", f"{args.good}^{{commit}}")
    log = git_output(args.repo, "log", "--first-parent", "--reverse", "--format=%H %s",
                     f"{args.good}..{args.bad}")
    if good is None or log is None:
        raise BisectError(f"--repo {args.repo}: --good {args.good} or --bad {args.bad} is not a "
                          f"commit of this git checkout")
    if not log:
        raise BisectError(f"--good {args.good}..--bad {args.bad}: no commits in between")
    return [(good, args.good)] + [(line[:40], f"{line[:10]} {line[41:]}"[:60])
                                  for line in log.splitlines()]


class Bisect:
    """One bisect: its trees (commits checked out when first needed), steps and price."""

    def __init__(self, args: argparse.Namespace, points: list[tuple[str, str]]) -> None:
        self.args, self.points = args, points
        self.runner = detect(args.runner).runner_class
        self.suite = load_suite(suite_path(args.suite or ("cpu" if self.runner == "cpu"
                                                          else "premerge")))
        self.mode = args.mode or self.suite.modes[0]
        if self.mode not in self.suite.modes:
            raise BisectError(f"--mode {self.mode}: suite {self.suite.name} runs "
                              f"{', '.join(self.suite.modes)}")
        self.effects = dict(args.metric or dict.fromkeys(self.suite.judge.aggregate_metrics))
        self.out = args.out or Path("results") / datetime.now(timezone.utc).strftime(
            "bisect-%Y%m%dT%H%M%SZ")
        self.pair = estimate(self.served(self.floors(against_one=True)),
                             cells(self.suite, self.runner, "premerge", (self.mode,))[0],
                             with_accuracy=False, with_profile=False)
        self.steps: list[Step] = []
        self.by_admission, self.spent = False, 0.0
        self._paths: dict[int, Path] = {}
        self._admission: dict[int, tuple[classify.Classification, float]] = {}  # and seconds
        self._replays: dict[str, dict[str, Any]] = {}      # the good end's replay, once

    def path(self, index: int) -> Path:
        ref = self.points[index][0]
        if index not in self._paths and not self.args.trees:
            dest = (self.out / "trees" / ref[:12]).absolute()
            proc = subprocess.run(["git", "-C", str(self.args.repo), "worktree", "add",
                                   "--detach", "--force", str(dest), ref],
                                  capture_output=True, text=True, check=False)
            if proc.returncode:
                raise BisectError(f"--repo {self.args.repo}: cannot check out {ref[:10]}: "
                                  f"{proc.stderr.strip()}")
            self._paths[index] = dest
        return self._paths.get(index, Path(ref))

    def close(self) -> None:
        """Remove the commits' checkouts (a given tree is never touched)."""
        for path in self._paths.values():
            shutil.rmtree(path, ignore_errors=True)     # no timeout: 4700 files on a busy VM
        if self._paths:
            git_output(self.args.repo, "worktree", "prune")

    def admission(self, index: int) -> classify.Classification:
        if index not in self._admission:
            started = time.monotonic()
            found = classify.classify_tree(self.path(0), self.path(index), python=sys.executable,
                                           suite=self.args.admission_suite, runner=self.runner,
                                           cache=self._replays)
            self._admission[index] = (found, time.monotonic() - started)
        return self._admission[index][0]

    def floors(self, against_one: bool = False) -> dict[str, float]:
        """Each alarmed metric's judge floor: the suite's (against 1), or the geometric
        midpoint between 1 and the metric's effect."""
        if against_one:
            return {m: self.suite.judge.floor(m) for m in self.effects}
        return {m: round(min(abs(math.sqrt(e) - 1), MAX_FLOOR), 4)
                for m, e in self.effects.items() if e is not None}

    def served(self, floors: dict[str, float]) -> Suite:
        """The suite a pair serves: one mode, ``floors``' metrics the gated family; looks after
        every second block round when the suite has none."""
        table = dict(self.suite.judge_table or {})
        table.update(metrics=list(floors), aggregate_metrics=list(floors), floors=floors,
                     family=["ab-aggregate"], aggregate_concurrency={
                         m: c for m, c in table.get("aggregate_concurrency", {}).items()
                         if m in floors})
        design = self.suite.design.counted()
        looks = design.looks or tuple(range(2, design.blocks, 2))
        return replace(self.suite, name=f"bisect-{self.suite.name}", modes=(self.mode,),
                       judge=parse_judge_table(table, f"{self.suite.source} (bisect)"),
                       judge_table=table, gsm8k=None, gsm8k_table=None,
                       design=replace(design, looks=looks))

    def serve(self, index: int, reference: int, floors: dict[str, float],
              profile: bool = False) -> dict[str, Any]:
        """``servegate ab`` of tree ``index`` (head) against ``reference`` (base): per metric
        its verdict, ratio and interval against ``floors``."""
        cap, price = self.args.max_gpu_minutes, self.pair["gpu_minutes"]
        if cap is not None and self.spent + price > cap:
            raise BisectError(f"--max-gpu-minutes {cap}: another pair ({price} GPU-minutes) "
                              f"would pass it ({self.spent} spent)")
        out = self.out / "steps" / f"{len(self.steps):02d}-{self.points[index][1][:10].strip()}"
        argv = ["--base", str(self.path(reference)), "--head", str(self.path(index)), "--runner",
                self.runner, "--results-dir", str(out), "--modes", self.mode, "--skip-accuracy",
                *(["--profile"] if profile else [])]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = bench.main(argv, suite=self.served(floors))
        if code > 128:                              # bench caught SIGINT/SIGTERM: stop here too
            raise SystemExit(code)
        self.spent = round(self.spent + price, 1)
        verdicts = sorted(out.glob("*/verdict.json"))
        if not verdicts:
            last = (printed.getvalue().strip().splitlines() or ["no output"])[-1]
            return {"error": f"servegate ab exited {code} without a verdict ({last})"}
        run = json.loads((verdicts[0].parent / "run.json").read_text())
        checks = {c["metric"]: {k: c[k] for k in ("verdict", "ratio", "interval", "confidence")}
                  for c in json.loads(verdicts[0].read_text())["checks"]
                  if c["kind"] == "ab" and c["primary"]}
        for metric, floor in floors.items():
            checks.setdefault(metric, {"verdict": "error"})["midpoint"] = round(
                1 + floor if direction(metric) == "lower" else 1 - floor, 4)
        attribution = verdicts[0].parent / "attribution.json"
        return {"run_dir": str(verdicts[0].parent), "exit": code, "metrics": checks,
                "blocks": (run.get("sequential") or {}).get("stopped_at_blocks")
                or run["design"]["blocks"],
                "attribution": [c["line"] for c in json.loads(attribution.read_text())
                                ["comparisons"]] if attribution.is_file() else []}

    def step(self, index: int, floors: dict[str, float] | None = None) -> Step:
        """Tree ``index`` through the admission stage, then, when it leaves the tree open, a
        pair against the good tree on ``floors`` (default: the alarmed effects' midpoints)."""
        found = self.admission(index)
        started = time.monotonic()
        step = Step(index, self.points[index][1], SKIP, "admission",
                    (found.reason or "").split(" | ")[-1], found.to_json())   # its error line
        if found.verdict not in (classify.DOES_NOT_IMPORT, classify.REPLAY_FAILED):
            seen = [*found.invariant_failures, *found.moved]
            step.why = f"admission {found.verdict}" + (f": {seen[0]}" + (
                f" (+{len(seen) - 1} more)" if len(seen) > 1 else "") if seen else "")
            if self.by_admission:
                step.verdict = BAD if found.decided else GOOD
            else:
                step.stage, step.served = "serving", self.serve(index, 0, floors or self.floors())
                step.verdict, step.why = _served_verdict(step.served)
        step.seconds = round(self._admission[index][1] + time.monotonic() - started, 1)
        self.steps.append(step)
        print(f"{PROG}: step {len(self.steps)}: {step.tree}: {step.verdict} ({step.stage}: "
              f"{step.why})", file=sys.stderr, flush=True)
        return step

    def run(self) -> dict[str, Any]:
        """git bisect over the range, skips included; the bad end served when it must be."""
        last = len(self.points) - 1
        if (end := self.admission(last)).reason is not None:
            raise BisectError(f"--bad {self.points[last][1]}: the bad tree cannot be judged: "
                              f"{end.reason}")
        self.by_admission = end.decided
        if self.by_admission or None in self.effects.values():
            if (bad := self.step(last, self.floors(against_one=True))).verdict != BAD:
                return self.result(None, f"no culprit: the bad end is not shown to regress "
                                         f"against the good tree ({bad.why})")
            if bad.served:
                self.effects = {m: c["ratio"] for m, c in bad.served["metrics"].items()
                                if c["verdict"] == "regression"}
        lo, hi, skipped = 0, last, set()
        while left := [i for i in range(lo + 1, hi) if i not in skipped]:
            step = self.step(min(left, key=lambda i: (abs(2 * i - lo - hi), i)))
            lo, hi = (lo, step.index) if step.verdict == BAD else (
                (step.index, hi) if step.verdict == GOOD else (lo, hi))
            skipped |= {step.index} if step.verdict == SKIP else set()
        bad = self.step(last) if hi == last and all(s.index != last for s in self.steps) \
            else None                               # the bad end, not yet served: served now
        if bad is not None and bad.verdict != BAD:
            return self.result(None, f"{'no culprit' if bad.verdict == GOOD else 'undecided'}: "
                                     f"the bad end against the good tree: {bad.why}",
                               undecided=bad.verdict == SKIP)
        if hi - lo > 1:
            among = [self.points[i][1] for i in range(lo + 1, hi + 1)]
            return self.result(None, f"the first bad commit is one of: {', '.join(among)} "
                                     f"(the others were skipped)", among=among)
        return self.result(hi, f"first bad commit: {self.points[hi][1]}")

    def result(self, culprit: int | None, conclusion: str, among: list[str] | None = None,
               undecided: bool = False) -> dict[str, Any]:
        found: dict[str, Any] | None = None
        if culprit is not None:
            step = next(s for s in reversed(self.steps) if s.index == culprit)
            found = {"index": culprit, "tree": step.tree, "stage": step.stage,
                     "effect": (step.served or {}).get("metrics"), "admission": step.admission}
            if self.args.profile and step.stage == "serving":
                found["against_parent"] = self.serve(culprit, culprit - 1,
                                                     self.floors(against_one=True), True)
            conclusion += f" ({step.why})"
        end = self._admission.get(len(self.points) - 1)
        return {"good": self.points[0][1], "bad": self.points[-1][1],
                "range": [label for _, label in self.points], "runner_class": self.runner,
                "suite": self.suite.name, "mode": self.mode, "effects": self.effects,
                "stage": "admission" if self.by_admission else "serving", "culprit": found,
                "bad_end_admission": end[0].to_json() if end else None,
                "first_bad_among": among, "undecided": undecided, "conclusion": conclusion,
                "gpu_minutes_spent": self.spent, "steps": [asdict(s) for s in self.steps]}

    def price(self, commits: int) -> dict[str, Any]:
        """The worst case: the bad end and ceil(log2 N) candidates served (+1 with --profile)."""
        pairs = 1 + math.ceil(math.log2(max(commits, 1))) + int(self.args.profile)
        pair = {k: self.pair[k] for k in ("wall_minutes", "gpu_minutes", "gpus_held")}
        gpu, wall = round(pairs * pair["gpu_minutes"], 1), round(pairs * pair["wall_minutes"], 1)
        return {"commits": commits, "runner_class": self.runner, "suite": self.suite.name,
                "mode": self.mode, "served_pairs_max": pairs, "pair": pair,
                "gpu_minutes_max": gpu, "wall_minutes_max": wall, "line": (
                    f"{PROG}: {commits} commits on {self.runner} ({self.suite.name} "
                    f"[{self.mode}]): at most {pairs} served live pairs x {pair['gpu_minutes']} "
                    f"GPU-minutes ({pair['wall_minutes']} min on {pair['gpus_held']} GPUs) = "
                    f"{gpu} GPU-minutes, {wall} min; admission steps run on the CPU")}


def _served_verdict(served: dict[str, Any]) -> tuple[str, str]:
    """Like bad when a metric regressed past its midpoint, like good when every one is below."""
    if "error" in served:
        return SKIP, served["error"]
    verdicts = [c["verdict"] for c in served["metrics"].values()]
    why = "; ".join(
        f"{m} x{c['ratio']:.3f} [{c['interval'][0]:.3f}, {c['interval'][1]:.3f}] vs "
        f"x{c['midpoint']:g}" if c.get("interval") else f"{m} {c['verdict']}"
        for m, c in served["metrics"].items()) + f" after {served['blocks']} blocks"
    if "regression" in verdicts:
        return BAD, why
    return (GOOD if all(v in ("pass", "improvement") for v in verdicts) else SKIP), why


def _print(result: dict[str, Any]) -> None:
    print(f"bisect {result['good']} .. {result['bad']}: the {result['stage']} stage, "
          f"{result['suite']} [{result['mode']}] on {result['runner_class']}")
    width = max([len(s["tree"]) for s in result["steps"]] + [4])
    print(f" # {'tree':<{width}} {'stage':<9} verdict   s  why")
    for n, s in enumerate(result["steps"], 1):
        print(f"{n:>2} {s['tree']:<{width}} {s['stage']:<9} {s['verdict']:<7} {s['seconds']:>4.0f}"
              f"  {s['why']}")
    for line in ((result["culprit"] or {}).get("against_parent") or {}).get("attribution", []):
        print(f"attribution against its parent: {line}")
    print(result["conclusion"])


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        points = [] if args.dry_run and not (args.trees or args.good) else _range(args)
        bisect = Bisect(args, points)
        price = bisect.price(len(points) - 1 if points else args.commits)
    except (BisectError, ConfigError, CostError, RunnerError, TreeError) as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return EXIT_INFRA
    if args.dry_run:
        print(json.dumps(price, indent=2) if args.json else price["line"])
        return EXIT_OK
    print(price["line"], file=sys.stderr)
    if args.max_gpu_minutes is not None and price["gpu_minutes_max"] > args.max_gpu_minutes:
        print(f"{PROG}: priced at up to {price['gpu_minutes_max']} GPU-minutes, over "
              f"--max-gpu-minutes {args.max_gpu_minutes}: narrow the range or raise the cap",
              file=sys.stderr)
        return EXIT_INFRA
    store = os.environ.pop(ENV_STORE, None)     # a bisect's pairs are experiments, not nights
    code = EXIT_OK
    try:
        result = bisect.run()
    except (ServegateError, AbError) as err:    # the good tree, a checkout, the cap
        print(f"{PROG}: {err}", file=sys.stderr)
        result, code = bisect.result(None, f"stopped: {err}"), EXIT_INFRA
    finally:
        bisect.close()
        if store is not None:
            os.environ[ENV_STORE] = store
    write_json(bisect.out / "bisect.json", {**result, "price": price})
    print(json.dumps({**result, "price": price}, indent=2)) if args.json else _print(result)
    undecided = result["first_bad_among"] or result["undecided"]
    return EXIT_INCONCLUSIVE if code == EXIT_OK and undecided else code
