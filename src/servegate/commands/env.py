"""``servegate env``: build (once) or locate the shared CPU sglang environment and print it.

Useful for running servegate outside nox, e.g.
``PYTHONPATH=src "$(servegate env)" -m servegate admission replay ...``. Exit 0 with the
interpreter path on stdout; with ``--check`` it only looks (exit 1 when not built yet);
exit 2 when building fails.
"""

from __future__ import annotations

import argparse
import json
import sys

from servegate.core.errors import EXIT_INFRA as EXIT_BUILD_FAILED
from servegate.core.errors import EXIT_REGRESSION as EXIT_MISSING  # 1: a failed check
from servegate.serve import envbuild


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="servegate env",
        description="Build (first time, a few minutes, ~6.7 GB) or locate the shared CPU sglang "
                    "environment keyed by ci/requirements-cpu.txt; print its python.")
    parser.add_argument("--check", action="store_true",
                        help="do not build: exit 1 when the environment is not built yet")
    parser.add_argument("--json", action="store_true",
                        help='print {"python", "env_dir", "built", "requirements"}')
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        env_dir = envbuild.cpu_env_dir()
        built = envbuild.is_complete(env_dir)
        if not built and not args.check:
            envbuild.ensure_cpu_env(log=lambda line: print(line, file=sys.stderr))
            built = True
    except envbuild.EnvBuildError as err:
        print(f"servegate env: {err}", file=sys.stderr)
        return EXIT_BUILD_FAILED
    python = envbuild.env_python(env_dir)
    if args.json:
        print(json.dumps({"python": str(python), "env_dir": str(env_dir), "built": built,
                          "requirements": str(envbuild.CPU_REQUIREMENTS)}))
    elif built:
        print(python)
    else:
        print(f"servegate env: not built yet: {env_dir} (run `servegate env` to build it)",
              file=sys.stderr)
    return 0 if built else EXIT_MISSING
