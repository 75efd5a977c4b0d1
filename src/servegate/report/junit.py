"""``junit.xml``: one test case per check, so CI test views list every verdict.

regression -> <failure>, infrastructure/input error -> <error>, inconclusive -> <skipped> with
the reason (and the minimal detectable effect). Experiments never fail: their effect goes to
<system-out>.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import TYPE_CHECKING

from servegate.atomic import write_text

if TYPE_CHECKING:
    from servegate.judge.judgement import Judgement


def build(judgement: Judgement) -> ET.Element:
    suite = ET.Element("testsuite", name="servegate.compare")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for check in judgement.checks:
        case = ET.SubElement(suite, "testcase", name=check.name,
                             classname=f"servegate.{check.kind}.{check.point}")
        counts["tests"] += 1
        text = check.describe()
        if check.verdict == "error":
            ET.SubElement(case, "error", message=check.reason or "error",
                          type="infra").text = text
            counts["errors"] += 1
        elif check.verdict == "regression" and check.gate:
            ET.SubElement(case, "failure", message=check.reason or "regression",
                          type="regression").text = text
            counts["failures"] += 1
        elif check.verdict == "inconclusive":
            ET.SubElement(case, "skipped", message=f"inconclusive: {text}")
            counts["skipped"] += 1
        else:
            ET.SubElement(case, "system-out").text = text
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
