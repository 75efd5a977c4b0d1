"""Every repository path the prose names in backticks exists: README.md, docs/**/*.md, suites/*.toml.

A move (``judge/config.py`` -> ``config/judge.py``) otherwise leaves the pages pointing at
nothing. A *repository path* is a backticked token that starts with a top-level entry of the
repository (``src/``, ``tests/``, ``suites/``, ...; ``noxfile.py``, ``pyproject.toml``,
``README.md``), or with ``servegate/`` (relative to ``src/``), or with a package of
``src/servegate/`` followed by ``/`` (``judge/nested.py``, relative to ``src/servegate/``; a
module may be named without ``.py``: ``core/results``). Not paths: tokens with spaces or
placeholders (``*``, ``<``, ``{``, ``$``, ``...``), run outputs (``results/...``), anything in a
fenced code block. A ``::test_name`` or ``:line`` suffix is dropped.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from repo_files import REPO_ROOT

TOP_DIRS = ("src/", "tests/", "suites/", "models/", "baselines/", "ci/", "docs/", "tools/", ".ci/")
TOP_FILES = ("noxfile.py", "pyproject.toml", "README.md")
PLACEHOLDERS = (" ", "*", "<", "{", "$", "...")
SPAN = re.compile(r"`([^`\n]+)`")
SUFFIX = re.compile(r"(::.*|:\d+(-\d+)?)$")


def pages(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md")),
            *sorted((root / "suites").glob("*.toml"))]


def repo_path(token: str, root: Path) -> Path | None:
    """Where ``token`` points in the repository at ``root``, or None when it is not a path."""
    if any(mark in token for mark in PLACEHOLDERS):
        return None
    token = SUFFIX.sub("", token)
    packages = {p.name for p in (root / "src" / "servegate").iterdir() if p.is_dir()}
    if token.startswith(TOP_DIRS) or token in TOP_FILES:
        return root / token
    if token.startswith("servegate/"):
        return root / "src" / token
    if "/" in token and token.split("/", 1)[0] in packages:
        return root / "src" / "servegate" / token
    return None


def exists(path: Path) -> bool:
    """A file or folder, or a module named without ``.py``."""
    return path.exists() or (path.suffix == "" and path.with_name(path.name + ".py").is_file())


def named_paths(page: Path, root: Path) -> list[tuple[int, str, Path]]:
    """(line, token, path) of every repository path in backticks on ``page``."""
    found, fenced = [], False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        for token in SPAN.findall(line):
            path = repo_path(token.strip(), root)
            if path is not None:
                found.append((number, token, path))
    return found


def missing_paths(root: Path) -> list[str]:
    return [f"{page.relative_to(root)}:{number}: `{token}` does not exist"
            for page in pages(root) for number, token, path in named_paths(page, root)
            if not exists(path)]


def test_every_repository_path_in_the_docs_exists() -> None:
    named = [item for page in pages(REPO_ROOT) for item in named_paths(page, REPO_ROOT)]
    assert len(named) > 100          # the pages do name paths: the scan finds them
    missing = missing_paths(REPO_ROOT)
    assert not missing, "\n".join(missing)


def test_a_moved_module_is_named_with_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "src" / "servegate" / "config").mkdir(parents=True)
    (tmp_path / "src" / "servegate" / "config" / "judge.py").write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "suites").mkdir()
    (tmp_path / "README.md").write_text("The keys: `src/servegate/config/judge.py`.\n")
    (tmp_path / "docs" / "a.md").write_text(
        "intro\nsee `src/servegate/judge/config.py:12` and `config/judge` and `config/x.py`"
        " and `judge/x.py`\n"
        "```\n`src/gone.py` in a fenced block\n```\n"
        "`results/run-1/run.json`, `suites/*.toml`, `tests/unit/<pkg>/`, `nox -s unit`\n")
    (tmp_path / "suites" / "s.toml").write_text("# (keys: `servegate/judge/config.py`)\n")
    # `judge/x.py` names no package of this tree's src/servegate/: not a repository path
    assert missing_paths(tmp_path) == [
        "docs/a.md:2: `src/servegate/judge/config.py:12` does not exist",
        "docs/a.md:2: `config/x.py` does not exist",
        "suites/s.toml:1: `servegate/judge/config.py` does not exist",
    ]


@pytest.mark.parametrize(("token", "where"), [
    ("tests/unit/judge/test_family.py::test_holm[3]", "tests/unit/judge/test_family.py"),
    ("src/servegate/plan.py:120-130", "src/servegate/plan.py"),
    ("core/results", "src/servegate/core/results"),
    ("servegate/judge/", "src/servegate/judge/"),
    ("noxfile.py", "noxfile.py"),
])
def test_suffixes_are_dropped_and_relative_forms_resolved(token: str, where: str) -> None:
    assert repo_path(token, REPO_ROOT) == REPO_ROOT / where


@pytest.mark.parametrize("token", ["results/cpu-cpu-1/run.json", "python/sglang", "judge",
                                   "baselines/<class>/x.json", "tests/unit/.../x.py",
                                   "srt/managers/schedule_policy.py", "SRC_DIR/x"])
def test_what_is_not_a_repository_path(token: str) -> None:
    assert repo_path(token, REPO_ROOT) is None
