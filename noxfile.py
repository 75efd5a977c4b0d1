"""servegate's nox sessions: thin wrappers that pick an environment and call the package.

Pipeline: config (suites/, models/) -> plan -> serve -> measure -> judge -> report.
CPU sessions share one pinned sglang environment (see src/servegate/serve/envbuild.py); GPU sessions
run on the runner image's own interpreter ($SERVEGATE_PYTHON, else the one nox runs on), never in
a venv on top of it (a venv made from a venv's python does not see the parent venv's sglang).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nox

sys.path.insert(0, str(Path(__file__).parent / "src"))
from servegate.serve import envbuild  # stdlib-only module, importable before installs

nox.options.sessions = ["tests"]
# Every sglang/e2e/timing test lives here: collecting only this folder spares each real-sglang
# phase (and each xdist worker) importing the ~2,000 unit tests (15 s measured, 2026-12-04).
REAL_SGLANG_TESTS = "tests/real_sglang"
nox.options.error_on_external_run = False


def _runtime_python(session: nox.Session, force_cpu: bool = False) -> str:
    """The interpreter that has sglang: the shared CPU env, or the GPU runner image's own."""
    try:
        if not force_cpu and envbuild.gpu_present():
            return str(envbuild.ensure_image_python(log=session.log))
        return str(envbuild.ensure_cpu_env(log=session.log))
    except envbuild.EnvBuildError as err:
        session.error(str(err))


def _servegate(session: nox.Session, python: str, *args: str, **kwargs: object) -> None:
    session.run(python, "-m", "servegate", *args, external=True,
                env=envbuild.servegate_env_vars(), **kwargs)


def _install(session: nox.Session, *args: str) -> None:
    """pip installs uv (one wheel), uv installs the rest: `-e .[test,docs]` took 59 s with pip
    and 4 s with uv and a cold cache on this 2-core VM (2026-12-04), a minute of every CI run."""
    session.install("uv")
    python = Path(session.virtualenv.location) / "bin" / "python"
    session.run("uv", "pip", "install", "--quiet", "--python", str(python), *args)


def _build_docs(session: nox.Session) -> None:
    """The documentation site, strictly (a broken link, anchor or nav entry fails): build/site/.
    Its reference pages are generated from the code by the hook tools/docs_reference.py."""
    session.run("mkdocs", "build", "--strict", "--quiet", env={"NO_MKDOCS_2_WARNING": "1"})


@nox.session(reuse_venv=True)
def unit(session: nox.Session) -> None:
    """Lint, unit tests that need no sglang (fast; runs before the sglang env is built), docs."""
    envbuild.ensure_chromium(log=session.log)    # the site's browser test; best effort, never fails
    _install(session, "-e", ".[test,docs]")
    session.run("ruff", "check", ".")
    session.run("lint-imports")  # the layers contract in pyproject.toml
    # pytest-xdist: one worker per core, each test file on one worker (module fixtures stay shared)
    session.run("pytest", "-n", "auto", "--dist", "loadfile", "--benchmark-disable",
                "-m", "not sglang and not e2e and not gpu", *session.posargs)
    _build_docs(session)


@nox.session(reuse_venv=True)
def docs(session: nox.Session) -> None:
    """The documentation site alone (mkdocs, material theme, --strict) into build/site/."""
    _install(session, "-e", ".[docs]")
    _build_docs(session)


@nox.session(reuse_venv=True)
def calibrate(session: nox.Session) -> None:
    """Simulate >= 1000 nights per suite design through the judge: A/A false alarms, no-op
    false failures, power (docs/judge.md): nox -s calibrate [-- --json --suite nightly]."""
    _install(session, "-e", ".[test]")
    session.run("python", "-m", "servegate", "calibrate", *session.posargs)


@nox.session(reuse_venv=True)
def plan(session: nox.Session) -> None:
    """What a suite costs per CI cell before a GPU is booked (no sglang needed):
    nox -s plan -- --suite premerge [--runner gfx95] [--json]."""
    _install(session, "-e", ".")
    session.run("python", "-m", "servegate", "plan", *session.posargs)


@nox.session(reuse_venv=True)
def mutation(session: nox.Session) -> None:
    """Opt-in, not part of `tests`: mutmut over the gate's core against the unit tier, surviving
    mutants per module, results/mutation-<stamp>/summary.json (docs/mutation.md):
    nox -s mutation [-- --fresh | --changed REF | --max-children N]."""
    _install(session, "-e", ".[test]", "mutmut>=3.8,<4")
    session.run("python", "tools/mutation.py", *session.posargs)


