"""One run folder and the two files that describe it: ``run.json`` and ``summary.md``.

:class:`RunSession` is the only writer of both. It creates the folder (never reusing one),
rewrites ``run.json`` atomically after every change and re-renders ``summary.md`` from it, so a
run that crashes, is interrupted or is killed leaves a folder that says how far it got and why
it stopped (``complete`` is true only after :meth:`RunSession.complete`).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from servegate.accuracy.report import paired_for_run, render_section
from servegate.config import Suite
from servegate.core import atomic
from servegate.core.paths import REPO_ROOT
from servegate.core.results import RUN_SCHEMA_VERSION, AccuracyResult, Point, Run
from servegate.measure.summary import render
from servegate.serve.kernel_stack import file_sha256
from servegate.serve.process import signals_deferred
from servegate.serve.trees import git_output


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def servegate_commit() -> str | None:
    """The checkout's git commit (with ``-dirty`` when it has local changes), if it is one."""
    head = git_output(REPO_ROOT, "rev-parse", "HEAD")
    if head is None:
        return None
    status = git_output(REPO_ROOT, "status", "--porcelain", "--untracked-files=no")
    return head + ("-dirty" if status else "")


class RunSession:
    """Owns ``results/<suite>-<runner>-<UTC stamp>/``, its ``run.json`` and ``summary.md``."""

    def __init__(self, run_dir: Path, run: Run) -> None:
        self.run_dir = run_dir
        self.run = run
        self._saving = threading.Lock()     # two halves' servers record their blocks at once

    @classmethod
    def create(cls, results_dir: Path, suite: Suite, runner_class: str, argv: list[str],
               chunk_size: int, page_size: int | None,
               trees: dict[str, dict[str, Any]] | None = None) -> RunSession:
        """Make a new run folder (OSError when it cannot) and the run.json header.

        ``trees``: the sglang trees under test by arm (``""`` for ``--sglang-src``, ``base`` and
        ``head`` for a head-vs-base run, recorded as ``sglang_src`` / ``ab``)."""
        trees = trees or {}
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        kind = "-ab" if "head" in trees else ""
        run_dir = (Path(results_dir) / f"{suite.name}-{runner_class}{kind}-{stamp}").resolve()
        run_dir.mkdir(parents=True, exist_ok=False)
        run: Run = {
            "schema_version": RUN_SCHEMA_VERSION, "run_id": run_dir.name, "suite": suite.name,
            "model_profile": suite.model.name, "runner_class": runner_class,
            "command": ["servegate", "bench", *argv], "started_at": utc_now(), "complete": False,
            "chunk_size": chunk_size, "page_size": page_size,  # type: ignore[typeddict-item]
            "points": [], "load": suite.load.record(),
            # The judge must use the suite file that was run, not suites/<name>.toml.
            "suite_source": {"path": str(suite.source), "sha256": file_sha256(suite.source)},
            "judge_table": suite.judge_table,
            "servegate_commit": servegate_commit(),
        }
        if "" in trees:
            run["sglang_src"] = trees[""]
        if "head" in trees:
            run["ab"] = {"base": trees["base"], "head": trees["head"]}
        return cls(run_dir, run)

    def save(self) -> None:
        with self._saving:
            atomic.write_json(self.run_dir / "run.json", self.run)
            summary = render(self.run)
            if self.run.get("accuracy"):
                summary = (summary.rstrip("\n") + "\n\n"
                           + render_section(dict(self.run), self.run_dir))
            atomic.write_text(self.run_dir / "summary.md", summary)

    def update(self, **fields: Any) -> None:
        self.run.update(fields)  # type: ignore[typeddict-item]
        self.save()

    def add_point(self, point: Point) -> None:
        self.run["points"].append(point)
        self.save()

    def add_accuracy(self, mode: str, result: AccuracyResult) -> None:
        """A mode's GSM8K result, and the paired analysis over every mode measured so far."""
        self.run.setdefault("accuracy", {})[mode] = result
        self.run["paired_accuracy"] = paired_for_run(self.run_dir, list(self.run["accuracy"]))
        self.save()

    def complete(self) -> None:
        self.update(complete=True, finished_at=utc_now())

    def fail(self, cause: str, log_tail: str = "") -> None:
        """Record the cause; a further Ctrl-C/SIGTERM meanwhile is dropped (the caller exits)."""
        with signals_deferred(redeliver=False):
            self.run["complete"] = False
            self.run["error"] = cause
            self.run["finished_at"] = utc_now()
            with contextlib.suppress(OSError):
                self.save()
            if log_tail:
                print(f"--- last lines ---\n{log_tail}\n---", file=sys.stderr)
            print(f"servegate bench: {cause}", file=sys.stderr, flush=True)
