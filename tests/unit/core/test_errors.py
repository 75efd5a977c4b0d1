"""The ``servegate`` front door: one error base, one exit-code table, caught once in the CLI."""

from __future__ import annotations

import importlib

import pytest

from servegate.core import errors
from servegate.core.errors import EXIT_INFRA, ServegateError

# Every exception class servegate defines on purpose, with the builtin base its callers catch.
ERROR_CLASSES = [
    ("servegate.config._schema", "ConfigError", ValueError),
    ("servegate.serve.process", "ServerError", RuntimeError),
    ("servegate.serve.process", "PortInUse", RuntimeError),
    ("servegate.serve.support", "UnsupportedSglang", RuntimeError),
    ("servegate.serve.modelprep", "ModelPrepError", RuntimeError),
    ("servegate.core.results", "RunFolderError", ValueError),
    ("servegate.accuracy.dataset", "DatasetError", ValueError),
    ("servegate.accuracy.report", "RecordsError", ValueError),
    ("servegate.accuracy.client", "GenerationError", RuntimeError),
    ("servegate.accuracy.runner", "AccuracyConfigError", ValueError),
    ("servegate.serve.detect", "RunnerError", ValueError),
    ("servegate.config.judge", "JudgeConfigError", ValueError),
    ("servegate.judge.baselines", "BaselineError", ValueError),
    ("servegate.judge.baselines", "BaselineMismatchError", ValueError),
    ("servegate.serve.envbuild", "EnvBuildError", RuntimeError),
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
