"""``python tools/mutation.py`` (``nox -s mutation``): the mutation score of the gate's core.

Development tooling, not part of the installed package: it runs from a checkout.

Runs mutmut (configured in ``pyproject.toml`` ``[tool.mutmut]``: which modules, the unit tier as
the test command) from the repository root, then reads mutmut's own verdicts back through
``mutmut results --all true`` (one ``    <mutant>: <status>`` line per mutant) and summarises
them per module: mutants, killed, survived, equivalent. Prints the surviving mutants per module
(``mutmut show <name>`` prints one's diff) and writes
``results/mutation-<UTC stamp>/summary.json`` atomically; the last output line is that folder.

- ``killed``: a test failed (mutmut's ``killed``), or the mutant hung (``timeout``) or crashed
  the interpreter (``segfault``): each is a test run that did not pass.
- ``survived``: every test that ran passed (``survived``), or no test executes the mutated
  function at all (``no tests``): both are code whose breakage nothing notices.
- ``equivalent``: lines marked ``# pragma: no mutate`` in the module (mutmut generates no
  mutant there), each with its reason on the line: behaviour no test can tell apart.
- anything else (``not checked``, ``suspicious``, ``skipped``, ...) is counted in ``mutants``
  and listed as ``other``, so an interrupted run never looks like a clean one.

Exit 0 when every module has at most ``--max-survived`` (default 10 %) surviving mutants and
every mutant was checked, 1 otherwise (or when mutmut failed), 2 for bad input.
``--changed REF`` mutates only the listed modules that differ from the git ref ``REF``
(nothing to do when none does); ``--fresh`` drops
the ``mutants/`` cache first (the authoritative number: mutmut otherwise reuses verdicts of
functions whose source did not change, and re-tests only the survivors). With ``--modules`` or
``--changed`` mutmut re-tests every mutant it is named, killed ones too; ``--resume`` names only
those not killed yet (new, survived, no tests): a killed verdict stands while tests are only
added. Mutants of code changed since the cache get their names in that run and are tested in a
second pass; anything left shows as "not checked" in the summary, never as killed.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from servegate.core import atomic
from servegate.core.errors import EXIT_INFRA, EXIT_OK

# the checkout this file is in (tools/ beside src/): mutmut runs from its root
REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = REPO_ROOT / "results"

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

EXIT_SURVIVORS = 1
PRAGMA = "# pragma: no mutate"
KILLED = frozenset({"killed", "timeout", "segfault"})
SURVIVED = frozenset({"survived", "no tests"})
# ``    servegate.measure.logparse.x_alignment__mutmut_12: survived``
RESULT_LINE = re.compile(r"^\s+(?P<name>\S+__mutmut_\d+): (?P<status>[a-z][a-z ]*)$")


class MutationError(Exception):
    """mutmut's configuration or output is not what this summary understands."""


@dataclass
class ModuleScore:
    path: str
    mutants: int = 0
    killed: int = 0
    survived: int = 0
    equivalent: int = 0
    other: int = 0
    surviving: list[str] = field(default_factory=list)

    @property
    def survived_fraction(self) -> float:
        return self.survived / self.mutants if self.mutants else 0.0


