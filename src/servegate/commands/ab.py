"""``servegate ab --base A --head B [--suite S] ...``: gate an sglang change, head vs base.

A and B are sglang trees (a checkout or an unpacked package). One run folder
(``results/<suite>-<runner>-ab-<stamp>/``), on this machine, the same prompts for both trees: a
suite with a ``[design]`` runs each start as a *live pair* (base and head servers alive side by
side, their blocks alternating) where the runner holds two servers, else one start per tree,
and says so. The verdict pairs head with base per point, block by block (``servegate.judge.ab``),
with ``compare``'s table, reports and exit codes (0 pass, 1 regression, 2 error). Other options
are ``servegate bench``'s. docs/guide/ab.md.
"""

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
