"""Paired analysis from run-folder records and the summary.md accuracy section."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar

from servegate.accuracy.report import (
    HEADING,
    RecordsError,
    append_summary,
    paired_analysis,
    paired_for_run,
)
from servegate.core.results import RUN_SCHEMA_VERSION


def write_records(run_dir: Path, mode: str, correct: list[bool]) -> None:
    (run_dir / "gsm8k").mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"id": i, "gold": str(i), "predicted": str(i) if c else None,
                         "correct": c, "output": f"#### {i if c else 'x'}"})
             for i, c in enumerate(correct)]
    (run_dir / "gsm8k" / f"{mode}.jsonl").write_text("\n".join(lines) + "\n")


def make_run(run_dir: Path) -> None:
    rng = np.random.default_rng(3)
    off = list(rng.random(200) < 0.6)
    forced = [(not c) if rng.random() < 0.08 else c for c in off]
    write_records(run_dir, "off", [bool(c) for c in off])
    write_records(run_dir, "forced", [bool(c) for c in forced])
    accuracy = {}
    for mode, outcome in (("off", off), ("forced", forced)):
        k = int(sum(outcome))
        accuracy[mode] = {"n": 200, "correct": k, "accuracy": k / 200, "wilson_low": 0.5,
                          "wilson_high": 0.7, "invalid": 200 - k, "extraction": "flexible",
                          "strict_accuracy": k / 200, "flexible_accuracy": k / 200,
                          "records": f"gsm8k/{mode}.jsonl", "dataset_sha256": "ab" * 32,
                          "shots": 5, "seed": 1234}
    (run_dir / "run.json").write_text(json.dumps(
        {"schema_version": RUN_SCHEMA_VERSION, "points": [], "accuracy": accuracy}))


def test_paired_analysis_reads_records(tmp_path: Path) -> None:
    make_run(tmp_path)
    p = paired_analysis(tmp_path, "forced", "off")
    table = np.array([[p["both_correct"], p["a_only"]], [p["b_only"], p["both_wrong"]]])
    assert table.sum() == 200 and p["discordant"] > 0
    assert p["mcnemar_p"] == pytest.approx(mcnemar(table, exact=True).pvalue)
    assert p["output_differs"] == p["discordant"]
    assert set(paired_for_run(tmp_path)) == {"forced_vs_off"}


def test_head_vs_base_run_pairs_within_and_across_trees(tmp_path: Path) -> None:
    """The head tree's own on-vs-off stays paired (its claim), plus head vs base per mode."""
    for label, outcome in (("head-off", [True, False, True]), ("head-on", [True, True, True]),
                           ("base-off", [False, False, True]), ("base-on", [True, False, True])):
        write_records(tmp_path, label, outcome)
    pairs = paired_for_run(tmp_path, ["head-off", "head-on", "base-off", "base-on"])
    assert set(pairs) == {"head-on_vs_head-off", "base-on_vs_base-off",
                          "head-off_vs_base-off", "head-on_vs_base-on"}
    assert (pairs["head-on_vs_head-off"]["a_only"], pairs["head-on_vs_head-off"]["b_only"]) == (1, 0)


def test_pairing_refuses_different_questions(tmp_path: Path) -> None:
    write_records(tmp_path, "off", [True, False, True])
    write_records(tmp_path, "on", [True, False])
    with pytest.raises(RecordsError, match="different question ids"):
        paired_analysis(tmp_path, "on", "off")


def test_malformed_record_names_file_line_and_field(tmp_path: Path) -> None:
    write_records(tmp_path, "off", [True])
    path = tmp_path / "gsm8k" / "off.jsonl"
    path.write_text(path.read_text() + '{"id": 1, "gold": "1", "correct": "yes"}\n')
    with pytest.raises(RecordsError, match=r"off.jsonl: line 2: field 'correct' must be bool"):
        paired_analysis(tmp_path, "off", "off")


def test_append_summary_adds_then_replaces_its_section(tmp_path: Path) -> None:
    make_run(tmp_path)
    (tmp_path / "summary.md").write_text("# Run\n\n## Performance\n\nperf table\n")
    append_summary(tmp_path)
    first = (tmp_path / "summary.md").read_text()
    assert first.startswith("# Run\n\n## Performance\n\nperf table\n\n" + HEADING)
    assert "| forced |" in first and "| off |" in first and "McNemar" in first
    # a later section (e.g. the judge's) survives a re-render, and the section appears once
    (tmp_path / "summary.md").write_text(first + "\n## Verdict\n\npass\n")
    append_summary(tmp_path)
    second = (tmp_path / "summary.md").read_text()
    assert second.count(HEADING) == 1 and second.endswith("## Verdict\n\npass\n")
    assert second.replace("\n## Verdict\n\npass\n", "").rstrip() == first.rstrip()