def configured_modules(root: Path = REPO_ROOT) -> list[str]:
    """The module files ``[tool.mutmut] only_mutate`` selects, repo-relative, sorted."""
    try:
        config = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["mutmut"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as err:
        raise MutationError(f"{root / 'pyproject.toml'}: no [tool.mutmut] table ({err})") from err
    sources = [Path(p) for p in config.get("source_paths", [])]
    patterns = config.get("only_mutate", [])
    found = set()
    for source in sources:
        for path in sorted((root / source).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if any(fnmatch.fnmatch(rel, pattern) for pattern in patterns):
                found.add(rel)
    return sorted(found)


def module_of_mutant(name: str) -> str:
    """``servegate.measure.logparse.x_alignment__mutmut_3`` -> ``servegate.measure.logparse``
    (methods: ``servegate.plan.xǁPlannedPointǁlabel__mutmut_1``)."""
    parts = name.split(".")
    for index in range(len(parts) - 1, 0, -1):
        if parts[index].startswith(("x_", "xǁ")):
            return ".".join(parts[:index])
    raise MutationError(f"mutant name {name!r} names no function (mutmut's naming changed?)")


def dotted(path: str) -> str:
    """``src/servegate/measure/logparse.py`` -> ``servegate.measure.logparse`` (mutmut's names
    drop the ``src.`` prefix and a package's ``__init__``)."""
    module = path.removesuffix(".py").replace("/", ".")
    module = module.removeprefix("src.")
    return module.removesuffix(".__init__")


def parse_results(text: str) -> dict[str, str]:
    """mutant name -> status from ``mutmut results --all true``; a line that is neither blank
    nor a result is an error (the format changed: never guess)."""
    statuses: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        match = RESULT_LINE.match(line)
        if match is None:
            raise MutationError(f"unexpected line in `mutmut results` output: {line!r}")
        statuses[match["name"]] = match["status"]
    return statuses


def count_pragmas(source: str) -> int:
    return sum(1 for line in source.splitlines() if PRAGMA in line)


def summarise(statuses: dict[str, str], modules: list[str],
              root: Path = REPO_ROOT) -> list[ModuleScore]:
    """One score per listed module (a module without mutants scores 0 of 0)."""
    by_module = {dotted(path): ModuleScore(path) for path in modules}
    for name, status in sorted(statuses.items()):
        score = by_module.get(module_of_mutant(name))
        if score is None:
            continue                      # a module no longer listed: not part of this score
        score.mutants += 1
        if status in KILLED:
            score.killed += 1
        elif status in SURVIVED:
            score.survived += 1
            score.surviving.append(f"{name} ({status})" if status != "survived" else name)
        else:
            score.other += 1
    for score in by_module.values():
        score.equivalent = count_pragmas((root / score.path).read_text())
    return list(by_module.values())


def summary_document(scores: list[ModuleScore], **run_info: Any) -> dict[str, Any]:
    return {**run_info,
            "modules": [{k: v for k, v in asdict(s).items() if k != "surviving"}
                        | {"surviving": list(s.surviving)} for s in scores]}


def report_lines(scores: list[ModuleScore], max_survived: float) -> list[str]:
    lines = []
    for s in scores:
        if s.surviving:
            lines.append(f"{s.path}: {len(s.surviving)} surviving")
            lines += [f"  {name}" for name in s.surviving]
    width = max((len(s.path) for s in scores), default=10)
    lines.append(f"{'module':<{width}}  mutants  killed  survived  equivalent  other  survived%")
    for s in scores:
        flag = ("  OVER" if s.survived_fraction > max_survived else "") + \
            ("  UNFINISHED" if s.other else "")
        lines.append(f"{s.path:<{width}}  {s.mutants:>7}  {s.killed:>6}  {s.survived:>8}  "
                     f"{s.equivalent:>10}  {s.other:>5}  {s.survived_fraction:>8.1%}{flag}")
    return lines


def changed_modules(modules: list[str], ref: str, root: Path = REPO_ROOT) -> list[str]:
    """The listed modules that differ from git ref ``ref`` (committed or not)."""
    out = subprocess.run(["git", "-C", str(root), "diff", "--name-only", ref, "--"],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise MutationError(f"--changed {ref}: git diff failed: {out.stderr.strip()}")
    changed = set(out.stdout.split())
    untracked = subprocess.run(["git", "-C", str(root), "ls-files", "--others",
                                "--exclude-standard"], capture_output=True, text=True,
                               check=False).stdout.split()
    return [m for m in modules if m in changed or m in untracked]


def selected_modules(modules: list[str], wanted: list[str]) -> list[str]:
    """The listed modules named in ``wanted`` (paths as listed, e.g.
    ``src/servegate/judge/stats.py``), in the listed order; a name not listed is an error."""
    unknown = sorted(set(wanted) - set(modules))
    if unknown:
        raise MutationError(f"--modules: not in [tool.mutmut] only_mutate: {', '.join(unknown)}")
    return [m for m in modules if m in wanted]


def unkilled(statuses: dict[str, str], globs: list[str]) -> list[str]:
    """The mutants matching ``globs`` without a kill verdict (in mutmut's order)."""
    return [n for n, s in statuses.items()
            if s not in KILLED and any(fnmatch.fnmatch(n, g) for g in globs)]


def _mutmut(args: list[str], root: Path, capture: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mutmut", *args], cwd=root, text=True,
                          capture_output=capture, check=False)


def _globs(modules: list[str]) -> list[str]:
    return [f"{dotted(m)}.*" for m in modules]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/mutation.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-children", type=int, default=2,
                        help="parallel mutant workers (default 2)")
    parser.add_argument("--max-survived", type=float, default=0.10,
                        help="highest surviving fraction a module may have (default 0.10)")
    parser.add_argument("--changed", metavar="REF",
                        help="only the listed modules that differ from this git ref")
    parser.add_argument("--modules", nargs="+", metavar="PATH",
                        help="only these listed modules (e.g. src/servegate/judge/stats.py)")
    parser.add_argument("--fresh", action="store_true",
                        help="drop the mutants/ cache first (every mutant re-tested)")
    parser.add_argument("--resume", action="store_true",
                        help="with --modules: test only the mutants mutmut has not killed yet "
                             "(new, survived, no tests); the killed ones' verdicts stand")
    parser.add_argument("--results-dir", type=Path, default=RESULTS_DIR)
    parser.add_argument("--summary-only", action="store_true",
                        help="do not run mutmut; summarise the verdicts already in mutants/")
    args = parser.parse_args(argv)
    root = REPO_ROOT
    try:
        modules = configured_modules(root)
        if args.modules:
            modules = selected_modules(modules, args.modules)
        if args.changed:
            modules = changed_modules(modules, args.changed, root)
            if not modules:
                print(f"mutation: no listed module differs from {args.changed}; nothing to do")
                return EXIT_OK
    except MutationError as err:
        print(f"mutation: {err}", file=sys.stderr)
        return EXIT_INFRA
    started = time.monotonic()
    if not args.summary_only:
        if args.fresh:
            shutil.rmtree(root / "mutants", ignore_errors=True)
        cached = (root / "mutants").is_dir()
        run_args = ["run", "--max-children", str(args.max_children)]
        # Named mutants are re-tested even when mutmut has a verdict; unnamed, only new ones.
        narrowed = bool(args.changed or args.modules)
        names = _globs(modules) if narrowed else []
        if args.resume and cached and narrowed:
            names = unkilled(_statuses(root), names)
            print(f"mutation: --resume: {len(names)} mutants not killed yet", flush=True)
            if not names:
                args.summary_only = True
        first = _mutmut(run_args + names, root) if names or not narrowed else None
        if first is not None and first.returncode != 0:
            print(f"mutation: mutmut run exited {first.returncode}", file=sys.stderr)
            return EXIT_SURVIVORS
        if args.resume and first is not None:
            # mutants of functions changed since the cache got their names in that run
            named = set(names)
            fresh = [n for n in unkilled(_statuses(root), _globs(modules)) if n not in named]
            if fresh:
                print(f"mutation: --resume: {len(fresh)} mutants of changed code", flush=True)
                first = _mutmut(run_args + fresh, root)
                if first.returncode != 0:
                    print(f"mutation: mutmut run exited {first.returncode}", file=sys.stderr)
                    return EXIT_SURVIVORS
        survivors = [n for n, s in _statuses(root).items()
                     if s in SURVIVED and any(fnmatch.fnmatch(n, g) for g in _globs(modules))]
        if survivors and cached and not narrowed:
            # Verdicts from an earlier run: re-test the survivors against today's tests.
            again = _mutmut(run_args + survivors, root)
            if again.returncode != 0:
                print(f"mutation: mutmut run (survivors) exited {again.returncode}",
                      file=sys.stderr)
                return EXIT_SURVIVORS
    try:
        statuses = _statuses(root)
        scores = summarise(statuses, modules, root)
    except MutationError as err:
        print(f"mutation: {err}", file=sys.stderr)
        return EXIT_INFRA
    wall = time.monotonic() - started
    for line in report_lines(scores, args.max_survived):
        print(line)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    run_dir = Path(args.results_dir) / f"mutation-{stamp}"
    atomic.write_json(run_dir / "summary.json", summary_document(
        scores, created_at=stamp, wall_time_s=round(wall, 1), max_survived=args.max_survived,
        changed_since=args.changed, modules_selected=bool(args.modules),
        command=["python", "tools/mutation.py", *(argv if argv is not None else sys.argv[1:])]))
    over = [s.path for s in scores if s.survived_fraction > args.max_survived]
    if over:
        print(f"mutation: more than {args.max_survived:.0%} surviving mutants in: "
              + ", ".join(over), file=sys.stderr)
    unfinished = [s.path for s in scores if s.other]
    if unfinished:
        print("mutation: mutants not checked (interrupted run?) in: " + ", ".join(unfinished),
              file=sys.stderr)
    print(run_dir, flush=True)
    return EXIT_SURVIVORS if over or unfinished else EXIT_OK


def _statuses(root: Path) -> dict[str, str]:
    out = _mutmut(["results", "--all", "true"], root, capture=True)
    if out.returncode != 0:
        raise MutationError(f"mutmut results exited {out.returncode}: {out.stderr.strip()}")
    return parse_results(out.stdout)


if __name__ == "__main__":
    sys.exit(main())
