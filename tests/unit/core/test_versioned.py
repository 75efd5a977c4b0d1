"""Typed, versioned files: committed baselines and golden traces load through the versioned
loader; older files are upgraded in memory and by `servegate upgrade`; bad files name the field."""

from __future__ import annotations

import json

from servegate.admission.golden import read_golden_file
from servegate.core.paths import BASELINES_DIR
from servegate.judge.baselines import (
    BASELINE_SCHEMA_VERSION,
    read_baseline,
)


def test_every_committed_baseline_and_golden_trace_loads() -> None:
    files = sorted(BASELINES_DIR.rglob("*.json"))
    assert files
    for path in files:
        data = json.loads(path.read_text())
        if "scenarios" in data:
            assert read_golden_file(path)["scenarios"]
        else:
            document, found = read_baseline(path)
            assert found == BASELINE_SCHEMA_VERSION, f"{path}: run `servegate upgrade` on it"
            assert document["points"]
