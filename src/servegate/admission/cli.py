"""``servegate admission replay`` (one scenario, JSON contract) and ``servegate admission suite``."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import time
from pathlib import Path
from typing import Any

from servegate.admission.parsing import Parser
from servegate.admission.scenario import EXACT_FILL_MODES, Prompt, Scenario, ScenarioError
from servegate.core import atomic
from servegate.core.errors import EXIT_INFRA as EXIT_USAGE
from servegate.core.errors import EXIT_OK
from servegate.core.errors import EXIT_REGRESSION as EXIT_FAIL  # 1: a failed check
from servegate.core.paths import BASELINES_DIR, RESULTS_DIR, SUITES_DIR

_Parser = Parser


def _prompt_lens(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError as err:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}") from err
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"lengths must be positive integers, got {text!r}")
    return values


def _replay_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="servegate admission replay",
                description="Replay sglang's real PrefillAdder for one scenario.")
    p.add_argument("--page-size", type=int, required=True)
    p.add_argument("--chunk-size", type=int, required=True)
    p.add_argument("--prompt-lens", type=_prompt_lens, required=True,
                   help="comma-separated prompt lengths in tokens")
    p.add_argument("--exact-fill", choices=EXACT_FILL_MODES, default="off")
    p.add_argument("--no-radix", action="store_true", help="disable the radix cache")
    p.add_argument("--ignore-eos", action="store_true",
                   help="requests with ignore_eos (with --no-radix: add_one_req_ignore_eos)")
    p.add_argument("--max-prefill-tokens", type=int, default=None)
    p.add_argument("--truncation-align-size", type=int, default=None)
    p.add_argument("--json", action="store_true", help="print the contract JSON object")
    _add_sglang_src(p)
    return p


def _add_sglang_src(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sglang-src", type=Path, default=None, metavar="PATH",
                   help="the sglang under test: a checkout (its python/ is used) or an unpacked "
                        "package (a folder holding sglang/); goes first on the import path")


def _load_sglang(prog: str, src: Path | None, modes: list[str] | tuple[str, ...]) -> tuple[Any, Any]:
    """The sglang to replay (``--sglang-src`` first on the path) and its record; exit 2 on error."""
    from servegate.admission.replay import load_sglang, load_sglang_tree
    from servegate.serve.support import UnsupportedSglang, require_exact_fill
    from servegate.serve.trees import TreeError, resolve_tree

    if src is None:
        return load_sglang(), None
    try:
        tree = resolve_tree(src)
        require_exact_fill(modes, _support_info(tree))
        return load_sglang_tree(tree), tree
    except (TreeError, UnsupportedSglang) as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from err


def _support_info(tree: Any) -> Any:
    from servegate.serve.support import SglangInfo

    return SglangInfo(tree.package_dir, tree.version, tree.has_gate)


def replay_main(argv: list[str]) -> int:
    args = _replay_parser().parse_args(argv)
    scenario = Scenario(
        page_size=args.page_size, chunk_size=args.chunk_size,
        prompts=tuple(Prompt(n) for n in args.prompt_lens), radix=not args.no_radix,
        ignore_eos=args.ignore_eos, max_prefill_tokens=args.max_prefill_tokens,
        truncation_align_size=args.truncation_align_size)
    try:
        scenario.validate()
    except ScenarioError as err:
        print(f"servegate admission replay: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    from servegate.admission.replay import replay

    sg, tree = _load_sglang("servegate admission replay", args.sglang_src, [args.exact_fill])
    trace = replay(scenario, args.exact_fill, sg)
    contract = trace.contract(sg.version)
    if args.json:
        contract["sglang_src"] = tree.record() if tree is not None else None
        contract["adaptations"] = sg.adaptations
        print(json.dumps(contract))
        return EXIT_OK
    print(f"sglang {sg.version}, exact fill {args.exact_fill} (effective: {trace.effective})")
    for rnd in contract["rounds"]:
        print(f"  round: {rnd['extend_lens']} = {rnd['batch_tokens']} tokens"
              f"{' (saturated)' if rnd['saturated'] else ''}")
    return EXIT_OK


def _suite_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="servegate admission suite",
                description="Replay the admission matrix, check it, compare with golden traces.")
    p.add_argument("--suite", type=Path, default=SUITES_DIR / "admission.toml")
    p.add_argument("--golden", type=Path, default=BASELINES_DIR / "admission")
    p.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    p.add_argument("--update", action="store_true",
                   help="rewrite the golden traces from this run (atomically)")
    p.add_argument("--modes", type=_modes, default=None,
                   help="comma-separated exact-fill modes (default: the suite's)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (traces, failures, the tree) instead of the table; "
                        "no results folder")
    p.add_argument("--no-golden", action="store_true", help="skip the golden-trace comparison")
    _add_sglang_src(p)
    return p


def _modes(text: str) -> tuple[str, ...]:
    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    bad = [m for m in modes if m not in EXACT_FILL_MODES]
    if not modes or bad:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated modes from {', '.join(EXACT_FILL_MODES)}, got {text!r}")
    return modes


def suite_main(argv: list[str]) -> int:
    args = _suite_parser().parse_args(argv)
    from servegate.admission import golden, report
    from servegate.admission.ledger_spec import NOT_BUILT
    from servegate.admission.matrix import run_matrix
    from servegate.admission.replay import dllm_disables_exact_fill
    from servegate.admission.suite import SuiteError, load_suite

    try:
        suite = load_suite(args.suite)
    except SuiteError as err:
        print(f"servegate admission suite: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    modes = args.modes or suite.modes
    started = time.monotonic()
    sg, tree = _load_sglang("servegate admission suite", args.sglang_src, modes)
    imported = time.monotonic()
    matrix = run_matrix(suite.scenarios, modes, sg)
    traces, result = matrix.traces, matrix.checked
    not_built = [*matrix.not_built, *NOT_BUILT]
    if "forced" in modes and not dllm_disables_exact_fill():
        result.failures.append("dLLM config: forced exact fill stayed on with a DllmConfig")
    replayed = time.monotonic()

    command = ["nox", "-s", "admission", "--", *argv] if argv else ["nox", "-s", "admission"]
    diffs: list[str] = []
    if args.no_golden:
        pass
    elif args.update:
        written = golden.write_golden(args.golden, traces, sg.version, command)
        print(f"golden traces rewritten: {len(written)} files under {args.golden}")
    else:
        try:
            stored, _ = golden.load_golden(args.golden)
        except golden.GoldenError as err:
            print(f"servegate admission suite: error: {err}", file=sys.stderr)
            return EXIT_USAGE
        diffs = golden.diff_traces(stored, traces)

    if args.json:
        print(json.dumps({
            "sglang_version": sg.version,
            "sglang_src": tree.record() if tree is not None else None,
            "package_dir": sg.package_dir, "adaptations": sg.adaptations, "modes": list(modes),
            "traces": [{"scenario": t.scenario.scenario_id, "mode": t.mode, **golden.entry(t)}
                       for t in traces],
            "failures": result.failures, "findings": len(result.findings),
            "finding_details": result.findings,
            "ledger": [report.to_json() for report in matrix.ledger], "not_built": not_built,
            "golden_diffs": None if args.no_golden else diffs,
            "seconds": {"import": round(imported - started, 1),
                        "replay": round(replayed - imported, 1)}}))
        return EXIT_FAIL if result.failures or diffs else EXIT_OK
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    out_dir = args.results_dir / f"admission-{stamp}"
    header = (f"sglang {sg.version}; {len(traces)} replays in {replayed - imported:.1f} s "
              f"after a {imported - started:.1f} s import")
    report.print_table(traces)
    ledger_lines = report.ledger_lines(matrix.ledger, not_built)
    print("\n".join(ledger_lines))
    atomic.write_text(out_dir / "report.md",
                      report.markdown(traces, result.failures, result.findings, diffs, header)
                      + "\n".join(["", "## Ledger scenarios", "", *ledger_lines, ""]))
    atomic.write_json(out_dir / "traces.json",
                      {"sglang_version": sg.version, "traces": [t.contract(sg.version) for t in traces]})
    for title, items in (("FAILURE", result.failures), ("GOLDEN DIFF", diffs)):
        for item in items:
            print(f"{title}: {item}")
    print(f"{len(result.findings)} findings (by design; listed in report.md)")
    print(header)
    verdict = "FAIL" if result.failures or diffs else "PASS"
    print(f"admission suite: {verdict} ({len(result.failures)} failures, {len(diffs)} golden diffs)")
    print(out_dir)
    return EXIT_FAIL if verdict == "FAIL" else EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The three subcommands' parsers under one, for the CLI reference (main dispatches by name)."""
    from servegate.admission.ab import build_parser as ab_parser

    parser = argparse.ArgumentParser(prog="servegate admission")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, child in (("replay", _replay_parser()), ("suite", _suite_parser()), ("ab", ab_parser())):
        sub.add_parser(name, parents=[child], add_help=False, description=child.description)
    return parser


def main(argv: list[str]) -> int:
    from servegate.admission.ab import ab_main

    if not argv or argv[0] in {"-h", "--help"}:
        print("usage: servegate admission {replay,suite,ab} [options]")
        return EXIT_OK if argv else EXIT_USAGE
    commands = {"replay": replay_main, "suite": suite_main, "ab": ab_main}
    if argv[0] not in commands:
        print(f"servegate admission: unknown subcommand {argv[0]!r} (replay, suite, ab)",
              file=sys.stderr)
        return EXIT_USAGE
    return commands[argv[0]](argv[1:])
