"""``junit.xml``: one test case per gated check, so CI test views show what decides the exit
(regression -> <failure>, error -> <error>, inconclusive -> <skipped> with the reason); checks
reported but not gated are <property> entries, <system-out> the terminal's verdict block."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

from servegate.core.atomic import write_text
from servegate.report import headline as text

if TYPE_CHECKING:
    from servegate.judge.checks import Check
    from servegate.judge.judgement import Judgement


def property_value(check: Check) -> str:
    """``inconclusive 1.100 [1.060, 1.140]`` (a difference in points; the reason without an
    interval)."""
    iv = check.interval
    if iv is None:
        return f"{check.verdict}: {text.short_reason(check.reason)}".rstrip(": ")
    if iv.scale == "ratio":
        return f"{check.verdict} {iv.estimate:.3f} [{iv.low:.3f}, {iv.high:.3f}]"
    return (f"{check.verdict} {100 * iv.estimate:+.2f} pp "
            f"[{100 * iv.low:+.2f}, {100 * iv.high:+.2f}]")


def build(judgement: Judgement) -> ET.Element:
    suite = ET.Element("testsuite", name="servegate.commands.compare")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    reported = text.reported_checks(judgement)
    if reported:
        properties = ET.SubElement(suite, "properties")
        for check in reported:
            ET.SubElement(properties, "property", name=check.name, value=property_value(check))
    for check in text.gated_checks(judgement):
        case = ET.SubElement(suite, "testcase", name=check.name,
                             classname=f"servegate.{check.kind}.{check.point}")
        counts["tests"] += 1
        line = check.describe()
        if check.verdict == "error":
            ET.SubElement(case, "error", message=check.reason or "error",
                          type="infra").text = line
            counts["errors"] += 1
        elif check.verdict == "regression":
            ET.SubElement(case, "failure", message=check.reason or text.check_line(check),
                          type="regression").text = line
            counts["failures"] += 1
        elif check.verdict == "inconclusive":
            ET.SubElement(case, "skipped", message=f"inconclusive: {line}")
            counts["skipped"] += 1
        else:
            ET.SubElement(case, "system-out").text = line
    ET.SubElement(suite, "system-out").text = "\n".join(text.verdict_block(judgement))
    for key, value in counts.items():
        suite.set(key, str(value))
    root = ET.Element("testsuites", name="servegate")
    for key, value in counts.items():
        root.set(key, str(value))
    root.append(suite)
    return root


def write(judgement: Judgement) -> list[Path]:
    root = build(judgement)
    ET.indent(root)
    text = '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode")
    path = judgement.run_dir / "junit.xml"
    write_text(path, text + "\n")
    return [path]
