"""servegate.core.atomic: the file's exact bytes and the failure paths (issue 15)."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from fault_helpers import _failing_disk

import servegate
from servegate.core import atomic


def test_write_json_is_sorted_indented_utf8_with_a_newline(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "x.json"
    atomic.write_json(path, {"zeta": [1, 2], "alpha": {"b": 1, "a": "é"}})
    assert path.read_bytes() == (
        '{\n  "alpha": {\n    "a": "é",\n    "b": 1\n  },\n  "zeta": [\n    1,\n    2\n  ]\n}\n'
    ).encode()
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]      # no temp file left


def test_text_is_utf8_under_any_locale(tmp_path: Path) -> None:
    """A run folder written under an ASCII locale (LC_ALL=C) is still UTF-8 (in a fresh
    interpreter, where the locale decides the default encoding; written here first too, so
    mutmut associates this test with write_text)."""
    path = tmp_path / "summary.md"
    atomic.write_text(path, "é")
    assert path.read_bytes() == "é".encode()
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0",
           "PYTHONCOERCECLOCALE": "0", "PYTHONIOENCODING": "ascii",
           "PYTHONPATH": str(Path(servegate.__file__).resolve().parents[1])}
    code = ("import sys; from pathlib import Path; from servegate.core import atomic; "
            "atomic.write_text(Path(sys.argv[1]), 'median TTFT \\u2013 12 ms, \\u00e9')")
    subprocess.run([sys.executable, "-c", code, str(path)], env=env, check=True, timeout=60)
    assert path.read_text(encoding="utf-8") == "median TTFT – 12 ms, é"


def test_failed_rename_raises_the_os_error_even_when_the_temp_file_is_gone(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run.json"
    path.write_text("old")

    def replace_fails(src: str, dst: object) -> None:
        os.unlink(src)                         # e.g. a cleaner removed it meanwhile
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "replace", replace_fails)
    with pytest.raises(OSError) as info:
        atomic.write_text(path, "new")
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(path)
    assert path.read_text() == "old"


def test_an_error_that_names_its_file_keeps_that_name(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def replace_fails(src: str, dst: object) -> None:
        raise OSError(errno.EACCES, "Permission denied", "/elsewhere/locked")

    monkeypatch.setattr(atomic.os, "replace", replace_fails)
    with pytest.raises(OSError) as info:
        atomic.write_text(tmp_path / "x.txt", "new")
    assert info.value.filename == "/elsewhere/locked"
    assert list(tmp_path.iterdir()) == []                   # the temp file was removed


def test_an_error_without_errno_is_not_renamed(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def replace_fails(src: str, dst: object) -> None:
        raise OSError("odd failure")

    monkeypatch.setattr(atomic.os, "replace", replace_fails)
    with pytest.raises(OSError) as info:
        atomic.write_text(tmp_path / "x.txt", "new")
    assert info.value.filename is None


# Faults of the results folder and the disk: the run folder cannot be created or is read-only,
# the disk fills (or turns read-only) mid-run, and atomic writes keep the previous file whole.
#
# No server needed: the fault strikes before one would start (model preparation is stubbed).


def test_atomic_write_on_full_disk_keeps_old_file(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "run.json"
    atomic.write_json(path, {"points": [1, 2, 3]})
    _failing_disk(monkeypatch, tmp_path, errno.ENOSPC, after=0)
    with pytest.raises(OSError, match=re.escape(f"No space left on device: '{path}'")):
        atomic.write_json(path, {"points": [1, 2, 3, 4]})
    assert json.loads(path.read_text()) == {"points": [1, 2, 3]}
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
