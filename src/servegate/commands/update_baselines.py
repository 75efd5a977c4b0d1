"""``servegate update-baselines RUN_DIR [--force]``: store a complete run as the baseline.

Refuses incomplete or failed runs, and runs whose identity disagrees with the target baseline
(another runner class, model profile or suite; or a fingerprint that contradicts the run's
runner class) unless ``--force`` — and a forced update records why in its provenance. Prints old
-> new per metric with the ratio, so the same numbers appear in the terminal and in the diff.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from servegate.core.errors import EXIT_INFRA as EXIT_REFUSED
from servegate.core.errors import EXIT_OK
from servegate.core.results import Run, RunFolderError, load_run, unusable_reasons
from servegate.judge.baselines import (
    BaselineError,
    baseline_from_run,
    baseline_path,
    load_baseline,
    point_sort_key,
    run_identity,
    write_baseline,
)


def refusal_reasons(run: Run, target: Path, existing: dict[str, Any] | None) -> list[str]:
    """Why this run should not become the baseline at ``target`` (empty: fine)."""
    reasons = unusable_reasons(run)
    runner, model, suite = run_identity(run)
    fingerprint_runner = (run.get("fingerprint") or {}).get("runner_class")
    if fingerprint_runner and run.get("runner_class") and fingerprint_runner != runner:
        reasons.append(f"run.json runner_class {runner!r} contradicts its fingerprint "
                       f"runner_class {fingerprint_runner!r}")
    if existing is not None:
        for field, mine in (("runner_class", runner), ("model_profile", model),
                            ("suite", suite)):
            if existing.get(field) != mine:
                reasons.append(f"{field}: run has {mine!r} but baseline {target} is for "
                               f"{existing.get(field)!r}")
    expected_parts = (runner, model, f"{suite}.json")
    if tuple(target.parts[-3:]) != expected_parts:
        reasons.append(f"target {target} is not baselines/{runner}/{model}/{suite}.json "
                       "(another runner class, model or suite)")
    return reasons


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def diff_lines(old: dict[str, Any] | None, new: dict[str, Any]) -> list[str]:
    """``mode@cN metric: old -> new (xratio)`` for every metric, new/removed points marked."""
    def index(doc: dict[str, Any] | None) -> dict[tuple[str, int], dict[str, Any]]:
        return {(p["mode"], p["concurrency"]): p for p in (doc or {}).get("points", [])}

    before, after = index(old), index(new)
    lines = []
    for key in sorted(set(before) | set(after), key=point_sort_key):
        label = f"{key[0]}@c{key[1]}"
        old_metrics = before.get(key, {}).get("metrics", {})
        new_metrics = after.get(key, {}).get("metrics", {})
        for metric in sorted(set(old_metrics) | set(new_metrics)):
            a = old_metrics.get(metric, {}).get("value")
            b = new_metrics.get(metric, {}).get("value")
            if a is None:
                tail = "(new)"
            elif b is None:
                tail = "(removed)"
            else:
                tail = f"(x{b / a:.3f})" if a else "(old value 0)"
            lines.append(f"  {label:<12} {metric:<24} {_fmt(a):>10} -> {_fmt(b):<10} {tail}")
    old_acc, new_acc = (old or {}).get("accuracy", {}), new.get("accuracy", {})
    for mode in sorted(set(old_acc) | set(new_acc)):
        a = old_acc.get(mode, {}).get("accuracy")
        b = new_acc.get(mode, {}).get("accuracy")
        n = new_acc.get(mode, {}).get("n")
        tail = "(new)" if a is None else "(removed)" if b is None else f"({b - a:+.4f})"
        lines.append(f"  {mode:<12} {'accuracy':<24} {_fmt(a):>10} -> {_fmt(b):<10} {tail}"
                     f" n={n}")
    return lines


def update(run_dir: Path, *, force: bool = False, target: Path | None = None,
           root: Path | None = None, out: Any = None) -> int:
    """Store ``run_dir`` as its baseline; returns 0 on success, 2 when refused or unreadable."""
    out = out or sys.stdout
    try:
        run = load_run(run_dir)
        if target is None:
            target = baseline_path(*run_identity(run), root=root)
        existing = load_baseline(target) if target.is_file() else None
    except (RunFolderError, BaselineError) as err:
        print(f"update-baselines: {err}", file=sys.stderr)
        return EXIT_REFUSED
    reasons = refusal_reasons(run, target, existing)
    if reasons and not force:
        print(f"update-baselines: refusing to store {run_dir} as {target}:", file=sys.stderr)
        for reason in reasons:
            print(f"  - {reason}", file=sys.stderr)
        print("  (pass --force to store it anyway; the reasons are recorded in provenance)",
              file=sys.stderr)
        return EXIT_REFUSED
    new = baseline_from_run(run, run_dir, forced_reasons=reasons if force else None)
    print(f"update-baselines: {target} ({'replacing' if existing else 'new baseline'})",
          file=out)
    if reasons:
        print("  forced despite: " + "; ".join(reasons), file=out)
    for line in diff_lines(existing, new):
        print(line, file=out)
    try:
        write_baseline(target, new)
    except OSError as err:       # the old file (if any) is intact: write-then-rename
        print(f"update-baselines: cannot write {target}: {err}", file=sys.stderr)
        return EXIT_REFUSED
    print(f"wrote {target}", file=out)
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="servegate update-baselines", description=__doc__)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--force", action="store_true",
                        help="store an incomplete/mismatched run anyway (recorded in provenance)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="target file (default: baselines/<runner>/<model>/<suite>.json)")
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    return update(args.run_dir, force=args.force, target=args.baseline)
