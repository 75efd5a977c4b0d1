"""Which sglang will the servers import, and can it do exact fill at all?

PR #32888's gate was first released in sglang 0.5.20; modes ``on`` and ``forced`` fail before
any server starts on an older one, naming the version found and the minimum. Read from the
files, not by importing sglang (8-16 s, and it would pin this process to one tree)."""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from servegate.core.errors import ServegateError

MIN_VERSION = "0.5.20"
GATE_FILE = Path("srt") / "managers" / "schedule_policy.py"
GATE_DEF = "def _use_exact_chunk_fill("
EXACT_FILL_MODES = ("on", "forced")
_VERSION = re.compile(r"""^(?:__version__|version)\s*(?::\s*str\s*)?=\s*['"]([^'"]+)['"]""", re.M)


class UnsupportedSglang(ServegateError, RuntimeError):
    """The sglang servegate would run cannot do what the requested modes need."""


@dataclass(frozen=True)
class SglangInfo:
    package_dir: Path       # .../sglang (the package folder the servers will import)
    version: str            # "0.5.23", or "unknown"
    has_gate: bool          # schedule_policy defines _use_exact_chunk_fill


def _version_of(package_dir: Path) -> str:
    """From the metadata beside the package (installed or unpacked wheel), the generated
    ``_version.py``, or a source checkout's ``pyproject.toml``."""
    for dist in importlib.metadata.distributions(name="sglang", path=[str(package_dir.parent)]):
        return dist.version
    for candidate in (package_dir / "_version.py", package_dir.parent / "pyproject.toml"):
        if candidate.is_file():
            found = _VERSION.search(candidate.read_text(encoding="utf-8"))
            if found:
                return found.group(1)
    return "unknown"


def locate_sglang(search_path: Sequence[str] | None = None) -> SglangInfo:
    """The sglang package first on ``search_path`` (default ``sys.path``), without importing it."""
    import sys

    spec = importlib.machinery.PathFinder.find_spec("sglang", list(search_path or sys.path))
    if spec is None or not spec.submodule_search_locations:
        where = ", ".join(search_path) if search_path else "sys.path"
        raise UnsupportedSglang(f"no sglang package found on {where}")
    package_dir = Path(next(iter(spec.submodule_search_locations)))
    gate_file = package_dir / GATE_FILE
    has_gate = gate_file.is_file() and GATE_DEF in gate_file.read_text(encoding="utf-8")
    return SglangInfo(package_dir, _version_of(package_dir), has_gate)


def require_exact_fill(modes: Sequence[str], info: SglangInfo) -> None:
    """Fail at once when ``on``/``forced`` are asked of an sglang without the gate."""
    wanted = [m for m in modes if m in EXACT_FILL_MODES]
    if wanted and not info.has_gate:
        raise UnsupportedSglang(
            f"sglang {info.version} at {info.package_dir} has no exact chunk fill gate "
            f"(`{GATE_DEF[4:-1]}` in {GATE_FILE}): modes {', '.join(wanted)} need sglang >= "
            f"{MIN_VERSION} (PR #32888); run only --modes off on this sglang")
