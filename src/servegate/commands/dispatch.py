"""``servegate`` command line: one subcommand per pipeline stage, each owned by its own module.

Subcommand modules are imported lazily so ``servegate compare`` never pays for importing torch.
Every command module exposes ``main(argv: list[str]) -> int`` and ``build_parser()`` (the CLI
reference is generated from it). A :class:`~servegate.core.errors.ServegateError` a command lets
escape is caught here, once: one line on stderr and its ``exit_code`` (:mod:`servegate.core.errors`)."""

from __future__ import annotations

import importlib
import sys

from servegate.core.errors import EXIT_INFRA as EXIT_USAGE
from servegate.core.errors import ServegateError

COMMANDS: dict[str, tuple[str, str]] = {
    "admission": ("servegate.admission.cli", "replay the real PrefillAdder (replay, suite)"),
    "bench": ("servegate.commands.bench", "serve + measure a suite (TTFT/TPOT via sglang's client)"),
    "accuracy": ("servegate.commands.accuracy", "GSM8K accuracy for a suite, paired on/off"),
    "compare": ("servegate.commands.compare", "judge a run folder against baselines + A/B claims"),
    "update-baselines": ("servegate.commands.update_baselines", "store a complete run as a baseline"),
    "history": ("servegate.history.cli", "nightly history: add, report (change points), baseline"),
    "upgrade": ("servegate.commands.upgrade", "rewrite run/baseline/golden files to the current schema"),
    "calibrate": ("servegate.commands.calibrate", "simulate nights through the judge: false alarms, power"),
    "ab": ("servegate.commands.ab", "gate an sglang change: head vs base trees, interleaved"),
    "bisect": ("servegate.commands.bisect", "find a regression's first bad sglang commit"),
    "plan": ("servegate.commands.plan", "what a suite costs per runner: starts, minutes, GPU-minutes"),
    "preflight": ("servegate.preflight.cli", "predict a GPU suite's admission before booking a GPU"),
    "runners": ("servegate.commands.runners", "runner classes (GPU models), CI matrices"),
    "env": ("servegate.commands.env", "build/locate the shared CPU sglang environment; print its python"),
}


def _usage() -> str:
    lines = ["usage: servegate <command> [options]", "", "commands:"]
    lines += [f"  {name:<18} {about}" for name, (_, about) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"}:
        print(_usage())
        return 0 if args else EXIT_USAGE
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        print(f"servegate: unknown command {name!r}\n{_usage()}", file=sys.stderr)
        return EXIT_USAGE
    module = importlib.import_module(COMMANDS[name][0])
    try:
        return int(module.main(rest))
    except ServegateError as err:
        # Last line of defence: commands catch what they expect; a deliberate error that gets
        # this far still ends as its exit code and one line, never a traceback.
        print(f"servegate {name}: {err}", file=sys.stderr)
        return err.exit_code
