"""``servegate preflight [--suite S] [--runner R] [--json]``: can each GPU suite see exact fill?

Exit 0 when every gating cell is ``ok``; 1 when a gating cell is ``blind``, ``capped``,
``misshaped`` or ``invalid`` (see :mod:`servegate.preflight.cells`); 2 for bad input (unknown
suite or runner, a malformed suite or profile), the message naming the file and key.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from servegate.admission.parsing import Parser
from servegate.config import load_suite, suite_path
from servegate.config._schema import ConfigError, load_toml
from servegate.config.suites import Suite
from servegate.core import runner_classes
from servegate.core.errors import EXIT_INFRA as EXIT_USAGE
from servegate.core.errors import EXIT_OK, ServegateError
from servegate.core.errors import EXIT_REGRESSION as EXIT_FAIL
from servegate.core.paths import SUITES_DIR


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="servegate preflight",
                description="Prove on CPU that GPU suites can see exact fill: the launch argv "
                            "against sglang's own parser, the admission budget, and the "
                            "client's load replayed through sglang's real PrefillAdder.")
    p.add_argument("--suite", action="append", default=None,
                   help="suite name or path (repeatable; default: every suite with GPU runners)")
    p.add_argument("--runner", action="append", default=None,
                   help="runner architecture or class (repeatable; default: the suite's runners)")
    p.add_argument("--models-dir", type=Path, default=None,
                   help="model profiles folder (default: the checkout's models/)")
    p.add_argument("--json", action="store_true", help="print the contract JSON object")
    p.add_argument("--sglang-src", type=Path, default=None, metavar="PATH",
                   help="check against this sglang tree (a checkout or an unpacked package), "
                        "first on the import path; default: the environment's sglang")
    return p


class PreflightInputError(ServegateError, ValueError):
    """Bad input: the message names the suite/profile file and key, or the option."""


def gpu_suites(suites_dir: Path = SUITES_DIR) -> list[Path]:
    """Serving suites (a [suite] table) that list a runner needing a real GPU (not cpu, not an
    emulated class such as cpu-gfx95: those are checked with --suite)."""
    found = []
    for path in sorted(suites_dir.glob("*.toml")):
        head = load_toml(path).get("suite")
        if isinstance(head, dict) and any(_is_gpu(r) for r in head.get("runners", [])):
            found.append(path)
    return found


def _is_gpu(entry: object) -> bool:
    """An unknown entry counts as a GPU one: load_suite then names it as an error."""
    try:
        return runner_classes.is_gpu(str(entry))
    except runner_classes.UnknownRunner:
        return True


def _covers(suite: Suite, runner: str) -> bool:
    """The suite lists ``runner``, or the architecture of the (real) class ``runner``."""
    return runner in suite.runners or (
        runner in runner_classes.REGISTRY and any(runner_classes.selects(entry, runner)
                                           for entry in suite.runners))


def _check_runner(runner: str) -> None:
    if runner not in (*runner_classes.ARCHES, *runner_classes.names()):
        raise PreflightInputError(
            f"--runner {runner!r}: expected an architecture ({', '.join(runner_classes.ARCHES)}) "
            f"or a runner class ({', '.join(runner_classes.names())})")


def _selection(args: argparse.Namespace) -> list[tuple[Suite, list[str]]]:
    """(suite, runners) to check. Explicit --suite: every --runner must be one it covers
    (default: all its runners); discovered suites: the --runner entries each covers (default:
    its non-cpu runners)."""
    for runner in args.runner or []:
        _check_runner(runner)
    if args.suite:
        paths = [suite_path(name) for name in args.suite]
        for path in paths:
            if not path.is_file():
                raise PreflightInputError(f"--suite: {path}: not found")
    else:
        paths = gpu_suites()
    selected = []
    for path in paths:
        suite = load_suite(path, args.models_dir)
        if not args.runner:         # named suites: all their runners; discovered: the GPU ones
            wanted = [r for r in suite.runners if args.suite or _is_gpu(r)]
        elif args.suite:
            for runner in args.runner:
                if not _covers(suite, runner):
                    raise PreflightInputError(f"{suite.source}: suite.runners "
                                              f"{list(suite.runners)} does not cover --runner "
                                              f"{runner!r}")
            wanted = list(args.runner)
        else:
            wanted = [r for r in args.runner if _covers(suite, r)]
        if wanted:
            selected.append((suite, wanted))
    if not selected:
        raise PreflightInputError("no suite x runner cell selected (suites: "
                                  f"{', '.join(str(p) for p in paths) or 'none'})")
    return selected


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    started = time.monotonic()
    try:
        selection = _selection(args)
    except (ConfigError, PreflightInputError) as err:
        print(f"servegate preflight: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    from servegate.admission.replay import load_sglang, load_sglang_tree
    from servegate.preflight.cells import ReplayCache, run_cell
    from servegate.preflight.report import contract, print_table
    from servegate.serve.trees import TreeError, resolve_tree

    try:
        tree = resolve_tree(args.sglang_src) if args.sglang_src else None
        sg = load_sglang_tree(tree) if tree else load_sglang()
    except TreeError as err:
        print(f"servegate preflight: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    cache: ReplayCache = {}
    cells = [run_cell(sg, suite, runner, cache) for suite, runner_list in selection
             for runner in runner_list]
    seconds = time.monotonic() - started
    if args.json:
        document = contract(sg.version, cells, seconds)
        if tree is not None:
            document["sglang_src"] = tree.record()
        print(json.dumps(document))
    else:
        print_table(sg.version, cells, seconds)
    return EXIT_FAIL if any(cell.fails for cell in cells) else EXIT_OK
