"""junit.xml (servegate.report.junit): gated checks are the test cases, the rest properties."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from report_builders import check, cpu_like, difference, judgement, ratio, seven_verdicts

from servegate.report import headline as hl
from servegate.report import junit


def test_test_cases_are_the_gated_checks_and_the_rest_are_properties(tmp_path: Path) -> None:
    j = cpu_like(tmp_path)
    [path] = junit.write(j)
    suite = ET.parse(path).getroot().find("testsuite")
    assert [c.get("name") for c in suite.findall("testcase")] == [
        c.name for c in hl.gated_checks(j)]
    props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    assert list(props) == [c.name for c in hl.reported_checks(j)]
    assert props["off@c2 mean_ttft_ms vs baseline #0"] == "regression 1.400 [1.200, 1.600]"
    assert suite.get("tests") == "8" and suite.get("failures") == "0"
    assert suite.get("skipped") == "6" and suite.get("errors") == "0"
    # a skipped case says why; the suite's output is the verdict block, headline first
    skipped = suite.find("testcase/skipped")
    assert skipped.get("message").startswith("inconclusive: [INCONCLUSIVE] ")
    assert "would decide" in skipped.get("message")
    assert suite.find("system-out").text.splitlines() == hl.verdict_block(j)


def test_verdicts_map_to_junit_states(tmp_path: Path) -> None:
    checks = [check("ok", "pass", interval=ratio(1.0, 0.98, 1.02)),
              check("better", "improvement", interval=ratio(0.8, 0.78, 0.82)),
              check("slow", "regression", interval=ratio(1.2, 1.15, 1.25)),
              check("broken", "error", interval=None, reason="point missing"),
              check("wide", "inconclusive", interval=ratio(1.0, 0.8, 1.3)),
              check("info", "regression", interval=ratio(1.3, 1.2, 1.4), gate=False,
                    primary=False),
              check("no interval", "inconclusive", interval=None, gate=False, primary=False,
                    reason="summary-only metric; one repeat"),
              check("acc", "inconclusive", metric="accuracy", gate=False, primary=False,
                    interval=difference(-0.004, -0.019, 0.011), floor=0.01)]
    root = junit.build(judgement(tmp_path, checks))
    suite = root.find("testsuite")
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert list(cases) == ["ok", "better", "slow", "broken", "wide"]
    assert cases["slow"].find("failure").get("type") == "regression"
    assert cases["broken"].find("error").get("message") == "point missing"
    assert cases["wide"].find("skipped") is not None
    assert [child.tag for child in cases["ok"]] == ["system-out"]
    assert [child.tag for child in cases["better"]] == ["system-out"]
    props = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    assert props == {"info": "regression 1.300 [1.200, 1.400]",
                     "no interval": "inconclusive: summary-only metric",
                     "acc": "inconclusive -0.40 pp [-1.90, +1.10]"}
    assert (root.get("tests"), root.get("failures"), root.get("errors"),
            root.get("skipped")) == ("5", "1", "1", "1")


# Reports: junit.xml, verdict.json, summary.md, GITHUB_STEP_SUMMARY, plots, pytest-benchmark.


def test_junit_counts_and_parses(tmp_path):
    [path] = junit.write(seven_verdicts(tmp_path / "run"))
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == 6                                    # the gated checks
    assert "an experiment" not in {case.get("name") for case in cases}
    assert len(suite.findall("testcase/failure")) == 2        # the experiment does not fail
    assert len(suite.findall("testcase/error")) == 1
    assert len(suite.findall("testcase/skipped")) == 1
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"),
            suite.get("skipped")) == ("6", "2", "1", "1")
    skipped = suite.find("testcase/skipped")
    assert "MDE" in skipped.get("message") and "inconclusive" in skipped.get("message")
    # the experiment is reported as a property of the suite: verdict, ratio, interval
    [prop] = suite.findall("properties/property")
    assert (prop.get("name"), prop.get("value")) == ("an experiment",
                                                     "regression 1.100 [1.060, 1.140]")
    assert suite.find("system-out").text.startswith("REGRESSION (exit 1): a regression x1.200")
