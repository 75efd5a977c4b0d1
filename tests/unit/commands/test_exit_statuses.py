"""Every command's exit status through its entry point (issue 42 item 5): ``servegate <command>``
as the console script runs it (``servegate.commands.dispatch.main``; an argparse usage error is
the SystemExit status the process would end with), not only the command's parts. CI reads these
numbers: 0 pass, 1 regression, 2 infrastructure or bad input, 3 inconclusive under --strict."""

from __future__ import annotations

from pathlib import Path

import pytest
from judge_runs import make_run

from servegate.commands import dispatch
from servegate.core.errors import EXIT_INCONCLUSIVE, EXIT_INFRA, EXIT_OK, EXIT_REGRESSION


def _status(*argv: str | Path) -> int:
    """The exit status of ``servegate *argv``, as the console script ends."""
    try:
        return dispatch.main([str(a) for a in argv])
    except SystemExit as stop:                 # argparse: usage errors and --help
        return int(stop.code or 0)


@pytest.fixture(autouse=True)
def _no_ci_summary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))   # no developer's cache read


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A baseline stored through `update-baselines`, a run 1.6x slower and a run like it."""
    root = tmp_path_factory.mktemp("judged")
    base = make_run(root / "base", seed=1, n_requests=120, request_cv=0.03)
    file = root / "baselines" / "cpu" / "smollm2-135m" / "synthetic.json"
    assert _status("update-baselines", base, "--baseline", file) == EXIT_OK
    slow = make_run(root / "slow", seed=2, n_requests=120, request_cv=0.03,
                    effect=lambda _m, _c: 1.6)
    same = make_run(root / "same", seed=3, n_requests=120, request_cv=0.03)
    return {"baseline": file, "slow": slow, "same": same, "root": root}


def test_compare_exits_1_on_a_regression_0_or_3_when_none(judged: dict[str, Path]) -> None:
    base = ("--baseline", judged["baseline"], "--no-plots")
    assert _status("compare", judged["slow"], *base) == EXIT_REGRESSION
    assert _status("compare", judged["same"], *base) == EXIT_OK
    assert _status("compare", judged["same"], *base, "--strict") in (EXIT_OK, EXIT_INCONCLUSIVE)


def test_compare_exits_2_on_a_folder_without_a_run(tmp_path: Path) -> None:
    assert _status("compare", tmp_path / "nothing-here", "--no-plots") == EXIT_INFRA


def test_update_baselines_refuses_an_incomplete_run_with_2(tmp_path: Path) -> None:
    run = make_run(tmp_path / "partial", complete=False)
    assert _status("update-baselines", run, "--baseline", tmp_path / "b.json") == EXIT_INFRA
    assert not (tmp_path / "b.json").exists()


def test_history_add_then_report_exit_0_a_missing_run_exits_2(
        judged: dict[str, Path], tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert _status("history", "add", judged["same"], "--store", store) == EXIT_OK
    assert _status("history", "report", "--store", store, "--json") == EXIT_OK
    assert _status("history", "add", tmp_path / "missing", "--store", store) == EXIT_INFRA


@pytest.mark.parametrize("argv", [
    ("plan", "--suite", "nightly", "--runner", "gfx95", "--json"),
    ("runners", "--json"),
    ("runners", "--matrix", "nightly"),
    ("upgrade", "--help"),
])
def test_commands_that_succeed_exit_0(argv: tuple[str, ...]) -> None:
    assert _status(*argv) == EXIT_OK


@pytest.mark.parametrize("argv", [
    ("plan", "--suite", "nightly", "--runner", "no-such-runner"),
    ("plan", "--suite", "no-such-suite"),
    ("runners", "--resolve", "no-such-class"),
    ("calibrate", "--suite", "no-such-suite", "--nights", "10"),
    ("bench", "--suite", "no-such-suite"),
    ("accuracy", "--suite", "no-such-suite"),
    ("ab", "--suite", "no-such-suite", "--base", "/nonexistent/a", "--head", "/nonexistent/b"),
    ("preflight", "--suite", "no-such-suite"),
    ("admission", "no-such-subcommand"),
    ("history", "no-such-subcommand"),
    ("upgrade", "/nonexistent/run.json"),
    ("no-such-command",),
    (),
])
def test_bad_input_exits_2_through_the_entry_point(argv: tuple[str, ...]) -> None:
    assert _status(*argv) == EXIT_INFRA
