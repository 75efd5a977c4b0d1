"""GPU sessions run on the runner image's own interpreter, never in a venv on top of it.

Why: ROCm images keep their whole stack in a venv (upstream docker/rocm.Dockerfile:
``ENV VIRTUAL_ENV=/opt/venv``). A venv made from a venv's python, even with
``--system-site-packages``, sees the *base* interpreter's site-packages, not the parent venv's,
so the image's sglang disappears: ``No module named sglang``. These tests build a REAL parent
venv (the image's /opt/venv) holding a package named ``sglang`` (a tiny stand-in written into the
venv's site-packages, named as a test double in its own source), then show

(a) the old GPU path (a ``--system-site-packages`` venv from that python, as
    ``ci/lib/in-container.sh`` and ``envbuild.ensure_system_env`` made) cannot import it, and
(b) the path servegate now takes (``envbuild.ensure_image_python`` on the image's interpreter,
    reached through ``ci/lib/in-container.sh`` and nox) imports it, installs a missing light
    dependency into that same interpreter (offline, from a local folder), and names the
    interpreter when the image's sglang is missing.

No network: venvs come from ``ensurepip``; the dependency is installed with ``--no-index``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from repo_files import REPO_ROOT

from servegate.serve import envbuild

REPO = REPO_ROOT


IN_CONTAINER = REPO / "ci" / "lib" / "in-container.sh"


STAND_IN = ('"""TEST DOUBLE: stands in for the runner image\'s sglang (tests/test_image_python.py)."""\n'
            'SERVEGATE_TEST_DOUBLE = "image sglang stand-in"\n')


def _run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=300,  # type: ignore[call-overload]
                          **kwargs)


def _purelib(python: Path) -> Path:
    out = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    return Path(out.stdout.strip())


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "SERVEGATE_PYTHON")}
    return env


