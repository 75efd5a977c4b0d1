"""What the admission stage alone says of a candidate sglang tree against a known-good one.

A bisect step asks this first, seconds on a CPU and no server: a candidate whose admission traces
moved, or whose own invariants fail where the good tree's hold, is decided here; one that does
not import is named (to be skipped, as ``git bisect skip``). Only ``identical`` leaves the
candidate to the serving stage.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servegate.admission.ab import AbError, run_ab
from servegate.core.paths import SUITES_DIR

IDENTICAL = "identical"                  # every scenario both trees replayed is the same
MOVED = "moved"                          # a trace moved, or a scenario the good tree replays is lost
INVARIANT_FAILED = "invariant_failed"    # the candidate fails an invariant the good tree holds
DOES_NOT_IMPORT = "does_not_import"      # not an sglang tree, or its scheduler does not import
REPLAY_FAILED = "replay_failed"          # it imports but the replay process failed (crash, timeout)
VERDICTS = (IDENTICAL, MOVED, INVARIANT_FAILED, DOES_NOT_IMPORT, REPLAY_FAILED)


@dataclass(frozen=True)
class Classification:
    verdict: str                                  # one of VERDICTS
    moved: tuple[str, ...] = ()                   # "scenario [mode]" whose traces moved or were lost
    invariant_failures: tuple[str, ...] = ()      # the candidate's, not pre-existing in the good tree
    reason: str | None = None                     # does_not_import / replay_failed: the error

    @property
    def decided(self) -> bool:
        """The admission stage judged the candidate (moved or failing): no server needed."""
        return self.verdict in (MOVED, INVARIANT_FAILED)

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "moved": list(self.moved),
                "invariant_failures": list(self.invariant_failures), "reason": self.reason}


def classify(result: dict[str, Any]) -> Classification:
    """Classify from an ``admission ab --json`` result with the good tree as base and the
    candidate as head. An invariant failure outranks a move; a scenario or mode only the good
    tree replays counts as moved (with the candidate's reason), one only the candidate has does not."""
    failures = tuple(item["failure"] for item in result.get("head_invariant_failures") or []
                     if not item.get("pre_existing"))
    moved = [f"{s['name']} [{s['mode']}]" for s in result["scenarios"] if s["identical"] is False]
    moved += [f"{s['name']} [{s['mode']}]: not replayed on the candidate: "
              f"{s['not_replayed']['reason']}"
              for s in result["scenarios"] if s.get("only_in") == "base"]
    verdict = INVARIANT_FAILED if failures else MOVED if moved else IDENTICAL
    return Classification(verdict, tuple(moved), failures)


def classify_tree(good: Path | str, candidate: Path | str, *,
                  suite: Path = SUITES_DIR / "admission.toml", python: str = sys.executable,
                  runner: str | None = None,
                  cache: dict[str, dict[str, Any]] | None = None) -> Classification:
    """Replay ``suite`` on both trees (each in its own process, both at once; ``python`` must
    have sglang's dependencies; ``cache``: :func:`servegate.admission.ab.replay_trees`') and
    classify the candidate. A good tree that does not resolve or replay raises
    ``TreeError``/``AbError``: nothing can be judged against it."""
    from servegate.admission.suite import load_suite
    from servegate.core.runner_classes import get
    from servegate.serve.detect import detect
    from servegate.serve.trees import TreeError, resolve_tree

    good_tree = resolve_tree(good, "--base")
    try:
        head = resolve_tree(candidate, "--head")
    except TreeError as err:
        return Classification(DOES_NOT_IMPORT, reason=str(err))
    try:
        result, _ = run_ab({"base": good_tree, "head": head}, load_suite(suite), python,
                           get(detect(runner).runner_class), cache=cache)
    except AbError as err:
        if "head" not in err.sides or "base" in err.sides:
            raise
        why = err.sides["head"]
        return Classification(DOES_NOT_IMPORT if "does not import" in why else REPLAY_FAILED,
                              reason=why)
    return classify(result)
