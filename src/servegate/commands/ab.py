"""``servegate ab --base A --head B [--suite S] ...``: gate an sglang change, head vs base.

A and B are sglang trees (a checkout or an unpacked package). One run folder
(``results/<suite>-<runner>-ab-<stamp>/``), on this machine, the same prompts for both trees.
A suite with a ``[design]`` (every mode inside each server start, switched in place between
blocks) runs each start as a *live pair* where the runner holds two servers (a CPU; a GPU
runner with two disjoint device sets of the suite's size, e.g. two TP4 servers on 8 GPUs): the
base and head servers alive side by side, their blocks alternating between them (the same
prompts for both blocks of a pair, the tree going first alternating), the run stopping if the
idle server ran a batch while the other measured, the GPU halves swapped between starts. A
runner too small for two servers runs one start per tree, one after the other, and says so
(run.json's ``design``: ``live_pair``, ``pair_note``). Suites with the older
``[suite].repeats``: per repeat, every mode's server is started once per tree, interleaved in a
seeded order. The verdict pairs head with base per point, block by block
(``servegate.judge.ab``), and prints the same table, ``verdict.json``, ``junit.xml`` and exit
codes as ``compare`` (0 pass, 1 regression, 2 error). Other options are ``servegate bench``'s.
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
