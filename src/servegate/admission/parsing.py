"""The admission commands' argument parser: bad input exits 2 (usage), naming the option."""

from __future__ import annotations

import argparse
import sys

from servegate.core.errors import EXIT_INFRA as EXIT_USAGE


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
