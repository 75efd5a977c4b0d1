"""Test plumbing: where the shipped data and fixtures live, and opt-in markers.

Everything a test reads ships with the repository (``repo_files`` says where).

- ``sglang`` / ``e2e`` tests need the real sglang (the shared CPU env that `nox -s tests` uses);
  elsewhere they are skipped with that reason rather than failing on an ImportError.
- ``gpu`` tests run only on a real GPU runner with SERVEGATE_GPU_TESTS=1.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_helpers import SRC, TAG_VAR
from repo_files import TEST_DATA

from servegate.core.paths import LOCAL_BASELINES_ENV


@pytest.fixture(scope="session")
def test_data() -> Path:
    """Fixtures recorded from real runs (``tests/data/README.md`` says what each is)."""
    return TEST_DATA


@pytest.fixture(scope="session", autouse=True)
def _no_user_local_baselines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Session fixtures too (e.g. a shared bench run) never read or write the user's own
    CPU-tier local baselines (servegate.core.paths.local_baselines_root)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(LOCAL_BASELINES_ENV, str(tmp_path_factory.mktemp("session-baselines")))
        yield


@pytest.fixture(autouse=True)
def _local_baselines(tmp_path_factory: pytest.TempPathFactory,
                     monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test (and every process it starts) keeps CPU-tier local baselines in a folder of
    its own: a developer's own machine baseline never judges a test's run, no test writes into
    the user's cache, and no test sees another's."""
    folder = tmp_path_factory.mktemp("local-baselines")
    monkeypatch.setenv(LOCAL_BASELINES_ENV, str(folder))
    return folder


# Fixtures of the fault tests (tests/real_sglang/serving/test_faults_bench.py and the fault
# paths under tests/unit/; their helpers are in fault_helpers.py).

@pytest.fixture
def tag(monkeypatch: pytest.MonkeyPatch) -> str:
    """A unique value in the environment of everything this test starts."""
    value = uuid.uuid4().hex
    monkeypatch.setenv(TAG_VAR, value)
    monkeypatch.setenv("SERVEGATE_RUNNER", "cpu")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(SRC), *filter(None, [os.environ.get("PYTHONPATH")])]))
    return value


@pytest.fixture
def ctrl_c_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in this process, whatever disposition pytest inherited
    (a test run started with SIGINT ignored, e.g. in the background or under nohup)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_sglang = importlib.util.find_spec("sglang") is not None
    gpu_opt_in = os.environ.get("SERVEGATE_GPU_TESTS") == "1"
    slow_opt_in = os.environ.get("SERVEGATE_SLOW_TESTS") == "1"
    for item in items:
        if "slow" in item.keywords and not slow_opt_in:
            item.add_marker(pytest.mark.skip(
                reason="slow: opt-in with SERVEGATE_SLOW_TESTS=1 (a repeat of a default test on "
                       "another path; docs/guide/tests.md)"))
        elif "gpu" in item.keywords and not gpu_opt_in:
            item.add_marker(pytest.mark.skip(
                reason="GPU test: runs only on a GPU runner with SERVEGATE_GPU_TESTS=1"))
        elif ("sglang" in item.keywords or "e2e" in item.keywords) and not has_sglang:
            item.add_marker(pytest.mark.skip(
                reason="needs real sglang: run through `nox -s tests` (shared CPU env)"))
    # The server lifecycle tests first: the longest of the phase that runs tests three at a time, they would
    # otherwise be dealt last and leave one worker running alone at the end.
    items.sort(key=lambda item: "lifecycle" not in item.keywords)
    _fastest_first_under_a_mutant(items)


def _fastest_first_under_a_mutant(items: list[pytest.Item]) -> None:
    """Under mutmut (a mutant is active), run the selected tests fastest first.

    mutmut runs the tests that reach a mutated function with ``-x`` in collection order; the
    first failing test ends the mutant. Ordering by the durations mutmut recorded
    (``mutants/mutmut-stats.json``; the working directory while mutating) lets a quick test kill a
    mutant before a slow simulation runs: the verdicts are the same, the judge pass is faster.
    """
    if "__mutmut_" not in os.environ.get("MUTANT_UNDER_TEST", ""):
        return
    durations = _recorded_test_durations()
    items.sort(key=lambda item: durations.get(item.nodeid, 0.0))


@functools.cache
def _recorded_test_durations() -> dict[str, float]:
    try:
        return dict(json.loads(Path("mutmut-stats.json").read_text())["duration_by_test"])
    except (OSError, ValueError, KeyError):
        return {}