@pytest.fixture(scope="module")
def image_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real venv (the image's /opt/venv) whose site-packages hold the ``sglang`` stand-in."""
    root = tmp_path_factory.mktemp("image") / "opt-venv"
    made = _run([sys.executable, "-m", "venv", str(root)], env=_clean_env())
    assert made.returncode == 0, made.stderr
    python = root / "bin" / "python"
    package = _purelib(python) / "sglang"
    package.mkdir()
    (package / "__init__.py").write_text(STAND_IN)
    return python


def test_parent_venv_holds_the_package(image_venv: Path) -> None:
    out = _run([str(image_venv), "-c", "import sglang; print(sglang.__file__)"], env=_clean_env())
    assert out.returncode == 0, out.stderr
    assert str(image_venv.parent.parent) in out.stdout
    # ...and the base interpreter does not have it: the package lives only in the parent venv
    base = _run([sys.executable, "-c", "import sglang"], env=_clean_env(), cwd="/")
    if base.returncode == 0:
        pytest.skip(f"{sys.executable} itself can import an sglang; the contrast needs one without")


def test_old_path_a_venv_over_the_venv_loses_it(image_venv: Path, tmp_path: Path) -> None:
    """What in-container.sh and envbuild.ensure_system_env did: a --system-site-packages venv
    made from the image's (venv) python. It sees the base interpreter, not /opt/venv."""
    child = tmp_path / "servegate-nox"
    made = _run([str(image_venv), "-m", "venv", "--system-site-packages", "--without-pip",
                 str(child)], env=_clean_env())
    assert made.returncode == 0, made.stderr
    out = _run([str(child / "bin" / "python"), "-c", "import sglang"], env=_clean_env(), cwd="/")
    if _run([sys.executable, "-c", "import sglang"], env=_clean_env(), cwd="/").returncode == 0:
        pytest.skip("the base interpreter has an sglang: the child would find that one")
    assert out.returncode != 0
    assert "No module named 'sglang'" in out.stderr


def test_new_path_uses_the_image_interpreter_itself(image_venv: Path, tmp_path: Path) -> None:
    logs: list[str] = []
    python = envbuild.ensure_image_python(logs.append, python=str(image_venv), deps=(),
                                          stack=("sglang",))
    assert python == image_venv                   # no venv made: the image's own interpreter
    out = _run([str(python), "-c", "import sglang; print(sglang.SERVEGATE_TEST_DOUBLE)"],
               env=_clean_env())
    assert out.stdout.strip() == "image sglang stand-in"
    assert not any("installing" in line for line in logs)


def _wheel(folder: Path) -> Path:
    """A minimal pure-python wheel for ``sgdep_light`` (no build tools needed to install it)."""
    path = folder / "sgdep_light-1.0-py3-none-any.whl"
    info = "sgdep_light-1.0.dist-info"
    files = {"sgdep_light/__init__.py": "VALUE = 42\n",
             f"{info}/METADATA": "Metadata-Version: 2.1\nName: sgdep-light\nVersion: 1.0\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: servegate-test\n"
                              "Root-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def test_missing_light_dependency_goes_into_that_interpreter(
        image_venv: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A missing light dependency is installed into the image's interpreter itself (offline,
    from a local wheel here); a present one is never reinstalled."""
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    deps = (("sgdep_light", str(_wheel(tmp_path))),)
    logs: list[str] = []
    envbuild.ensure_image_python(logs.append, python=str(image_venv), deps=deps,
                                 stack=("sglang",))
    assert any(f"installing into {image_venv}" in line for line in logs)
    assert (_purelib(image_venv) / "sgdep_light" / "__init__.py").is_file()
    logs.clear()
    envbuild.ensure_image_python(logs.append, python=str(image_venv), deps=deps,
                                 stack=("sglang",))
    assert not any("installing" in line for line in logs)


def test_missing_image_sglang_is_named_up_front(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    assert _run([sys.executable, "-m", "venv", "--without-pip", str(bare)],
                env=_clean_env()).returncode == 0
    if not envbuild.missing_modules(str(bare / "bin" / "python"), ["sglang"]):
        pytest.skip("the base interpreter has an sglang")
    with pytest.raises(envbuild.EnvBuildError, match="cannot import sglang: GPU sessions run on "
                                                     "the runner image's own interpreter"):
        envbuild.ensure_image_python(lambda _m: None, python=str(bare / "bin" / "python"),
                                     stack=("sglang",), deps=())


def _python_with_nox() -> Path | None:
    probe = _run([sys.executable, "-m", "nox", "--version"])
    return Path(sys.executable) if probe.returncode == 0 else None


def test_in_container_session_runs_on_the_image_interpreter(image_venv: Path,
                                                            tmp_path: Path) -> None:
    """ci/lib/in-container.sh end to end: the image python (the parent venv) has no nox, so nox
    runs from its own venv (here: this test's interpreter, which has nox), and the session
    gets the image's interpreter from envbuild.ensure_image_python, which imports sglang."""
    nox_python = _python_with_nox()
    if nox_python is None:
        pytest.skip(f"nox is not installed for {sys.executable}")
    (tmp_path / "noxfile.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(REPO / 'src')!r})\n"
        "import nox\n"
        "from servegate.serve import envbuild\n"
        "@nox.session(venv_backend='none')\n"
        "def gpu(session):\n"
        "    python = str(envbuild.ensure_image_python(session.log, deps=(), stack=('sglang',)))\n"
        "    session.run(python, '-c', 'import sys, sglang; print(sys.executable); "
        "print(sglang.SERVEGATE_TEST_DOUBLE)', external=True)\n")
    env = {**_clean_env(), "SERVEGATE_PYTHON": str(image_venv),
           "SERVEGATE_NOX_VENV": str(nox_python.parent.parent)}
    proc = _run(["bash", str(IN_CONTAINER), "-s", "gpu"], env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[-2:] == [str(image_venv), "image sglang stand-in"]
    assert "No module named" not in proc.stderr


def test_in_container_refuses_an_interpreter_without_sglang(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    assert _run([sys.executable, "-m", "venv", "--without-pip", str(bare)],
                env=_clean_env()).returncode == 0
    env = {**_clean_env(), "SERVEGATE_PYTHON": str(bare / "bin" / "python")}
    proc = _run(["bash", str(IN_CONTAINER), "-s", "gpu"], env=env, cwd=tmp_path)
    if envbuild.missing_modules(str(bare / "bin" / "python"), ["sglang"]) == []:
        pytest.skip("the base interpreter has an sglang")
    assert proc.returncode == 2
    assert "cannot import sglang" in proc.stderr and "/opt/venv/bin/python" in proc.stderr


# ``servegate env``: locate or build the shared CPU environment and print its interpreter.


def test_comment_edits_keep_the_environment(tmp_path: Path) -> None:
    """A fixed comment in the lock must not strand the 6 GB environment; a new pin must."""
    lock = tmp_path / "lock.txt"
    lock.write_text("# old comment\nb==2\na==1  # why\n")
    before = envbuild.lock_pins(lock)
    lock.write_text("# a corrected comment\n\na==1\nb==2\n")
    assert envbuild.lock_pins(lock) == before
    lock.write_text("a==1\nb==3\n")
    assert envbuild.lock_pins(lock) != before


# --------------------------------------------------------------------------- ensure_chromium

class _Machine:
    """What ensure_chromium sees: programs on PATH, its effective uid, and every command it ran
    (each answered with the exit code the test chose; installing puts chromium on PATH)."""

    def __init__(self, *programs: str, euid: int = 1000, codes: dict[str, int] | None = None,
                 package_has_binary: bool = True):
        self.programs = set(programs)
        self.uid = euid
        self.codes = codes or {}
        self.package_has_binary = package_has_binary
        self.ran: list[list[str]] = []
        self.lines: list[str] = []

    def which(self, name: str) -> str | None:
        return f"/usr/bin/{name}" if name in self.programs else None

    def run(self, argv: list[str]) -> int:
        self.ran.append(argv)
        step = "install" if "install" in argv else "update" if "update" in argv else argv[-1]
        code = self.codes.get(step, 0)
        if step == "install" and code == 0 and self.package_has_binary:
            self.programs.add("chromium")
        return code

    def ensure(self, tmp_path: Path) -> bool:
        return envbuild.ensure_chromium(self.lines.append, which=self.which, run=self.run,
                                        euid=lambda: self.uid, log_file=tmp_path / "apt.log")


UPDATE = ["apt-get", "update", "-qq"]
INSTALL = ["DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq", "chromium"]


@pytest.fixture
def no_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVEGATE_CHROMIUM", raising=False)


@pytest.mark.parametrize("name", ["chromium", "chromium-browser"])
def test_chromium_already_on_path_is_left_alone(tmp_path: Path, no_override: None,
                                               name: str) -> None:
    machine = _Machine(name, "apt-get", euid=0)
    assert machine.ensure(tmp_path) is True
    assert machine.ran == []
    assert machine.lines == [f"[servegate env] chromium: /usr/bin/{name} (the browser test runs)"]


def test_an_explicit_chromium_is_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVEGATE_CHROMIUM", "/opt/chrome/chrome")
    machine = _Machine("apt-get", euid=0)
    assert machine.ensure(tmp_path) is True and machine.ran == []
    assert "/opt/chrome/chrome" in machine.lines[0]


def test_without_apt_nothing_is_run_and_the_log_says_why(tmp_path: Path,
                                                         no_override: None) -> None:
    machine = _Machine("sudo", euid=0)
    assert machine.ensure(tmp_path) is False
    assert machine.ran == []
    assert machine.lines == ["[servegate env] chromium: not installed and no apt-get here: the "
                             "browser test will be skipped"]


@pytest.mark.parametrize("programs, ran", [
    (("apt-get",), []),                                           # no sudo at all
    (("apt-get", "sudo"), [["sudo", "-n", "true"]]),              # sudo wants a password
])
def test_neither_root_nor_passwordless_sudo_installs_nothing(
        tmp_path: Path, no_override: None, programs: tuple[str, ...],
        ran: list[list[str]]) -> None:
    machine = _Machine(*programs, euid=1000, codes={"true": 1})
    assert machine.ensure(tmp_path) is False
    assert machine.ran == ran
    assert "neither root nor passwordless sudo" in machine.lines[-1]


def test_root_installs_debians_package_through_apt(tmp_path: Path, no_override: None) -> None:
    machine = _Machine("apt-get", euid=0)
    assert machine.ensure(tmp_path) is True
    assert machine.ran == [["env", *UPDATE], ["env", *INSTALL]]
    assert machine.lines[-1] == "[servegate env] chromium: installed /usr/bin/chromium"


def test_passwordless_sudo_installs_through_sudo(tmp_path: Path, no_override: None) -> None:
    machine = _Machine("apt-get", "sudo", euid=1000)
    assert machine.ensure(tmp_path) is True
    assert machine.ran == [["sudo", "-n", "true"], ["sudo", "-n", "env", *UPDATE],
                           ["sudo", "-n", "env", *INSTALL]]


@pytest.mark.parametrize("failing, ran", [("update", [["env", *UPDATE]]),
                                          ("install", [["env", *UPDATE], ["env", *INSTALL]])])
def test_a_failed_install_is_logged_never_raised(tmp_path: Path, no_override: None,
                                                 failing: str, ran: list[list[str]]) -> None:
    machine = _Machine("apt-get", euid=0, codes={failing: 100})
    assert machine.ensure(tmp_path) is False
    assert machine.ran == ran
    assert machine.lines[-1] == (
        f"[servegate env] chromium: could not install it ({' '.join(ran[-1])} exited 100; see "
        f"{tmp_path / 'apt.log'}): the browser test will be skipped")


def test_a_package_without_a_chromium_on_path_is_not_called_installed(
        tmp_path: Path, no_override: None) -> None:
    machine = _Machine("apt-get", euid=0, package_has_binary=False)
    assert machine.ensure(tmp_path) is False
    assert "no chromium is on PATH" in machine.lines[-1]


def test_the_install_steps_output_goes_to_the_log_file(tmp_path: Path) -> None:
    log_file = tmp_path / "apt.log"
    run = envbuild._logged_runner(log_file)
    assert run([sys.executable, "-c", "print('step out'); raise SystemExit(3)"]) == 3
    assert run([str(tmp_path / "no-such-program")]) == 127
    text = log_file.read_text()
    assert "step out\n" in text and text.startswith(f"$ {sys.executable} -c")
    assert envbuild._logged_runner(tmp_path / "missing" / "apt.log")(["true"]) == 127
