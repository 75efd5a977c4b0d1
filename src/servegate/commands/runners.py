"""``servegate runners``: the registered runner classes, or a workflow's GPU job matrix.

``servegate runners`` prints the table; ``--json`` the registry; ``--matrix nightly|premerge``
the ``include`` list the workflow's GPU matrix must hold (``tests/unit/ci/test_ci_workflows.py``
checks the files against it; paste it when a class or label changes).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from servegate.core import runner_classes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="servegate runners", description=__doc__)
    parser.add_argument("--json", action="store_true", help="the registry as JSON")
    parser.add_argument("--matrix", choices=("nightly", "premerge"),
                        help="print the workflow's GPU matrix include list (JSON)")
    parser.add_argument("--resolve", metavar="CLASS",
                        help="print label=, gpu=, image_var= lines for a class (for "
                             "$GITHUB_OUTPUT); exit 2 for a class with no CI runner")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.resolve:
        cls = runner_classes.get(args.resolve)
        if cls.arch == "cpu" or cls.emulated:     # a CPU job (cpu-gfx95: emulated gfx95)
            print("label=ubuntu-latest\ngpu=cpu\nimage_var=none")
        elif not cls.ci_labels:
            print(f"servegate runners: {cls.name} has no CI runner label", file=sys.stderr)
            return 2
        else:
            print(f"label={cls.ci_labels[0]}\ngpu={cls.arch}\nimage_var={cls.image_var}")
        return 0
    if args.matrix:
        print(json.dumps(runner_classes.ci_cells(args.matrix), indent=2))
    elif args.json:
        print(json.dumps({name: {**dataclasses.asdict(cls), "gate_modes": cls.gate_modes,
                                 "experiment_modes": cls.experiment_modes}
                          for name, cls in runner_classes.REGISTRY.items()}, indent=2))
    else:
        for cls in runner_classes.REGISTRY.values():
            gate = "gated" if cls.gated else "not gated"
            labels = ", ".join(cls.ci_labels) or "-"
            print(f"{cls.name:<10} {cls.arch:<7} {gate:<10} labels: {labels:<50} {cls.description}")
        print("gated: released sglang's exact-fill gate (gfx95 only); a tree's own gate per class: "
              "servegate preflight --sglang-src TREE (gate_open)")
    return 0
