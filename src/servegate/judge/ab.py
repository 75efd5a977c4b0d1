"""Head vs base inside one run: the code under test (an sglang tree, ``head``) against its base,
measured on the same machine in the same hour with the same prompts. Its checks are the block
judge's (:mod:`servegate.judge.block_checks`); this module says what such a run is and how one
tree's side of it reads as a plain run (the exact-fill claims are the head tree's)."""

from __future__ import annotations

from servegate.core.results import Run


def is_ab(run: Run) -> bool:
    return bool(run.get("ab"))


def arm_view(run: Run, arm: str) -> Run:
    """The run as if only ``arm``'s servers had run (accuracy keyed by plain mode again)."""
    view = dict(run)
    view["points"] = [p for p in run.get("points", []) if p.get("arm") == arm]
    accuracy = run.get("accuracy") or {}
    view["accuracy"] = {label[len(arm) + 1:]: result for label, result in accuracy.items()
                        if label.startswith(f"{arm}-")}
    paired = run.get("paired_accuracy") or {}
    view["paired_accuracy"] = {
        key.replace(f"{arm}-", ""): value for key, value in paired.items()
        if key.count(f"{arm}-") == 2}
    return view  # type: ignore[return-value]
