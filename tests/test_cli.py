"""The ``servegate`` front door: one error base, one exit-code table, caught once in the CLI."""

from __future__ import annotations

import importlib
import sys
import types

import pytest

from servegate import cli, errors
from servegate.errors import EXIT_INCONCLUSIVE, EXIT_INFRA, ServegateError

# Every exception class servegate defines on purpose, with the builtin base its callers catch.
ERROR_CLASSES = [
    ("servegate.config._schema", "ConfigError", ValueError),
    ("servegate.serve.process", "ServerError", RuntimeError),
    ("servegate.serve.process", "PortInUse", RuntimeError),
    ("servegate.serve.support", "UnsupportedSglang", RuntimeError),
    ("servegate.serve.modelprep", "ModelPrepError", RuntimeError),
    ("servegate.results", "RunFolderError", ValueError),
    ("servegate.accuracy.dataset", "DatasetError", ValueError),
    ("servegate.accuracy.report", "RecordsError", ValueError),
    ("servegate.accuracy.client", "GenerationError", RuntimeError),
    ("servegate.accuracy.runner", "AccuracyConfigError", ValueError),
    ("servegate.runner", "RunnerError", ValueError),
    ("servegate.config.judge", "JudgeConfigError", ValueError),
    ("servegate.judge.baselines", "BaselineError", ValueError),
    ("servegate.judge.baselines", "BaselineMismatchError", ValueError),
    ("servegate.envbuild", "EnvBuildError", RuntimeError),
    ("servegate.measure.client", "ClientError", RuntimeError),
    ("servegate.measure.exactfill", "ExactFillMismatch", RuntimeError),
    ("servegate.measure.logparse", "LogParseError", ValueError),
    ("servegate.admission.golden", "GoldenError", ValueError),
    ("servegate.admission.suite", "SuiteError", ValueError),
    ("servegate.admission.scenario", "ScenarioError", ValueError),
]


@pytest.mark.parametrize(("module", "name", "builtin"), ERROR_CLASSES,
                         ids=[name for _, name, _ in ERROR_CLASSES])
def test_every_error_is_a_servegate_error_and_keeps_its_builtin_base(module, name, builtin):
    cls = getattr(importlib.import_module(module), name)
    assert issubclass(cls, ServegateError)
    assert issubclass(cls, builtin), f"{name} must still be caught by `except {builtin.__name__}`"
    assert cls.exit_code == EXIT_INFRA == 2


def test_exit_codes_are_the_documented_contract():
    assert (errors.EXIT_OK, errors.EXIT_REGRESSION, errors.EXIT_INFRA, errors.EXIT_INCONCLUSIVE,
            errors.EXIT_SIGINT, errors.EXIT_SIGTERM) == (0, 1, 2, 3, 130, 143)


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
    monkeypatch.setitem(cli.COMMANDS, "boom", (module.__name__, "raises on purpose (test)"))
    return module


def test_a_servegate_error_escaping_a_command_becomes_its_exit_code_and_one_line(command, capsys):
    from servegate.judge.baselines import BaselineError

    command.raised = BaselineError("baselines/x.json: field 'points' is missing")
    assert cli.main(["boom", "--anything"]) == EXIT_INFRA
    captured = capsys.readouterr()
    assert captured.err == "servegate boom: baselines/x.json: field 'points' is missing\n"
    assert "Traceback" not in captured.err


def test_the_cli_returns_the_errors_own_exit_code(command, capsys):
    command.raised = _InconclusiveError("not enough samples")
    assert cli.main(["boom"]) == EXIT_INCONCLUSIVE
    assert capsys.readouterr().err == "servegate boom: not enough samples\n"


def test_other_exceptions_are_not_swallowed(command):
    command.raised = ValueError("a bug, not a deliberate error")
    with pytest.raises(ValueError, match="a bug"):
        cli.main(["boom"])


def test_unknown_command_and_no_command_are_usage_errors(capsys):
    assert cli.main(["no-such-command"]) == EXIT_INFRA
    assert "unknown command 'no-such-command'" in capsys.readouterr().err
    assert cli.main([]) == EXIT_INFRA
    assert cli.main(["--help"]) == 0
