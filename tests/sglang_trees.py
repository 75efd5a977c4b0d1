"""Released sglang versions as unpacked trees (wheels from the package index), cached.

A wheel unpacked is exactly the ``sglang`` package a release ships; it is never installed, so
the shared environment's compiled dependencies stay as they are. Cached under
``$SERVEGATE_CACHE/trees/sglang-<version>`` like the shared environment.
"""

from __future__ import annotations

import compileall
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from servegate.serve import envbuild


def release_tree(version: str) -> Path:
    """The unpacked sglang ``version`` wheel (its folder holds ``sglang/``); skip if unreachable."""
    tree = envbuild.cache_root() / "trees" / f"sglang-{version}"
    if (tree / "sglang" / "__init__.py").is_file():
        return _byte_compiled(tree)
    # Private download and unpack folders, then one rename: two test workers may fetch the
    # same release at once (`nox -s tests` runs replays two at a time), and the loser's copy
    # is dropped instead of replacing a tree the other may be importing.
    tree.parent.mkdir(parents=True, exist_ok=True)
    download = Path(tempfile.mkdtemp(prefix=f".{tree.name}.download.", dir=tree.parent))
    partial = Path(tempfile.mkdtemp(prefix=f".{tree.name}.partial.", dir=tree.parent))
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             f"sglang=={version}", "-d", str(download), "-q"],
            capture_output=True, text=True)
        wheels = sorted(download.glob("sglang-*.whl"))
        if proc.returncode != 0 or not wheels:
            pytest.skip(f"sglang {version} wheel not downloadable from the package index: "
                        f"{proc.stderr.strip().splitlines()[-1:] or proc.returncode}")
        with zipfile.ZipFile(wheels[0]) as wheel:
            wheel.extractall(partial)
        try:
            partial.rename(tree)
        except OSError:
            if not (tree / "sglang" / "__init__.py").is_file():
                raise
    finally:
        shutil.rmtree(download, ignore_errors=True)
        shutil.rmtree(partial, ignore_errors=True)
    return _byte_compiled(tree)


def _byte_compiled(tree: Path) -> Path:
    """``tree`` with every module compiled once into ``__pycache__``. These machines set
    PYTHONDONTWRITEBYTECODE=1, so Python never caches an unpacked tree's bytecode itself: every
    process importing it (a replay, and a server's launcher, scheduler and detokenizer) compiled
    sglang's ~4700 modules again (measured: a tree's server start 44 s against 31 s for the
    installed sglang). Safe to run twice at once (each .pyc is written by atomic rename)."""
    # One marker per interpreter tag: a cpython-312 run must compile its own .pyc files.
    marker = tree / f".servegate-compiled-{sys.implementation.cache_tag}"
    if not marker.is_file():
        if not compileall.compile_dir(tree / "sglang", quiet=2, workers=0):
            raise AssertionError(f"{tree}: compileall reported a module that does not compile")
        marker.write_text(f"{sys.version}\n")
    return tree


def installed_tree() -> Path:
    """The folder holding this interpreter's installed sglang (site-packages), found without
    importing it: a tree ``admission ab`` can take as it is."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("no sglang installed in this interpreter")
    return Path(next(iter(spec.submodule_search_locations))).parent


def edited_copy(tree: Path, dest: Path, edits: dict[str, tuple[str, str]]) -> Path:
    """A copy of ``tree``'s sglang (the package and its dist-info: a site-packages folder is
    a tree too) at ``dest`` with ``edits`` ({relative file: (old, new)}) applied.

    Files are hard-linked where possible (fast; the cache's trees are never written: an edited
    file is unlinked and written anew). Each ``old`` must occur exactly once in its file.
    """
    def link_or_copy(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    dest.mkdir(parents=True)
    for part in [tree / "sglang", *tree.glob("sglang-*.dist-info"), *tree.glob(".servegate-*")]:
        if part.is_dir():
            shutil.copytree(part, dest / part.name, copy_function=link_or_copy)
        else:
            link_or_copy(str(part), str(dest / part.name))
    for relative, (old, new) in edits.items():
        target = dest / relative
        text = target.read_text(encoding="utf-8")
        if text.count(old) != 1:
            raise AssertionError(f"{target}: expected {old!r} exactly once, found {text.count(old)}")
        target.unlink()
        target.write_text(text.replace(old, new), encoding="utf-8")
    return dest


# 0.5.19 cannot import over the shared environment (transformers 5.19 already registers the
# config name): ValueError: 'qwen3_asr' is already used by a Transformers config. 0.5.20 fixed
# exactly this with exist_ok=True; applying that one fix (nothing in the scheduler) makes 0.5.19's
# scheduler replayable as the base of the pair that brackets PR #32888.
ASR_FILE = "sglang/srt/configs/qwen3_asr.py"
ASR_FIX = {ASR_FILE: ('AutoConfig.register("qwen3_asr", Qwen3ASRConfig)\n'
                      'AutoConfig.register("qwen3_asr_thinker", Qwen3ASRThinkerConfig)\n',
                      'AutoConfig.register("qwen3_asr", Qwen3ASRConfig, exist_ok=True)\n'
                      'AutoConfig.register("qwen3_asr_thinker", Qwen3ASRThinkerConfig, exist_ok=True)\n')}
GATE_FILE = "sglang/srt/managers/schedule_policy.py"
GATE_BODY = "    return envs.SGLANG_EXACT_CHUNK_FILL.get() and is_gfx95_supported()\n"
# The gate leaked: exact fill everywhere, whatever SGLANG_EXACT_CHUNK_FILL says.
GATE_LEAK = {GATE_FILE: (GATE_BODY, "    return True  # leaked: every device, env ignored\n")}
# Exact fill broken: its truncation floors to the page like the old branch, so a forced batch
# stops short of the chunk while `off` is untouched (sglang 0.5.23, add_one_req's shape).
FORCED_FLOOR = {GATE_FILE: (
    "                extend_len = chunk_tokens_limit\n"
    "                if truncation_align_size is not None:\n",
    "                extend_len = chunk_tokens_limit // self.page_size * self.page_size\n"
    "                if truncation_align_size is not None:\n")}
# The gate opened on gfx942 too (what the PR's review asks for next): the tree's own device check
# for CDNA3, sglang's is_gfx942_supported (srt/utils/common.py), beside is_gfx95_supported.
GATE_GFX942 = {GATE_FILE: (GATE_BODY, (
    "    from sglang.srt.utils import is_gfx942_supported\n\n"
    "    return envs.SGLANG_EXACT_CHUNK_FILL.get() and (\n"
    "        is_gfx95_supported() or is_gfx942_supported())\n"))}
# Exact fill one token short: the exact-fill branch takes the remaining chunk minus one, so a
# saturated batch is chunk - 1 tokens with exact fill on (issue 40: found by admission alone).
EXACT_FILL_SHORT = {GATE_FILE: (
    "                extend_len = chunk_tokens_limit\n"
    "                if truncation_align_size is not None:\n",
    "                extend_len = chunk_tokens_limit - 1\n"
    "                if truncation_align_size is not None:\n")}
# A commit whose scheduler needs a package this environment does not have: it does not import.
NO_IMPORT = {GATE_FILE: ("import logging\n",
                         "import logging\nimport sglang_missing_dependency  # not installed\n")}
