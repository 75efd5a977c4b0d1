"""``servegate admission ab --base A --head B``: the admission matrix on two sglang trees, each
replayed in its own process (``admission suite --json --sglang-src TREE``), both at once, and
compared per scenario and mode (the result, ``--expect-change`` and the exit codes:
docs/admission.md, Head vs base)."""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servegate.admission.golden import diff_entry
from servegate.admission.parsing import Parser
from servegate.admission.scenario import EXACT_FILL_MODES
from servegate.core.errors import EXIT_INFRA as EXIT_USAGE
from servegate.core.errors import EXIT_OK
from servegate.core.errors import EXIT_REGRESSION as EXIT_FAIL
from servegate.core.paths import SUITES_DIR
from servegate.serve.trees import SglangTree, TreeError, resolve_tree

if TYPE_CHECKING:
    from servegate.admission.suite import AdmissionSuite
    from servegate.core.runner_classes import RunnerClass

PROG = "servegate admission ab"
CHILD_TIMEOUT_S = 1800


class AbError(Exception):
    """A tree's replay failed (not a behaviour difference): exit 2 with this message.
    ``sides`` holds each failing side's own message (``base``/``head``)."""

    def __init__(self, message: str, sides: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.sides = sides or {}


@dataclass(frozen=True)
class Expectation:
    pattern: str                    # scenario id or fnmatch pattern
    mode: str | None                # None: every mode

    def covers(self, scenario: str, mode: str) -> bool:
        return fnmatch.fnmatchcase(scenario, self.pattern) and self.mode in (None, mode)

    def __str__(self) -> str:
        return self.pattern + (f":{self.mode}" if self.mode else "")


@dataclass
class Row:
    name: str
    mode: str
    identical: bool | None          # None: the mode ran in one tree only
    rounds_moved: list[str] = field(default_factory=list)
    only_in: str | None = None
    reason: str | None = None       # with only_in: why the other tree did not replay it
    gated: bool = False             # a difference here fails the gate (off; on off gfx95)
    expected: bool = False          # declared with --expect-change

    @property
    def other(self) -> str:
        """With ``only_in``: the tree that did not replay this scenario and mode."""
        return "base" if self.only_in == "head" else "head"

    @property
    def failing(self) -> bool:
        return self.gated and self.identical is False and not self.expected

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "mode": self.mode, "identical": self.identical,
                                "rounds_moved": self.rounds_moved}
        if self.only_in:
            data["only_in"] = self.only_in
            data["not_replayed"] = {"tree": self.other, "reason": self.reason}
        data["gated"] = self.gated
        data["expected_change"] = self.expected
        data["failing"] = self.failing
        return data


def _expectations(text: str) -> tuple[Expectation, ...]:
    out = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        pattern, _, mode = item.partition(":")
        if not pattern or (mode and mode not in EXACT_FILL_MODES):
            raise argparse.ArgumentTypeError(
                f"expected SCENARIO[:MODE] with MODE one of {', '.join(EXACT_FILL_MODES)}, "
                f"got {item!r}")
        out.append(Expectation(pattern, mode or None))
    return tuple(out)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog=PROG, description="Replay the admission matrix on a base and a head sglang "
                                      "tree (each in its own process) and compare them.")
    p.add_argument("--base", type=Path, required=True, metavar="TREE",
                   help="sglang checkout or unpacked package: the reference")
    p.add_argument("--head", type=Path, required=True, metavar="TREE",
                   help="sglang checkout or unpacked package: the change under test")
    p.add_argument("--suite", type=Path, default=SUITES_DIR / "admission.toml")
    p.add_argument("--expect-change", type=_expectations, default=(), metavar="SCENARIO[:MODE],...",
                   help="differences that are deliberate (scenario ids, fnmatch patterns allowed)")
    p.add_argument("--runner", default=None,
                   help="runner class deciding whether `on` is gated here (default: detected)")
    p.add_argument("--python", default=sys.executable,
                   help="interpreter for the two replay processes (default: this one)")
    p.add_argument("--json", action="store_true", help="print the JSON result")
    return p


