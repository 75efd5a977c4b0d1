"""Write-then-rename, so a crash or a full disk never leaves a half-written result or baseline."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` (UTF-8) atomically."""
    write_bytes(path, text.encode("utf-8"))


def write_bytes(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically (same-directory temp file, fsync, rename)."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        _name(err, path)
        raise
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(err, OSError):
            _name(err, path)
        raise


def _name(err: OSError, path: Path) -> None:
    """A full disk raises from write/fsync without a file name; say which file it was."""
    if err.filename is None and err.errno is not None and err.strerror:
        err.filename = str(path)


def write_json(path: Path, data: Any) -> None:
    """Stable key order and a trailing newline, so a changed file diffs well in review."""
    write_text(path, json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n")



def write_section(path: Path, heading: str, section: str) -> None:
    """Replace the Markdown section under ``heading`` (up to the next ``## ``) in ``path``, or
    append it: a re-run rewrites its own section of ``summary.md``, never duplicates it."""
    text = Path(path).read_text(encoding="utf-8") if Path(path).is_file() else ""
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == heading), None)
    if start is None:
        sep = "" if not text or text.endswith("\n\n") else ("\n" if text.endswith("\n") else "\n\n")
        write_text(path, text + sep + section)
        return
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
               len(lines))
    tail = "".join(lines[end:])
    write_text(path, "".join(lines[:start]) + section + ("\n" + tail if tail else ""))
