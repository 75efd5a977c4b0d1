"""``servegate accuracy``: GSM8K only, for a suite - a thin front for ``servegate bench``.

Starting servers per mode, the run folder and run.json belong to ``servegate.commands.bench``; this
command asks it to skip the performance points (``--accuracy-only``) so the two never diverge
in how a server is launched. bench stores each mode's ``run_gsm8k`` result in run.json, the
paired analysis in ``paired_accuracy`` and calls ``accuracy.report.append_summary``.
"""

from __future__ import annotations

import argparse

from servegate.commands import bench


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="servegate accuracy",
        description="GSM8K accuracy for a suite (per question, paired on/off). "
                    "Other options are passed through to `servegate bench`.")
    parser.add_argument("--suite", help="suite name or TOML path (default: cpu without a GPU)")
    parser.add_argument("--runner", help="runner class (default: detected)")
    parser.add_argument("--modes", help="comma-separated modes, e.g. off,forced")
    return parser


def main(argv: list[str]) -> int:
    args, rest = build_parser().parse_known_args(argv)
    forwarded = ["--accuracy-only"] + (["--suite", args.suite] if args.suite else [])
    if args.runner:
        forwarded += ["--runner", args.runner]
    if args.modes:
        forwarded += ["--modes", args.modes]
    return int(bench.main(forwarded + rest))
