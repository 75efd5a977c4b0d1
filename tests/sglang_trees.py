"""Released sglang versions as unpacked trees (wheels from the package index), cached.

A wheel unpacked is exactly the ``sglang`` package a release ships; it is never installed, so
the shared environment's compiled dependencies stay as they are. Cached under
``$SERVEGATE_CACHE/trees/sglang-<version>`` like the shared environment.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from servegate import envbuild


def release_tree(version: str) -> Path:
    """The unpacked sglang ``version`` wheel (its folder holds ``sglang/``); skip if unreachable."""
    tree = envbuild.cache_root() / "trees" / f"sglang-{version}"
    if (tree / "sglang" / "__init__.py").is_file():
        return tree
    download = tree.with_name(tree.name + ".download")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
         f"sglang=={version}", "-d", str(download), "-q"],
        capture_output=True, text=True)
    wheels = sorted(download.glob("sglang-*.whl"))
    if proc.returncode != 0 or not wheels:
        pytest.skip(f"sglang {version} wheel not downloadable from the package index: "
                    f"{proc.stderr.strip().splitlines()[-1:] or proc.returncode}")
    partial = tree.with_name(tree.name + ".partial")
    with zipfile.ZipFile(wheels[0]) as wheel:
        wheel.extractall(partial)
    partial.rename(tree)
    shutil.rmtree(download, ignore_errors=True)
    return tree
