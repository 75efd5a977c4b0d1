"""The ``servegate`` front door: one error base, one exit-code table, caught once in the CLI."""

from __future__ import annotations

import sys
import types

import pytest

from servegate.commands import dispatch
from servegate.core.errors import EXIT_INCONCLUSIVE, EXIT_INFRA, ServegateError


class _InconclusiveError(ServegateError, RuntimeError):
    exit_code = EXIT_INCONCLUSIVE


@pytest.fixture
def command(monkeypatch):
    """Register a throwaway ``servegate boom`` whose ``main`` raises what the test sets."""
    module = types.ModuleType("servegate_test_boom")
    module.raised = None

    def main(argv: list[str]) -> int:
        if module.raised is not None:
            raise module.raised
        return 0

    module.main = main
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(dispatch.COMMANDS, "boom", (module.__name__, "raises on purpose (test)"))
    return module


def test_a_servegate_error_escaping_a_command_becomes_its_exit_code_and_one_line(command, capsys):
    from servegate.judge.baselines import BaselineError

    command.raised = BaselineError("baselines/x.json: field 'points' is missing")
    assert dispatch.main(["boom", "--anything"]) == EXIT_INFRA
    captured = capsys.readouterr()
    assert captured.err == "servegate boom: baselines/x.json: field 'points' is missing\n"
    assert "Traceback" not in captured.err


def test_the_cli_returns_the_errors_own_exit_code(command, capsys):
    command.raised = _InconclusiveError("not enough samples")
    assert dispatch.main(["boom"]) == EXIT_INCONCLUSIVE
    assert capsys.readouterr().err == "servegate boom: not enough samples\n"


def test_other_exceptions_are_not_swallowed(command):
    command.raised = ValueError("a bug, not a deliberate error")
    with pytest.raises(ValueError, match="a bug"):
        dispatch.main(["boom"])


def test_unknown_command_and_no_command_are_usage_errors(capsys):
    assert dispatch.main(["no-such-command"]) == EXIT_INFRA
    assert "unknown command 'no-such-command'" in capsys.readouterr().err
    assert dispatch.main([]) == EXIT_INFRA
    assert dispatch.main(["--help"]) == 0
