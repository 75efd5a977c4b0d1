"""``tools/mutation.py``: mutmut's own verdicts summarised per module (no mutmut run here)."""

from __future__ import annotations

import json
from pathlib import Path

import mutation
import pytest
from repo_files import REPO_ROOT

# What `mutmut results --all true` prints (mutmut 3.8.1), one line per mutant.
RESULTS = """\
    servegate.plan.x_build_plan__mutmut_1: killed
    servegate.plan.x_build_plan__mutmut_2: survived
    servegate.plan.xǁPlannedPointǁlabel__mutmut_1: timeout
    servegate.plan.x_total_points__mutmut_1: no tests
    servegate.measure.logparse.x_alignment__mutmut_3: killed
    servegate.measure.logparse.x_alignment__mutmut_4: segfault
    servegate.measure.logparse.x_alignment__mutmut_5: not checked
    servegate.other.x_f__mutmut_1: survived
"""


def _tree(tmp_path: Path) -> Path:
    (tmp_path / "src" / "servegate" / "measure").mkdir(parents=True)
    (tmp_path / "src" / "servegate" / "plan.py").write_text(
        "def build_plan():\n    return 1  # pragma: no mutate (the value is never read)\n")
    (tmp_path / "src" / "servegate" / "measure" / "logparse.py").write_text("X = 1\n")
    (tmp_path / "src" / "servegate" / "measure" / "__init__.py").write_text("")
    (tmp_path / "src" / "servegate" / "bench.py").write_text("Y = 2\n")
    (tmp_path / "pyproject.toml").write_text(
        '[tool.mutmut]\nsource_paths = ["src/servegate"]\n'
        'only_mutate = ["src/servegate/measure/*", "src/servegate/plan.py"]\n')
    return tmp_path


def test_parse_results_reads_every_line() -> None:
    statuses = mutation.parse_results(RESULTS)
    assert len(statuses) == 8
    assert statuses["servegate.plan.xǁPlannedPointǁlabel__mutmut_1"] == "timeout"
    assert statuses["servegate.plan.x_total_points__mutmut_1"] == "no tests"


def test_unknown_output_is_an_error_not_a_guess() -> None:
    with pytest.raises(mutation.MutationError, match="unexpected line"):
        mutation.parse_results(RESULTS + "12 mutants, 3 survived\n")


