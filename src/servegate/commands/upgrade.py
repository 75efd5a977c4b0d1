"""``servegate upgrade PATH...``: rewrite run.json files, baselines and golden traces to the
current schema version, atomically, as a reviewable diff (reading never needs it). A folder
means every such file below it. Exit 0 when every file was readable, 2 otherwise (each bad file
named with the field at fault)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from servegate.admission.golden import GOLDEN_FILE_SCHEMA, read_golden_file
from servegate.core.atomic import write_json, write_text
from servegate.core.errors import EXIT_INFRA, EXIT_OK, ServegateError
from servegate.core.results import RUN_SCHEMA, validate_run
from servegate.judge.baselines import BASELINE_SCHEMA, dumps_baseline, read_baseline


def kind_of(path: Path, data: object) -> str:
    """run | baseline | golden, from the file's name and content."""
    if path.name == "run.json":
        return "run"
    if isinstance(data, dict) and "scenarios" in data:
        return "golden"
    if isinstance(data, dict) and "provenance" in data and "points" in data:
        return "baseline"
    raise ServegateError(f"{path}: not a servegate run.json, baseline or golden trace")


def upgrade_file(path: Path) -> str:
    """Upgrade one file in place; returns what happened, for the log line."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ServegateError(f"{path}: cannot read as JSON ({err})") from err
    kind = kind_of(path, data)
    if kind == "run":
        found = RUN_SCHEMA.version_of(data, path)
        if found == RUN_SCHEMA.current:
            validate_run(data, path)
            return f"unchanged {path} (run.json schema {found})"
        write_json(path, validate_run(data, path))
        return f"upgraded {path}: run.json schema {found} -> {RUN_SCHEMA.current}"
    if kind == "baseline":
        document, found = read_baseline(path)
        if found == BASELINE_SCHEMA.current:
            return f"unchanged {path} (baseline schema {found})"
        write_text(path, dumps_baseline(document))
        return f"upgraded {path}: baseline schema {found} -> {BASELINE_SCHEMA.current}"
    read_golden_file(path)
    return f"unchanged {path} (golden trace schema {GOLDEN_FILE_SCHEMA.current})"


def _files(paths: list[Path]) -> Iterator[Path]:
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*.json")
                              if p.name == "run.json" or "baselines" in p.parts
                              or p.parent == path)
        else:
            yield path


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="servegate upgrade", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", type=Path,
                        help="run.json / baseline / golden trace files, or folders of them")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    code = EXIT_OK
    for path in _files(args.paths):
        try:
            print(upgrade_file(path))
        except ServegateError as err:
            print(f"servegate upgrade: {err}", file=sys.stderr)
            code = EXIT_INFRA
    return code
