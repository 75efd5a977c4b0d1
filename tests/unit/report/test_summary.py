"""summary.md's verdict section (servegate.report.summary) in the verdict block's shape: the
headline, the gated table, one line for the rest, every note, then all checks collapsed."""

from __future__ import annotations

from pathlib import Path

from report_builders import ROUTINE, cpu_like

from servegate.report import headline as hl
from servegate.report import summary


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
