"""``servegate admission ab`` through its entry point, in this process, without sglang.

The two replays need sglang (tests/real_sglang/admission/test_admission_ab.py runs them on real
trees). Here each tree is a minimal unpacked package (version, gate or none) and ``--python``
is a stand-in interpreter: a script that records how it was called (argv, PYTHONPATH) and prints
the suite JSON written beside its tree, as the real replay prints it. Everything else is the
real code: the child's command line and environment, the parsing of its output and its
failures, the comparison, the gate, the table, the JSON and the exit status."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from repo_files import SRC

from servegate.admission import ab
from servegate.admission.suite import load_suite
from servegate.core.paths import SUITES_DIR
from servegate.serve.trees import resolve_tree

SUITE = SUITES_DIR / "admission.toml"
IDS = [s.scenario_id for s in load_suite(SUITE).scenarios]

INTERPRETER = f"""#!{sys.executable}
import json, os, pathlib, sys, time
args = sys.argv[1:]
tree = pathlib.Path(args[args.index("--sglang-src") + 1])
out = json.loads((tree / "replay.json").read_text())
out["called"] = {{"argv": args, "pythonpath": os.environ.get("PYTHONPATH", "")}}
time.sleep(out.pop("sleep", 0))
print("replaying ...")
if not out.pop("silent", False):
    print(json.dumps(out))
for line in out.pop("stderr", []):
    print(line, file=sys.stderr)
