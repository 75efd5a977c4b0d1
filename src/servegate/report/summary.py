"""The ``## Verdict`` section of ``summary.md`` (replaced, never duplicated, on re-runs): the
terminal's shape (:mod:`servegate.report.headline`) with the checks as tables; also appended to
``$GITHUB_STEP_SUMMARY`` when set, so the verdict shows on the workflow run page."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from servegate.core.atomic import write_section
from servegate.report import attribution
from servegate.report import headline as text

if TYPE_CHECKING:
    from servegate.judge.checks import Check
    from servegate.judge.judgement import Judgement

HEADING = "## Verdict"
_ICON = {"pass": "pass", "improvement": "improvement", "regression": "**REGRESSION**",
         "inconclusive": "inconclusive", "error": "**ERROR**"}


def _pct(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{100 * value:+.1f}%" if signed else f"{100 * value:.1f}%"


def _cells(check: Check) -> tuple[str, str, str, str]:
    """(effect, interval, floor, MDE) as table cells."""
    iv = check.interval
    if iv is None:
        effect = interval = "-"
    elif iv.scale == "ratio":
        effect = f"{iv.estimate:.3f}"
        interval = f"[{iv.low:.3f}, {iv.high:.3f}]"
    else:
        effect = f"{100 * iv.estimate:+.2f} pp"
        interval = f"[{100 * iv.low:+.2f}, {100 * iv.high:+.2f}] pp"
    if check.floor is None:
        floor = "-"
    elif iv is not None and iv.scale == "difference":
        floor = f"{100 * check.floor:.1f} pp"
    else:
        floor = _pct(check.floor)
    mde = "-"
    if check.verdict == "inconclusive" and check.mde is not None:
        mde = f"{100 * check.mde:.1f}" + (" pp" if iv and iv.scale == "difference" else "%")
    return effect, interval, floor, mde


def _md(value: str) -> str:
    return value.replace("|", "/")


def _row(check: Check) -> str:
    """A row of the full table (every check)."""
    effect, interval, floor, mde = _cells(check)
    verdict = _ICON[check.verdict] + ("" if text.is_gated(check) else " (info)")
    return (f"| {verdict} | {check.kind} | {check.point} | {check.metric} | {effect} | "
            f"{interval} | {floor} | {mde} | {_md(check.reason)} |")


def _gated_row(check: Check) -> str:
    """A row of the gated table: the check's name says what was claimed."""
    effect, interval, floor, mde = _cells(check)
    return (f"| {_ICON[check.verdict]} | {_md(check.name)} | {effect} | {interval} | {floor} | "
            f"{mde} | {_md(check.reason)} |")


def render(judgement: Judgement) -> str:
    """Markdown for the verdict section (heading included, trailing newline)."""
    lines = [HEADING, "", f"**{text.status(judgement)}**: {text.why(judgement)}", ""]
    reference = text.reference_line(judgement)
    if reference:
        lines += [reference[0].upper() + reference[1:] + ".", ""]
    if judgement.baseline_file is not None:
        prov = (judgement.baseline or {}).get("provenance", {})
        lines += [f"Baseline `{judgement.baseline_file}` from `{prov.get('source_run')}` "
                  f"({prov.get('created_at')}, sglang {prov.get('sglang')}).", ""]
    gated = text.gated_checks(judgement)
    if gated:
        family = text.family_line(judgement)
        lines += [f"**{family[0].upper() + family[1:]}**", "",
                  "| verdict | check | ratio | interval | floor | MDE | note |",
                  "|---|---|---|---|---|---|---|"]
        lines += [_gated_row(check) for check in gated] + [""]
    for extra in (text.reported_line(judgement), text.guidance_line(judgement),
                  text.budget_line(judgement)):
        if extra:
            lines += [extra[0].upper() + extra[1:] + ".", ""]
    if judgement.notes:
        lines += [f"- {note}" for note in judgement.notes] + [""]
    attributed = attribution.lines(judgement.run)
    if attributed:
        lines += [f"**{attributed[0][0].upper() + attributed[0][1:]}**", ""]
        lines += [f"- {line.strip()}" for line in attributed[1:]] + [""]
    lines += [f"<details><summary>All {len(judgement.checks)} checks</summary>", "",
              "Ratio = current / reference (lower is better for latencies, higher for "
              "throughput and accuracy). A regression needs the whole interval past the floor; "
              "MDE = the smallest change this data would detect with 80% power; (info) = "
              "reported, not gated.", "",
              "| verdict | kind | point | metric | ratio | interval | floor | MDE | note |",
              "|---|---|---|---|---|---|---|---|---|"]
    lines += [_row(check) for check in judgement.checks]
    lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def write(judgement: Judgement) -> list[Path]:
    """Update ``summary.md`` in the run folder; append to ``$GITHUB_STEP_SUMMARY`` when set."""
    section = render(judgement)
    path = judgement.run_dir / "summary.md"
    write_section(path, HEADING, section)
    step_summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if step_summary:
        with Path(step_summary).open("a", encoding="utf-8") as handle:
            handle.write(section + "\n")
    return [path]
