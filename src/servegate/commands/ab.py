"""``servegate ab --base A --head B [--suite S] ...``: gate an sglang change, head vs base, on one
machine with the same prompts for both trees (a live pair where the runner holds two servers);
judged block by block by ``servegate.judge.ab`` with ``compare``'s table, reports and exit codes.
Other options are ``servegate bench``'s. docs/guide/ab.md."""

from __future__ import annotations

import argparse
import sys

from servegate.commands import bench
from servegate.core.errors import EXIT_INFRA


def build_parser() -> argparse.ArgumentParser:
    """bench's parser under ab's name: ab is bench with --base and --head required."""
    parser = bench.build_parser()
    parser.prog, parser.description = "servegate ab", __doc__.split("\n\n")[0]
    return parser


def main(argv: list[str]) -> int:
    if "-h" in argv or "--help" in argv:
        print(__doc__)
        return 0
    if not any(a == "--base" or a.startswith("--base=") for a in argv) or \
            not any(a == "--head" or a.startswith("--head=") for a in argv):
        print("servegate ab: --base PATH and --head PATH are required (sglang trees)",
              file=sys.stderr)
        return EXIT_INFRA
    return bench.main(argv)