sys.exit(out.pop("exit", 0))
"""


def _tree(root: Path, replay: dict[str, Any], version: str = "0.5.23", gate: bool = True) -> Path:
    pkg = root / "sglang"
    (pkg / "srt" / "managers").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_version.py").write_text(f'__version__ = "{version}"\n')
    body = "def _use_exact_chunk_fill() -> bool:\n    return False\n" if gate else "X = 1\n"
    (pkg / "srt" / "managers" / "schedule_policy.py").write_text(body)
    (root / "replay.json").write_text(json.dumps(replay))
    return root


def _python(tmp_path: Path) -> str:
    path = tmp_path / "stand-in-python"
    path.write_text(INTERPRETER)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _traces(lens: dict[tuple[str, str], list[int]]) -> list[dict[str, Any]]:
    return [{"scenario": sid, "mode": mode, "effective": mode == "forced",
             "rounds": [{"extend": [n], "tokens": n} for n in rounds]}
            for (sid, mode), rounds in lens.items()]


def _replay(lens: dict[tuple[str, str], list[int]], **extra: Any) -> dict[str, Any]:
    return {"traces": _traces(lens), "modes": ["off", "on", "forced"], "failures": [],
            "not_built": [], "sglang_version": "0.5.23", "adaptations": [], "seconds": 1.5,
            **extra}


# ---- the two replays: how each child is called, what is read back, what a failure says ------

def test_each_tree_is_replayed_by_its_own_child_with_the_tree_first_on_the_path(
        tmp_path: Path) -> None:
    base = resolve_tree(_tree(tmp_path / "base", _replay({})), "--base")
    head = resolve_tree(_tree(tmp_path / "head", _replay({}, seconds=2.5)), "--head")
    out = ab.replay_trees(_python(tmp_path), SUITE, {"base": base, "head": head},
                          {"base": ["off"], "head": ["off", "on"]})
    assert out["head"]["seconds"] == 2.5 and out["base"]["seconds"] == 1.5
    for side, tree, modes in (("base", base, "off"), ("head", head, "off,on")):
        called = out[side]["called"]
        assert called["argv"] == ["-m", "servegate", "admission", "suite", "--json",
                                  "--no-golden", "--sglang-src", str(tree.import_root),
                                  "--suite", str(SUITE), "--modes", modes]
        path = called["pythonpath"].split(os.pathsep)
        assert Path(path[0]) == tree.import_root and Path(path[1]).resolve() == SRC.resolve()


def test_a_cached_tree_is_not_replayed_again_and_a_failed_replay_is_not_cached(
        tmp_path: Path) -> None:
    """A bisect's cache: the good end replays once across its steps; the same tree with other
    modes, or a tree whose replay failed, replays again."""
    base = resolve_tree(_tree(tmp_path / "base", _replay({})), "--base")
    head = resolve_tree(_tree(tmp_path / "head", _replay({}, exit=3)), "--head")
    python, cache = _python(tmp_path), {}
    trees, modes = {"base": base, "head": head}, {"base": ["off"], "head": ["off"]}
    with pytest.raises(ab.AbError):
        ab.replay_trees(python, SUITE, trees, modes, cache)
    assert [key.split("|")[0] for key in cache] == [str(base.path)]
    first = cache[next(iter(cache))]
    (tmp_path / "head" / "replay.json").write_text(json.dumps(_replay({}, seconds=2.5)))
    (tmp_path / "base" / "replay.json").write_text(json.dumps(_replay({}, seconds=9.0)))
    out = ab.replay_trees(python, SUITE, trees, modes, cache)
    assert out["base"] is first and out["base"]["seconds"] == 1.5     # not replayed again
    assert out["head"]["seconds"] == 2.5 and len(cache) == 2
    again = ab.replay_trees(python, SUITE, trees, {"base": ["off", "on"], "head": ["off"]}, cache)
    assert again["base"]["seconds"] == 9.0 and again["head"] is out["head"]


def test_a_replay_that_fails_is_named_by_side_with_its_exit_code_and_last_lines(
        tmp_path: Path) -> None:
    """A child exiting 2 (its last three stderr lines, warnings.warn lines left out), one that
    printed no JSON; a child exiting 1 (invariant failures) with its JSON is a result."""
    err = ["early line", "Traceback (most recent call last):", "  warnings.warn('old')",
           "  File x, line 1",
           "ImportError: cannot import name 'PrefillAdder'", "  warnings.warn('late')"]
    base = resolve_tree(_tree(tmp_path / "base", _replay({}, exit=2, stderr=err)), "--base")
    head = resolve_tree(_tree(tmp_path / "head", _replay({}, silent=True)), "--head")
    with pytest.raises(ab.AbError) as info:
        ab.replay_trees(_python(tmp_path), SUITE, {"base": base, "head": head},
                        {"base": ["off"], "head": ["off"]})
    sides = {
        "base": f"--base {base.path}: replay exited 2: Traceback (most recent call last): | "
                f"  File x, line 1 | ImportError: cannot import name 'PrefillAdder'",
        "head": f"--head {head.path}: replay exited 0: no output"}
    assert info.value.sides == sides
    assert str(info.value) == f"{sides['base']}; {sides['head']}"
    failing = resolve_tree(_tree(tmp_path / "failing", _replay({}, exit=1)), "--head")
    out = ab.replay_trees(_python(tmp_path), SUITE, {"head": failing}, {"head": ["off"]})
    assert out["head"]["failures"] == []


def test_replays_that_hang_are_stopped_and_each_named(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ab, "CHILD_TIMEOUT_S", 1)
    trees = {side: resolve_tree(_tree(tmp_path / side, _replay({}, sleep=60)), f"--{side}")
             for side in ("base", "head")}
    with pytest.raises(ab.AbError) as info:
        ab.replay_trees(_python(tmp_path), SUITE, trees, {"base": ["off"], "head": ["off"]})
    assert info.value.sides == {side: f"--{side} {tree.path}: replay timed out after 1 s"
                                for side, tree in trees.items()}


# ---- the command: gate, table, JSON, exit status ---------------------------------------------

A, B, C = IDS[0], IDS[1], IDS[2]
INVARIANT = f"{C} [forced] round 0: exact-fill-fills-chunk: forced batch 2016, not the chunk 2048"
OLD = f"{A} [off] round 1: kv-page-ceiled: r1 grew the KV offset by 70"
EXCUSED = f"{B} [on]: exact fill effective without gfx95 (gate leaked)"


def _pair(tmp_path: Path) -> tuple[Path, Path]:
    """A moved in off and on, B identical, C only replayed by the head in forced; the head
    has an invariant failure of its own, one the base shares and one on B's on."""
    base = _replay({(A, "off"): [10, 5], (A, "on"): [10, 5], (B, "off"): [7], (B, "on"): [7],
                    (C, "off"): [3]}, failures=[OLD], adaptations=["PrefillAdder.x"],
                   modes=["off", "on"], sglang_version="0.5.22+asr-fix")
    head = _replay({(A, "off"): [10, 6], (A, "on"): [10, 6], (B, "off"): [7], (B, "on"): [7],
                    (C, "off"): [3], (C, "forced"): [4]}, failures=[INVARIANT, OLD, EXCUSED],
                   seconds=3.0)
    del head["sglang_version"], head["adaptations"]     # not reported: the tree's version, none
    return _tree(tmp_path / "base", base, "0.5.22"), _tree(tmp_path / "head", head)


def _main(tmp_path: Path, *args: str) -> int:
    base, head = _pair(tmp_path)
    return ab.ab_main(["--base", str(base), "--head", str(head), "--runner", "cpu",
                       "--python", _python(tmp_path), *args])


