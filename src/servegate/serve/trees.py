"""An sglang source tree as the code under test: resolve ``--sglang-src PATH`` (or ``--base`` /
``--head``) without importing it. PATH is a checkout (``PATH/python/sglang``) or an unpacked
package (``PATH/sglang``), put first on the import path of the process that runs it; recorded as
``{path, version, commit, dirty}``."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from servegate.core.errors import ServegateError
from servegate.serve.support import locate_sglang

SGLANG_SRC = "--sglang-src"


class TreeError(ServegateError, ValueError):
    """A tree option does not name a usable sglang tree; the message names the flag and path."""


@dataclass(frozen=True)
class SglangTree:
    path: Path              # as given (absolute)
    import_root: Path       # the folder holding sglang/: goes first on the import path
    package_dir: Path       # import_root / "sglang"
    version: str            # "0.5.20", or "unknown"
    has_gate: bool          # schedule_policy._use_exact_chunk_fill exists (sglang >= 0.5.20)
    commit: str | None      # HEAD of the git checkout holding the tree; None if not a checkout
    dirty: bool | None      # tracked files modified in that checkout; None if not a checkout
    flag: str = SGLANG_SRC  # the option the path came from: errors about the tree name it

    def record(self) -> dict[str, object]:
        """What run outputs record about the code under test."""
        return {"path": str(self.path), "version": self.version, "commit": self.commit,
                "dirty": self.dirty, "import_root": str(self.import_root),
                "has_gate": self.has_gate}

    def pythonpath(self, *after: str, env: Mapping[str, str] | None = None) -> str:
        """``PYTHONPATH`` for a child process: this tree first, then ``after``, then the rest."""
        rest = (env if env is not None else os.environ).get("PYTHONPATH", "")
        parts = [str(self.import_root), *after, *([rest] if rest else [])]
        return os.pathsep.join(parts)


def _import_root(path: Path, flag: str) -> Path:
    for candidate in (path, path / "python"):
        if (candidate / "sglang" / "__init__.py").is_file():
            return candidate
    raise TreeError(
        f"{flag} {path}: not an sglang tree: expected an unpacked package "
        f"({path / 'sglang' / '__init__.py'}) or a checkout ({path / 'python' / 'sglang' / '__init__.py'})")


def git_output(top: Path, *args: str) -> str | None:
    """``git -C top ARGS`` stripped stdout, or None when git fails or is missing."""
    try:
        proc = subprocess.run(["git", "--no-optional-locks", "-C", str(top), *args],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def _git_state(import_root: Path) -> tuple[str | None, bool | None]:
    """Commit and dirty flag when the tree is (the python/ folder of) a git checkout's root.

    A tree that merely sits inside some other repository (say an unpacked wheel under a project
    folder) is not a checkout: that repository's commit says nothing about the tree.
    """
    top = git_output(import_root, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() not in (import_root.resolve(), import_root.resolve().parent):
        return None, None
    commit = git_output(Path(top), "rev-parse", "HEAD")
    status = git_output(Path(top), "status", "--porcelain", "--untracked-files=no")
    return commit, (bool(status) if status is not None else None)


def resolve_tree(path: str | os.PathLike[str], flag: str = SGLANG_SRC) -> SglangTree:
    """Resolve ``PATH`` (checkout or unpacked package) without importing sglang; ``flag`` is the
    option it was given with (``--sglang-src``, ``--base``, ``--head``), named by every error."""
    given = Path(path).expanduser().absolute()
    if not given.is_dir():
        raise TreeError(f"{flag} {given}: no such directory")
    root = _import_root(given, flag)
    info = locate_sglang([str(root)])
    if info.package_dir.resolve() != (root / "sglang").resolve():
        raise TreeError(f"{flag} {given}: sglang resolved to {info.package_dir}, "
                        f"expected {root / 'sglang'}")
    commit, dirty = _git_state(root)
    return SglangTree(path=given, import_root=root, package_dir=root / "sglang",
                      version=info.version, has_gate=info.has_gate, commit=commit, dirty=dirty,
                      flag=flag)


def describe_import_failure(tree: SglangTree, err: BaseException) -> str:
    """Name the tree and the failing import: the innermost module of the tree on the traceback."""
    where = ""
    root = tree.import_root.resolve()
    frame = err.__traceback__
    while frame is not None:
        file = Path(frame.tb_frame.f_code.co_filename)
        try:
            relative = file.resolve().relative_to(root)
        except (ValueError, OSError):
            relative = None
        if relative is not None:
            module = ".".join(relative.with_suffix("").parts).removesuffix(".__init__")
            where = f" in {module} ({relative}:{frame.tb_lineno})"
        frame = frame.tb_next
    missing = getattr(err, "name", None) if isinstance(err, ImportError) else None
    detail = f"{type(err).__name__}: {err}" + (f" (module {missing!r})" if missing else "")
    return (f"{tree.flag} {tree.path}: sglang {tree.version} does not import over this "
            f"environment: importing sglang's scheduler failed{where}: {detail}")