def _child_argv(python: str, tree: SglangTree, suite: Path, modes: list[str]) -> list[str]:
    return [python, "-m", "servegate", "admission", "suite", "--json", "--no-golden",
            "--sglang-src", str(tree.import_root), "--suite", str(suite), "--modes", ",".join(modes)]


def _child_env(tree: SglangTree) -> dict[str, str]:
    src = str(Path(__file__).resolve().parents[2])   # this servegate's src/, after the tree
    return {**os.environ, "PYTHONPATH": tree.pythonpath(src)}


def replay_trees(python: str, suite: Path, trees: dict[str, SglangTree],
                 modes: dict[str, list[str]],
                 cache: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """Both trees at once, each in its own process; their suite JSON by side. ``cache`` (a
    bisect's: its trees do not change while it runs) keeps each replay by tree, suite and modes:
    the good end is replayed once, not at every step."""
    cache = {} if cache is None else cache
    keys = {side: f"{tree.path}|{suite}|{','.join(modes[side])}" for side, tree in trees.items()}
    outputs = {side: cache[key] for side, key in keys.items() if key in cache}
    procs = {side: subprocess.Popen(_child_argv(python, tree, suite, modes[side]),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=_child_env(tree))
             for side, tree in trees.items() if side not in outputs}
    errors: dict[str, str] = {}
    for side, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            errors[side] = f"--{side} {trees[side].path}: replay timed out after {CHILD_TIMEOUT_S} s"
            continue
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if proc.returncode not in (EXIT_OK, EXIT_FAIL) or not lines:
            tail = [line for line in err.strip().splitlines() if "warnings.warn" not in line][-3:]
            errors[side] = (f"--{side} {trees[side].path}: replay exited {proc.returncode}: "
                            + (" | ".join(tail) or "no output"))
            continue
        outputs[side] = cache[keys[side]] = json.loads(lines[-1])
    if errors:
        raise AbError("; ".join(errors.values()), errors)
    return outputs


def compare(base: dict[str, Any], head: dict[str, Any], gated_machine: bool,
            expect: tuple[Expectation, ...] = ()) -> list[Row]:
    """Per scenario and mode, in the suite's order: identical, moved rounds, or one side only."""
    def index(data: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
        return {(t["scenario"], t["mode"]): t for t in data["traces"]}

    old, new = index(base), index(head)
    keys = list(dict.fromkeys([*old, *new]))
    rows = []
    for name, mode in keys:
        row = Row(name, mode, identical=None,
                  gated=mode == "off" or (mode == "on" and not gated_machine),
                  expected=any(e.covers(name, mode) for e in expect))
        if (name, mode) not in old or (name, mode) not in new:
            row.only_in = "head" if (name, mode) in new else "base"
            row.reason = not_replayed_reason(base if row.only_in == "head" else head, name, mode)
        else:
            row.rounds_moved = diff_entry(name, mode, old[name, mode], new[name, mode])
            row.identical = not row.rounds_moved
        rows.append(row)
    return rows


def not_replayed_reason(data: dict[str, Any], name: str, mode: str) -> str:
    """Why one tree's suite output has no trace of ``name`` in ``mode``: the first line of the
    error its ledger scenario raised (``not_built``), or the mode it could not run."""
    for item in data.get("not_built") or []:
        if item.get("scenario") == name:
            return (str(item.get("why") or "").strip().splitlines() or ["not built"])[0]
    if mode not in (data.get("modes") or [mode]):
        tree = data.get("sglang_src") or {}
        if tree.get("has_gate") is False:
            return (f"mode {mode} not run: sglang {data.get('sglang_version', '?')} has no "
                    f"exact-fill gate (schedule_policy._use_exact_chunk_fill, sglang >= 0.5.20)")
        return f"mode {mode} not run (this tree ran {', '.join(data.get('modes') or [])})"
    return "absent from this tree's replay, no error recorded"


def _side(tree: SglangTree, data: dict[str, Any]) -> dict[str, Any]:
    return {"version": data.get("sglang_version", tree.version), "commit": tree.commit,
            "dirty": tree.dirty, "path": str(tree.path), "has_gate": tree.has_gate,
            "adaptations": data.get("adaptations", []), "seconds": data.get("seconds")}


def print_table(result: dict[str, Any], rows: list[Row]) -> None:
    """One line per scenario and mode that moved, per scenario one tree did not replay (with that
    tree's reason), identical ones counted per mode."""
    from rich.console import Console
    from rich.table import Table

    base, head = result["base"], result["head"]
    table = Table(title=f"Admission head vs base: {base['version']} ({base['commit'] or 'no git'}) "
                        f"-> {head['version']} ({head['commit'] or 'no git'})")
    for column in ("scenario", "mode", "result", "gate", "first moved round / why not replayed"):
        table.add_column(column, no_wrap=column == "scenario")
    for row in rows:
        if row.identical is False:
            gate = "FAIL" if row.failing else ("expected" if row.expected else "reported")
            # the round that moved (the scenario and mode have their own columns)
            first = row.rounds_moved[0].removeprefix(f"{row.name} [{row.mode}]").lstrip(": ")
            table.add_row(row.name, row.mode, f"{len(row.rounds_moved)} moved", gate, first[:90])
    for (only_in, reason), modes in one_sided(rows).items():
        listed = [(name, "/".join(ms)) for name, ms in modes.items()]
        if len(listed) > MAX_LISTED:
            every = dict.fromkeys(m for ms in modes.values() for m in ms)
            listed = [(f"({len(listed)} scenarios)", "/".join(every))]
        for name, mode in listed:
            table.add_row(name, mode, f"only in {only_in}", "-",
                          f"not replayed on {'base' if only_in == 'head' else 'head'}: {reason}")
    for mode, counts in result["summary"].items():
        if counts["identical"]:
            table.add_row(f"({counts['identical']} scenarios)", mode, "identical", "-", "")
    Console(width=200).print(table)


MAX_LISTED = 10     # one-sided scenarios sharing a reason: listed by name up to this many


def one_sided(rows: list[Row]) -> dict[tuple[str, str], dict[str, list[str]]]:
    """Rows one tree did not replay, by (only_in, reason): scenario -> its modes, in order."""
    groups: dict[tuple[str, str], dict[str, list[str]]] = {}
    for row in rows:
        if row.only_in:
            key = (row.only_in, row.reason or "no reason recorded")
            groups.setdefault(key, {}).setdefault(row.name, []).append(row.mode)
    return groups


def summary(rows: list[Row]) -> dict[str, Any]:
    counts: dict[str, dict[str, int]] = {}
    for row in rows:
        per = counts.setdefault(row.mode, {"identical": 0, "moved": 0, "only_in_base": 0,
                                           "only_in_head": 0})
        key = (f"only_in_{row.only_in}" if row.only_in else
               ("identical" if row.identical else "moved"))
        per[key] += 1
    return counts


# A failure line of the admission checks starts with its scenario and mode (checks._where).
_FAILURE_WHERE = re.compile(r"^(?P<scenario>\S+) \[(?P<mode>[a-z]+)\]")


def lost_scenarios(base: dict[str, Any], head: dict[str, Any]) -> list[str]:
    """Ledger scenarios the base tree builds and the head does not (``not_built``: its pools or
    budgets raised): a head failure, so a change that breaks them cannot pass as "only in base"."""
    unbuilt = {item["scenario"]: item.get("why", "") for item in head.get("not_built") or []
               if "scenario" in item}
    base_unbuilt = {item.get("scenario") for item in base.get("not_built") or []}
    return [f"{sid} [off] ledger scenario not built on the head tree, built on the base: {why}"
            for sid, why in unbuilt.items() if sid not in base_unbuilt]


def invariant_failures(base: dict[str, Any], head: dict[str, Any],
                       expect: tuple[Expectation, ...] = ()) -> dict[str, Any]:
    """Each tree's own invariant failures (the suite's checks: forced rounds at the chunk, KV
    offsets page-ceiled, the gate closed off gfx95, ...). Every head failure gates unless an
    ``--expect-change`` covers its scenario and mode; one the base tree has too is marked
    ``pre_existing`` (still failing: the head must hold the invariant). The base's own list is
    reported, never gating."""
    base_lines = list(base.get("failures") or [])
    head_lines = list(head.get("failures") or []) + lost_scenarios(base, head)

    def expected(line: str) -> bool:
        where = _FAILURE_WHERE.match(line)
        return bool(where) and any(e.covers(where["scenario"], where["mode"]) for e in expect)

    head_rows = [{"failure": line, "pre_existing": line in base_lines,
                  "expected": expected(line)} for line in head_lines]
    return {"head": head_rows, "base": base_lines,
            "failing": [r["failure"] for r in head_rows if not r["expected"]]}


def run_ab(trees: dict[str, SglangTree], suite: AdmissionSuite, python: str,
           runner_class: RunnerClass, expect: tuple[Expectation, ...] = (),
           cache: dict[str, dict[str, Any]] | None = None) -> tuple[dict[str, Any], list[Row]]:
    """Replay ``suite`` on ``trees`` (``base``, ``head``; :func:`replay_trees`' ``cache``) and
    compare: the ``--json`` result and its rows. Raises ``AbError`` when a tree's replay fails
    (``sides`` names which)."""
    # A tree without the gate (before 0.5.20) can only run `off`; the rest is one-sided.
    modes = {side: [m for m in suite.modes if tree.has_gate or m == "off"]
             for side, tree in trees.items()}
    outputs = replay_trees(python, suite.path, trees, modes, cache)
    rows = compare(outputs["base"], outputs["head"], runner_class.gated, expect)
    failing = [row for row in rows if row.failing]
    invariants = invariant_failures(outputs["base"], outputs["head"], expect)
    result = {
        "base": _side(trees["base"], outputs["base"]),
        "head": _side(trees["head"], outputs["head"]),
        "runner_class": runner_class.name, "gated_machine": runner_class.gated,
        "expect_change": [str(e) for e in expect],
        "scenarios": [row.to_json() for row in rows],
        "summary": summary(rows),
        "failing": [f"{row.name} [{row.mode}]" for row in failing],
        "head_invariant_failures": invariants["head"],
        "base_invariant_failures": invariants["base"],
        "failing_invariants": invariants["failing"],
        "verdict": "FAIL" if failing or invariants["failing"] else "PASS",
    }
    return result, rows


def ab_main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    from servegate.admission.suite import SuiteError, load_suite
    from servegate.core.runner_classes import get
    from servegate.serve.detect import RunnerError, detect

    try:
        trees = {"base": resolve_tree(args.base, "--base"),
                 "head": resolve_tree(args.head, "--head")}
        suite = load_suite(args.suite)
        runner_class = get(detect(args.runner).runner_class)
    except (TreeError, SuiteError, RunnerError) as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    ids = [s.scenario_id for s in suite.scenarios]
    unmatched = [str(e) for e in args.expect_change
                 if not any(fnmatch.fnmatchcase(sid, e.pattern) for sid in ids)]
    if unmatched:
        print(f"{PROG}: error: --expect-change {', '.join(unmatched)}: no such scenario in "
              f"{args.suite} (ids look like {ids[0]})", file=sys.stderr)
        return EXIT_USAGE
    try:
        result, rows = run_ab(trees, suite, args.python, runner_class, args.expect_change)
    except AbError as err:
        print(f"{PROG}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    failing = [row for row in rows if row.failing]
    if args.json:
        print(json.dumps(result))
    else:
        print_table(result, rows)
        for row in failing:
            for line in row.rounds_moved:
                print(f"MOVED: {line}")
        for item in result["head_invariant_failures"]:
            state = ("expected" if item["expected"] else
                     "FAIL, pre-existing in base" if item["pre_existing"] else "FAIL")
            print(f"HEAD INVARIANT ({state}): {item['failure']}")
        for line in result["base_invariant_failures"]:
            print(f"base invariant (reported): {line}")
        for mode, counts in result["summary"].items():
            print(f"{mode}: " + ", ".join(f"{k} {v}" for k, v in counts.items() if v))
        gated = "off" + ("" if runner_class.gated else " and on")
        print(f"admission ab: {result['verdict']} ({len(failing)} {gated} scenarios moved without "
              f"--expect-change, {len(result['failing_invariants'])} head invariant failure(s); "
              f"runner class {runner_class.name})")
    return EXIT_FAIL if result["verdict"] == "FAIL" else EXIT_OK