@nox.session(venv_backend="none", requires=["unit"])
def tests(session: nox.Session) -> None:
    """The README test command: unit tests, then the real-sglang tests: those that assert no
    speed two at a time (replays, hooks, preflight, server lifecycle faults), then the other
    server tests and the `timing` tests alone."""
    # GPU tests (opt-in: SERVEGATE_GPU_TESTS=1) must run in the runner image's own sglang.
    python = _runtime_python(session, force_cpu=os.environ.get("SERVEGATE_GPU_TESTS") != "1")
    env = envbuild.servegate_env_vars()
    if session.posargs:
        session.run(python, "-m", "pytest", *session.posargs, external=True, env=env)
        return
    # Tests that assert nothing about speed (scheduler replays, hooks, preflight, and the
    # `lifecycle` server tests: exit codes, causes, teardown) run three at a time on the two
    # cores, test by test (a worker waiting on a server, a timeout or a teardown leaves its core
    # to the others: at two workers this phase used 1.7 cores).
    # Then every other test that starts a CPU server (`e2e`) or judges speed (`timing`) runs
    # alone, one after another: a second CPU-heavy process slows a CPU server 2-4x (measured:
    # the emulated gfx95 e2e took 106 s alone and 247-250 s beside the replays).
    # --durations: the slowest tests named in every CI log.
    session.run(python, "-m", "pytest", "-n", "3", "--dist", "load", "--benchmark-disable",
                "--durations=8", "-m", "(sglang and not e2e and not timing or lifecycle) and not gpu",
                REAL_SGLANG_TESTS, external=True, env=env)
    session.run(python, "-m", "pytest", "--durations=12", "-m",
                "(e2e or timing) and not lifecycle and not gpu", REAL_SGLANG_TESTS,
                external=True, env=env)


@nox.session(venv_backend="none", tags=["cpu"])
def admission(session: nox.Session) -> None:
    """Replay the real PrefillAdder over the admission matrix; compare with golden traces."""
    python = _runtime_python(session, force_cpu=True)
    _servegate(session, python, "admission", "suite", *session.posargs)


@nox.session(venv_backend="none", tags=["cpu"])
def preflight(session: nox.Session) -> None:
    """Before a GPU is booked: can each GPU suite see exact fill? (argv via sglang's parser,
    admission budget, the client's load replayed through the real PrefillAdder)."""
    python = _runtime_python(session, force_cpu=True)
    _servegate(session, python, "preflight", *session.posargs)


@nox.session(venv_backend="none", tags=["cpu", "gpu"])
def bench(session: nox.Session) -> None:
    """Main job: serve + measure (+ GSM8K) a suite; the cpu suite when no GPU is present."""
    python = _runtime_python(session)
    _servegate(session, python, "bench", *session.posargs)


@nox.session(venv_backend="none", tags=["cpu"])
def admission_ab(session: nox.Session) -> None:
    """Admission head vs base: nox -s admission_ab -- --base TREE --head TREE [--json]."""
    python = _runtime_python(session, force_cpu=True)
    _servegate(session, python, "admission", "ab", *session.posargs)


@nox.session(venv_backend="none", tags=["cpu", "gpu"])
def ab(session: nox.Session) -> None:
    """Gate an sglang change: nox -s ab -- --base TREE --head TREE [--suite S] (interleaved)."""
    python = _runtime_python(session)
    _servegate(session, python, "ab", *session.posargs)


@nox.session(venv_backend="none", tags=["cpu", "gpu"])
def bisect(session: nox.Session) -> None:
    """A regression's first bad commit: nox -s bisect -- --repo SGLANG --good REF --bad REF."""
    python = _runtime_python(session)
    _servegate(session, python, "bisect", *session.posargs)


@nox.session(venv_backend="none", tags=["cpu", "gpu"])
def accuracy(session: nox.Session) -> None:
    """GSM8K accuracy only (per question, paired on/off) for a suite."""
    python = _runtime_python(session)
    _servegate(session, python, "accuracy", *session.posargs)


@nox.session(venv_backend="none")
def compare(session: nox.Session) -> None:
    """Judge a run folder against its stored baseline and A/B claims: nox -s compare -- RUN_DIR."""
    python = _runtime_python(session, force_cpu=not envbuild.gpu_present())
    _servegate(session, python, "compare", *session.posargs)


@nox.session(venv_backend="none")
def update_baselines(session: nox.Session) -> None:
    """Store a complete run as the baseline, with provenance: nox -s update_baselines -- RUN_DIR."""
    python = _runtime_python(session, force_cpu=not envbuild.gpu_present())
    _servegate(session, python, "update-baselines", *session.posargs)