def test_the_json_result_names_both_trees_every_row_and_the_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(tmp_path, "--json", "--expect-change", f"{B}:on") == 1
    result = json.loads(capsys.readouterr().out)
    assert result["base"] == {"version": "0.5.22+asr-fix", "commit": None, "dirty": None,
                              "path": str(tmp_path / "base"), "has_gate": True,
                              "adaptations": ["PrefillAdder.x"], "seconds": 1.5}
    assert result["head"]["version"] == "0.5.23" and result["head"]["seconds"] == 3.0
    assert result["head"]["adaptations"] == []
    assert (result["runner_class"], result["gated_machine"]) == ("cpu", False)
    assert result["expect_change"] == [f"{B}:on"]
    assert result["summary"] == {
        "off": {"identical": 2, "moved": 1, "only_in_base": 0, "only_in_head": 0},
        "on": {"identical": 1, "moved": 1, "only_in_base": 0, "only_in_head": 0},
        "forced": {"identical": 0, "moved": 0, "only_in_base": 0, "only_in_head": 1}}
    assert result["failing"] == [f"{A} [off]", f"{A} [on]"]
    assert result["scenarios"][0] == {
        "name": A, "mode": "off", "identical": False,
        "rounds_moved": [f"{A} [off] round 1: extend [5] -> [6]; tokens 5 -> 6"],
        "gated": True, "expected_change": False, "failing": True}
    assert result["scenarios"][-1] == {
        "name": C, "mode": "forced", "identical": None, "rounds_moved": [], "only_in": "head",
        "not_replayed": {"tree": "base", "reason": "mode forced not run (this tree ran off, on)"},
        "gated": False, "expected_change": False, "failing": False}
    assert result["head_invariant_failures"] == [
        {"failure": INVARIANT, "pre_existing": False, "expected": False},
        {"failure": OLD, "pre_existing": True, "expected": False},
        {"failure": EXCUSED, "pre_existing": False, "expected": True}]
    assert result["base_invariant_failures"] == [OLD]
    assert result["failing_invariants"] == [INVARIANT, OLD]
    assert result["verdict"] == "FAIL"


def test_the_report_prints_what_moved_each_head_failure_and_the_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(tmp_path, "--expect-change", f"{B}:on") == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "Admission head vs base: 0.5.22+asr-fix (no git) -> 0.5.23 (no git)" in out
    assert [line for line in lines if line.startswith(("MOVED", "HEAD", "base inv"))] == [
        f"MOVED: {A} [off] round 1: extend [5] -> [6]; tokens 5 -> 6",
        f"MOVED: {A} [on] round 1: extend [5] -> [6]; tokens 5 -> 6",
        f"HEAD INVARIANT (FAIL): {INVARIANT}",
        f"HEAD INVARIANT (FAIL, pre-existing in base): {OLD}",
        f"HEAD INVARIANT (expected): {EXCUSED}",
        f"base invariant (reported): {OLD}"]
    assert lines[-4:] == [
        "off: identical 2, moved 1", "on: identical 1, moved 1", "forced: only_in_head 1",
        "admission ab: FAIL (2 off and on scenarios moved without --expect-change, 2 head "
        "invariant failure(s); runner class cpu)"]
    row = next(line for line in lines if f"{A} " in line and " on " in line)
    assert "1 moved" in row and "FAIL" in row and "round 1: extend [5] -> [6]" in row