def test_configured_modules_follow_only_mutate(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    assert mutation.configured_modules(root) == [
        "src/servegate/measure/__init__.py", "src/servegate/measure/logparse.py",
        "src/servegate/plan.py"]


def test_summary_per_module(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    scores = mutation.summarise(mutation.parse_results(RESULTS),
                                mutation.configured_modules(root), root)
    by_path = {s.path: s for s in scores}
    plan = by_path["src/servegate/plan.py"]
    assert (plan.mutants, plan.killed, plan.survived, plan.equivalent, plan.other) == (4, 2, 2, 1, 0)
    assert plan.surviving == ["servegate.plan.x_build_plan__mutmut_2",
                              "servegate.plan.x_total_points__mutmut_1 (no tests)"]
    logparse = by_path["src/servegate/measure/logparse.py"]
    assert (logparse.mutants, logparse.killed, logparse.survived, logparse.other) == (3, 2, 0, 1)
    empty = by_path["src/servegate/measure/__init__.py"]
    assert (empty.mutants, empty.survived_fraction) == (0, 0.0)
    assert plan.survived_fraction == 0.5


def test_summary_document_and_report(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    scores = mutation.summarise(mutation.parse_results(RESULTS),
                                mutation.configured_modules(root), root)
    doc = json.loads(json.dumps(mutation.summary_document(scores, created_at="x")))
    assert doc["created_at"] == "x"
    first = next(m for m in doc["modules"] if m["path"] == "src/servegate/plan.py")
    assert {k: first[k] for k in ("path", "mutants", "killed", "survived", "equivalent")} == {
        "path": "src/servegate/plan.py", "mutants": 4, "killed": 2, "survived": 2,
        "equivalent": 1}
    lines = mutation.report_lines(scores, 0.10)
    assert "src/servegate/plan.py: 2 surviving" in lines
    assert "  servegate.plan.x_build_plan__mutmut_2" in lines
    assert any(line.startswith("src/servegate/plan.py") and line.endswith("50.0%  OVER")
               for line in lines)
    assert not any("logparse" in line and "OVER" in line for line in lines)
    assert any("logparse" in line and line.endswith("UNFINISHED") for line in lines)
    assert not any(line.startswith("src/servegate/plan.py") and "UNFINISHED" in line
                   for line in lines)


@pytest.mark.parametrize(("path", "module"), [
    ("src/servegate/measure/logparse.py", "servegate.measure.logparse"),
    ("src/servegate/judge/__init__.py", "servegate.judge"),
    ("src/servegate/plan.py", "servegate.plan"),
])
def test_dotted_names_match_mutmut(path: str, module: str) -> None:
    assert mutation.dotted(path) == module


def test_module_of_a_method_mutant() -> None:
    assert mutation.module_of_mutant("servegate.plan.xǁPlannedPointǁlabel__mutmut_1") == \
        "servegate.plan"
    with pytest.raises(mutation.MutationError):
        mutation.module_of_mutant("servegate.plan.label__mutmut_1")


def test_the_repository_mutates_the_gates_core() -> None:
    """The modules issue 15 lists (and the registries the gate relies on), nothing else."""
    modules = mutation.configured_modules()
    listed = {"src/servegate/admission/checks.py", "src/servegate/admission/golden.py",
              "src/servegate/core/results.py", "src/servegate/core/atomic.py",
              "src/servegate/serve/detect.py",
              "src/servegate/plan/design.py", "src/servegate/plan/cost.py",
              "src/servegate/accuracy/extract.py",
              "src/servegate/admission/ledger_checks.py", "src/servegate/admission/ab.py",
              "src/servegate/serve/process.py", "src/servegate/commands/bench_looks.py",
              "src/servegate/accuracy/paired.py", "src/servegate/core/runner_classes.py",
              "src/servegate/core/metrics.py", "src/servegate/commands/update_baselines.py",
              "src/servegate/calibration/designs.py", "src/servegate/calibration/in_server.py",
              "src/servegate/calibration/pairs.py"}
    assert listed <= set(modules)
    assert {"src/servegate/measure/logparse.py", "src/servegate/measure/exactfill.py",
            "src/servegate/judge/stats.py"} <= set(modules)
    assert all(m in listed or m.startswith(("src/servegate/measure/", "src/servegate/judge/"))
               for m in modules)


def test_mutation_session_is_opt_in() -> None:
    """`nox -s mutation` exists, but neither the default sessions nor .ci/run start it."""
    repo = REPO_ROOT
    noxfile = (repo / "noxfile.py").read_text()
    assert "def mutation(session: nox.Session)" in noxfile
    assert 'nox.options.sessions = ["tests"]' in noxfile
    assert 'requires=["mutation"]' not in noxfile
    assert "mutation" not in (repo / ".ci" / "run").read_text()
    assert "mutants/" in (repo / ".gitignore").read_text().splitlines()


def test_changed_modules_are_the_listed_ones_git_sees_changed(tmp_path: Path) -> None:
    import subprocess

    root = _tree(tmp_path)
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    modules = mutation.configured_modules(root)
    assert mutation.changed_modules(modules, "HEAD", root) == []
    (root / "src" / "servegate" / "plan.py").write_text("def build_plan():\n    return 2\n")
    (root / "src" / "servegate" / "bench.py").write_text("Y = 3\n")          # not listed
    (root / "src" / "servegate" / "measure" / "new.py").write_text("Z = 1\n")  # untracked
    modules = mutation.configured_modules(root)
    assert mutation.changed_modules(modules, "HEAD", root) == [
        "src/servegate/measure/new.py", "src/servegate/plan.py"]
    with pytest.raises(mutation.MutationError, match="--changed no-such-ref: git diff failed"):
        mutation.changed_modules(modules, "no-such-ref", root)


def test_selected_modules_keep_the_listed_order_and_refuse_unlisted_names() -> None:
    modules = ["src/servegate/measure/logparse.py", "src/servegate/plan.py",
               "src/servegate/judge/stats.py"]
    assert mutation.selected_modules(modules, ["src/servegate/judge/stats.py",
                                               "src/servegate/measure/logparse.py"]) == [
        "src/servegate/measure/logparse.py", "src/servegate/judge/stats.py"]
    with pytest.raises(mutation.MutationError,
                       match=r"--modules: not in \[tool.mutmut\] only_mutate: src/servegate/x.py"):
        mutation.selected_modules(modules, ["src/servegate/plan.py", "src/servegate/x.py"])


def test_resume_names_only_the_selected_mutants_not_killed_yet() -> None:
    statuses = {"servegate.plan.x_a__mutmut_1": "killed", "servegate.plan.x_a__mutmut_2": "survived",
                "servegate.plan.x_a__mutmut_3": "not checked", "servegate.plan.x_b__mutmut_1": "timeout",
                "servegate.plan.x_b__mutmut_2": "no tests", "servegate.plan.x_b__mutmut_3": "segfault",
                "servegate.judge.stats.x_c__mutmut_1": "survived"}
    assert mutation.unkilled(statuses, mutation._globs(["src/servegate/plan.py"])) == [
        "servegate.plan.x_a__mutmut_2", "servegate.plan.x_a__mutmut_3",
        "servegate.plan.x_b__mutmut_2"]
    assert mutation.unkilled(statuses, []) == []
