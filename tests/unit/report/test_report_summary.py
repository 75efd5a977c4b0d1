"""Reports: junit.xml, verdict.json, summary.md, GITHUB_STEP_SUMMARY, plots, pytest-benchmark."""

from __future__ import annotations

from pathlib import Path

from report_builders import ROUTINE, cpu_like, seven_verdicts

from servegate.report import headline as hl
from servegate.report import summary


def test_summary_section_replaced_not_duplicated(tmp_path, monkeypatch):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    judgement = seven_verdicts(tmp_path / "run")
    path = tmp_path / "run" / "summary.md"
    path.write_text("# Run\n\n## Measure\n\ntable\n\n## Verdict\n\nstale\n\n## Accuracy\n\nacc\n")
    summary.write(judgement)
    summary.write(judgement)
    text = path.read_text()
    assert text.count("## Verdict") == 1
    assert "stale" not in text
    assert text.index("## Measure") < text.index("## Verdict") < text.index("## Accuracy")
    assert "acc" in text
    # the headline first, the gated table, then every check inside <details>
    assert text[text.index("## Verdict"):].splitlines()[2] == (
        "**REGRESSION (exit 1)**: a regression x1.200 [1.150, 1.250], floor 5 % "
        "(+1 more regression)")
    gated, full = text.split("<details><summary>All 7 checks</summary>")
    assert gated.count("| **REGRESSION** |") == 2           # the experiment does not gate
    assert full.count("| **REGRESSION** |") == 2 and full.count("| **REGRESSION** (info) |") == 1
    assert "| **ERROR** | an infra error | - | - | - | - | point missing |" in gated
    assert full.index("</details>") < full.index("## Accuracy")
    fresh = tmp_path / "fresh"
    summary.write(seven_verdicts(fresh))
    assert (fresh / "summary.md").read_text().startswith("## Verdict")


def test_github_step_summary_written_when_set(tmp_path, monkeypatch):
    target = tmp_path / "step_summary.md"
    target.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    summary.write(seven_verdicts(tmp_path / "run"))
    text = target.read_text()
    assert text.startswith("earlier step\n") and "## Verdict" in text


# summary.md's verdict section (servegate.report.summary) in the verdict block's shape: the
# headline, the gated table, one line for the rest, every note, then all checks collapsed.


def test_headline_and_gated_table_before_the_full_table(tmp_path: Path,
                                                        monkeypatch) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    j = cpu_like(tmp_path, notes=["prior decided: the assumed CV"])
    text = summary.render(j)
    lines = text.splitlines()
    assert lines[0] == "## Verdict"
    assert lines[2] == f"**{hl.status(j)}**: {hl.why(j)}"
    gated_head = lines.index("| verdict | check | ratio | interval | floor | MDE | note |")
    details = lines.index("<details><summary>All 30 checks</summary>")
    full_head = lines.index(
        "| verdict | kind | point | metric | ratio | interval | floor | MDE | note |")
    assert gated_head < details < full_head < lines.index("</details>")
    gated_rows = lines[gated_head + 2:lines.index("", gated_head)]
    assert [row.split(" | ")[1] for row in gated_rows] == [c.name for c in hl.gated_checks(j)]
    full_rows = [line for line in lines[full_head + 2:] if line.startswith("| ")]
    assert len(full_rows) == 30
    assert sum("(info)" in row for row in full_rows) == 22        # reported, not gated
    # the rest in one line, the guidance once, every note (routine ones too)
    assert f"{hl.reported_line(j)[0].upper()}{hl.reported_line(j)[1:]}." in lines
    assert sum(line.startswith("To decide") for line in lines) == 1
    for note in [*ROUTINE, "prior decided: the assumed CV"]:
        assert f"- {note}" in lines
    assert lines.index("- prior decided: the assumed CV") < details


def test_the_step_summary_gets_the_same_section(tmp_path: Path, monkeypatch) -> None:
    target = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    j = cpu_like(tmp_path / "run")
    summary.write(j)
    assert target.read_text() == summary.render(j) + "\n"