def test_declared_changes_pass_and_are_shown_as_expected(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, head = _pair(tmp_path)
    quiet = json.loads((head / "replay.json").read_text()) | {"failures": [OLD]}
    (head / "replay.json").write_text(json.dumps(quiet))
    code = ab.ab_main(["--base", str(base), "--head", str(head), "--runner", "mi355x",
                       "--python", _python(tmp_path), "--expect-change", f"{A}:off, {C}*"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[-1] == ("admission ab: PASS (0 off scenarios moved without "
                                    "--expect-change, 0 head invariant failure(s); runner class "
                                    "mi355x)")
    assert f"HEAD INVARIANT (expected): {OLD}" in out                  # A:off covers it
    rows = [line for line in out.splitlines() if f"{A} " in line]
    assert any("expected" in line for line in rows)                      # off: declared
    assert any("reported" in line for line in rows)                      # on: gfx95 may move


def test_an_expect_change_matching_no_scenario_is_refused_before_any_replay(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _main(tmp_path, "--expect-change", "p1-nope:off,p64-*,p2-nope") == 2
    err = capsys.readouterr().err
    assert err == (f"{ab.PROG}: error: --expect-change p1-nope:off, p2-nope: no such scenario in "
                   f"{SUITE} (ids look like {IDS[0]})\n")


def test_a_tree_that_does_not_replay_exits_2_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _tree(tmp_path / "base", _replay({}, exit=3, stderr=["Killed"]))
    head = _tree(tmp_path / "head", _replay({}))
    code = ab.ab_main(["--base", str(base), "--head", str(head), "--runner", "cpu",
                       "--python", _python(tmp_path)])
    assert code == 2
    assert capsys.readouterr().err == (f"{ab.PROG}: error: --base {base}: replay exited 3: "
                                       f"Killed\n")


def test_bad_trees_and_runners_exit_2_naming_the_option(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = _tree(tmp_path / "good", _replay({}))
    assert ab.ab_main(["--base", str(good), "--head", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err.startswith(f"{ab.PROG}: error: --head {tmp_path / 'none'}")
    assert ab.ab_main(["--base", str(tmp_path / "none"), "--head", str(good)]) == 2
    assert capsys.readouterr().err.startswith(f"{ab.PROG}: error: --base {tmp_path / 'none'}")
    assert ab.ab_main(["--base", str(good), "--head", str(good), "--runner", "tpu"]) == 2
    assert capsys.readouterr().err.startswith(f"{ab.PROG}: error: --runner 'tpu'")


# ---- the parts: --expect-change, reasons, rows, summary, help --------------------------------

def test_expect_change_takes_patterns_with_an_optional_mode() -> None:
    got = ab._expectations(" a:off, b*,, c:forced ,")
    assert got == (ab.Expectation("a", "off"), ab.Expectation("b*", None),
                   ab.Expectation("c", "forced"))
    assert [str(e) for e in got] == ["a:off", "b*", "c:forced"]
    assert got[1].covers("bx", "on") and not got[0].covers("a", "on")
    for bad in (":off", "a:sometimes"):
        with pytest.raises(Exception) as info:
            ab._expectations(bad)
        assert str(info.value) == (f"expected SCENARIO[:MODE] with MODE one of off, on, forced, "
                                   f"got {bad!r}")


@pytest.mark.parametrize(("data", "mode", "reason"), [
    ({"not_built": [{"scenario": "s", "why": ""}]}, "off", "not built"),
    ({"not_built": [{"scenario": "t", "why": "x"}], "modes": ["off"]}, "on",
     "mode on not run (this tree ran off)"),
    ({"modes": ["off"], "sglang_src": {"has_gate": False}}, "forced",
     "mode forced not run: sglang ? has no exact-fill gate (schedule_policy._use_exact_chunk_fill,"
     " sglang >= 0.5.20)"),
    ({"modes": ["off", "forced"]}, "forced", "absent from this tree's replay, no error recorded"),
    ({}, "on", "absent from this tree's replay, no error recorded"),
])
def test_why_a_tree_did_not_replay_a_scenario(data: dict[str, Any], mode: str,
                                               reason: str) -> None:
    assert ab.not_replayed_reason(data, "s", mode) == reason


def test_one_sided_rows_group_by_tree_and_reason_in_order() -> None:
    rows = [ab.Row("x", "on", None, only_in="head", reason="r1"),
            ab.Row("x", "forced", None, only_in="head", reason="r1"),
            ab.Row("y", "on", None, only_in="base", reason=None),
            ab.Row("z", "off", True)]
    assert ab.one_sided(rows) == {("head", "r1"): {"x": ["on", "forced"]},
                                  ("base", "no reason recorded"): {"y": ["on"]}}
    assert rows[2].other == "head" and rows[0].other == "base"


def test_the_help_says_what_each_option_is_for() -> None:
    text = " ".join(ab.build_parser().format_help().split())
    for words in ("--base TREE sglang checkout or unpacked package: the reference",
                  "--head TREE sglang checkout or unpacked package: the change under test",
                  "--expect-change SCENARIO[:MODE],... differences that are deliberate "
                  "(scenario ids, fnmatch patterns allowed)",
                  "--runner RUNNER runner class deciding whether `on` is gated here "
                  "(default: detected)",
                  "--python PYTHON interpreter for the two replay processes (default: this one)",
                  "--json print the JSON result",
                  "Replay the admission matrix on a base and a head sglang tree (each in its "
                  "own process) and compare them."):
        assert words in text, words
    args = ab.build_parser().parse_args(["--base", "b", "--head", "h"])
    assert (args.suite, args.python, args.expect_change, args.runner, args.json) == (
        SUITE, sys.executable, (), None, False)
    assert ab.build_parser().prog == "servegate admission ab"


def _cells(out: str) -> list[list[str]]:
    """The table's rows as their cells (rich's box drawing split away)."""
    rows = []
    for line in out.splitlines():
        if "│" in line or "┃" in line:
            rows.append([c.strip() for c in line.replace("┃", "│").split("│")[1:-1]])
    return rows


def test_the_table_shows_each_moved_row_its_gate_and_first_moved_round(
        capsys: pytest.CaptureFixture[str]) -> None:
    detail = "round 3: extend [1024, 1024] -> [2048]; tokens 2048 -> 2048; kv 2176 -> 2240; " \
             "stop chunk -> input"
    assert len(detail) > 91
    rows = [ab.Row("s-fail", "off", False, [f"s-fail [off] {detail}", "s-fail [off] round 4: x"],
                   gated=True),
            ab.Row("s-expected", "off", False, ["s-expected [off] round 0: y"], gated=True,
                   expected=True),
            ab.Row("s-reported", "forced", False, ["s-reported [forced] round 2: z"]),
            ab.Row("s-same", "off", True),
            ab.Row("s-one", "on", None, only_in="base", reason="mode on not run")]
    side = {"version": "0.5.23", "commit": "abc1234"}
    ab.print_table({"base": side, "head": {"version": "0.5.24", "commit": None},
                    "summary": ab.summary(rows)}, rows)
    out = capsys.readouterr().out
    assert "Admission head vs base: 0.5.23 (abc1234) -> 0.5.24 (no git)" in out
    cells = _cells(out)
    assert cells[0] == ["scenario", "mode", "result", "gate", "first moved round / why not replayed"]
    assert cells[1:] == [
        ["s-fail", "off", "2 moved", "FAIL", detail[:90]],
        ["s-expected", "off", "1 moved", "expected", "round 0: y"],
        ["s-reported", "forced", "1 moved", "reported", "round 2: z"],
        ["s-one", "on", "only in base", "-", "not replayed on head: mode on not run"],
        ["(1 scenarios)", "off", "identical", "-", ""]]


@pytest.mark.parametrize("count", [10, 11])
def test_one_sided_scenarios_sharing_a_reason_are_listed_up_to_ten(
        count: int, capsys: pytest.CaptureFixture[str]) -> None:
    rows = [ab.Row(f"s{i}", mode, None, only_in="head", reason="no gate")
            for i in range(count) for mode in ("on", "forced")]
    side = {"version": "x", "commit": None}
    ab.print_table({"base": side, "head": side, "summary": ab.summary(rows)}, rows)
    cells = _cells(capsys.readouterr().out)[1:]
    if count <= ab.MAX_LISTED:
        assert [c[:3] for c in cells] == [[f"s{i}", "on/forced", "only in head"]
                                          for i in range(count)]
    else:
        assert cells == [[f"({count} scenarios)", "on/forced", "only in head", "-",
                          "not replayed on base: no gate"]]


def test_a_row_whose_first_change_is_exact_fill_turning_on_says_so(
        capsys: pytest.CaptureFixture[str]) -> None:
    rows = [ab.Row("s", "off", False, ["s [off]: effective False -> True",
                                       "s [off] round 0: extend [8] -> [9]"], gated=True)]
    side = {"version": "x", "commit": None}
    ab.print_table({"base": side, "head": side, "summary": ab.summary(rows)}, rows)
    assert _cells(capsys.readouterr().out)[1] == ["s", "off", "2 moved", "FAIL",
                                                  "effective False -> True"]


@pytest.mark.parametrize(("given", "missing"), [(["--head", "h"], "--base"),
                                                (["--base", "b"], "--head")])
def test_both_trees_are_required(given: list[str], missing: str,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        ab.build_parser().parse_args(given)
    assert info.value.code == 2
    assert f"{ab.PROG}: error: the following arguments are required: {missing}" in \
        capsys.readouterr().err


def test_a_head_invariant_failure_alone_fails_the_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every moved row declared (A in both modes, B's on), so only C's forced invariant
    failure of the head is left: still a FAIL."""
    assert _main(tmp_path, "--json", "--expect-change", f"{A},{B}:on") == 1
    result = json.loads(capsys.readouterr().out)
    assert result["failing"] == [] and result["failing_invariants"] == [INVARIANT]
    assert result["verdict"] == "FAIL"
