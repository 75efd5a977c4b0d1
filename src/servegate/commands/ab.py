"""``servegate ab --base A --head B [--suite S] ...``: gate an sglang change, head vs base.

A and B are sglang trees (a checkout or an unpacked package). One run folder
(``results/<suite>-<runner>-ab-<stamp>/``): per repeat, every mode's server is started once per
tree, interleaved in a seeded order, on this machine, with the same prompts; the verdict pairs
head with base per point (``servegate.judge.ab``) and prints the same table, ``verdict.json``,
``junit.xml`` and exit codes as ``compare`` (0 pass, 1 regression, 2 error). Other options are
``servegate bench``'s.
"""

from __future__ import annotations

import sys

from servegate.commands import bench
from servegate.core.errors import EXIT_INFRA


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
