"""``verdict.json``: the machine-readable verdict (overall + one entry per check).

Consumers (CI bots, dashboards) should read ``overall`` and ``exit_code`` for the decision and
``checks[*]`` for the reasons; see docs/judge.md for each field.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from servegate.core.atomic import write_json
from servegate.judge.checks import CHECK_KEYS

if TYPE_CHECKING:
    from servegate.judge.judgement import Judgement

VERDICT_SCHEMA_VERSION = 1
STATES = ("pass", "regression", "improvement", "inconclusive", "error")


def build(judgement: Judgement) -> dict[str, Any]:
    run = judgement.run or {}
    provenance = (judgement.baseline or {}).get("provenance", {})
    checks = [check.to_dict() for check in judgement.checks]
    return {
        "schema_version": VERDICT_SCHEMA_VERSION,
        "overall": judgement.overall,
        "exit_code": judgement.exit_code,
        "strict": judgement.strict,
        "run_dir": str(judgement.run_dir),
        "suite": run.get("suite"),
        "runner_class": run.get("runner_class"),
        "model_profile": run.get("model_profile"),
        "baseline": None if judgement.baseline_file is None else {
            "file": str(judgement.baseline_file),
            "created_at": provenance.get("created_at"),
            "source_run": provenance.get("source_run"),
            "sglang": provenance.get("sglang"),
            "sglang_commit": provenance.get("sglang_commit"),
        },
        "confidence": judgement.config.confidence,
        "family_size": judgement.family_size,
        "family": judgement.family or {
            "method": "bonferroni", "size": judgement.family_size,
            "checks": [c.name for c in judgement.checks if c.gate and c.primary]},
        "per_check_confidence": round(judgement.per_check_confidence, 8),
        "judge_settings": judgement.config.source,
        "seed": judgement.config.seed,     # this run's judge seed: re-judging reproduces it
        "notes": list(judgement.notes),
        "sequential": run.get("sequential"),     # looks taken, where the run stopped
        "noise_budget": list(judgement.budget),
        "counts": dict(sorted(Counter(
            c["verdict"] for c in checks if c["gate"]).items())),
        "checks": checks,
    }


def validate(doc: Any) -> None:
    """Raise ValueError naming the field when ``doc`` is not a verdict.json document."""
    if not isinstance(doc, dict):
        raise ValueError("verdict.json: top level must be an object")
    if doc.get("schema_version") != VERDICT_SCHEMA_VERSION:
        raise ValueError(f"verdict.json: schema_version must be {VERDICT_SCHEMA_VERSION}")
    if doc.get("overall") not in STATES:
        raise ValueError(f"verdict.json: overall must be one of {STATES}")
    if doc.get("exit_code") not in (0, 1, 2, 3):
        raise ValueError("verdict.json: exit_code must be 0, 1, 2 or 3")
    checks = doc.get("checks")
    if not isinstance(checks, list):
        raise ValueError("verdict.json: checks must be a list")
    for i, check in enumerate(checks):
        missing = [k for k in CHECK_KEYS if k not in check]
        if missing:
            raise ValueError(f"verdict.json: checks[{i}] lacks {', '.join(missing)}")
        if check["verdict"] not in STATES:
            raise ValueError(f"verdict.json: checks[{i}].verdict {check['verdict']!r}")
        interval = check["interval"]
        if interval is not None and (len(interval) != 2 or interval[0] > interval[1]):
            raise ValueError(f"verdict.json: checks[{i}].interval must be [low, high]")


def write(judgement: Judgement) -> list[Path]:
    path = judgement.run_dir / "verdict.json"
    doc = build(judgement)
    validate(doc)
    write_json(path, doc)
    return [path]
