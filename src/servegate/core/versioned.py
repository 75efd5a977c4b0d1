"""Versioned JSON files: every file servegate writes carries a schema version, and reading an
older one upgrades it in memory, step by step (v -> v + 1, like asv's ``Results.update_to_N``),
instead of refusing it. ``servegate upgrade PATH...`` rewrites files atomically; a file from a
newer servegate, or without a usable version, is an error naming the file and the key."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servegate.core.errors import ServegateError

Upgrade = Callable[[dict[str, Any], Path], dict[str, Any]]


class SchemaVersionError(ServegateError, ValueError):
    """A file's schema version is missing, not an integer, unknown or newer than this code."""


@dataclass(frozen=True)
class Schema:
    kind: str                               # "run.json", "baseline", "golden trace"
    version_key: str                        # "schema_version" (golden traces: "schema")
    current: int
    upgrades: Mapping[int, Upgrade]         # from version v to v + 1

    def version_of(self, data: Any, path: Path) -> int:
        if not isinstance(data, dict):
            raise SchemaVersionError(f"{path}: expected a JSON object at top level "
                                     f"(a {self.kind})")
        version = data.get(self.version_key)
        if isinstance(version, bool) or not isinstance(version, int):
            raise SchemaVersionError(f"{path}: {self.version_key} must be an integer, got "
                                     f"{version!r} (is this a servegate {self.kind}?)")
        if version > self.current:
            raise SchemaVersionError(f"{path}: {self.version_key} {version} is newer than this "
                                     f"servegate reads ({self.current}); update servegate")
        oldest = min(self.upgrades, default=self.current)
        if version < oldest:
            raise SchemaVersionError(f"{path}: {self.version_key} {version}: no upgrade from "
                                     f"versions before {oldest}")
        return version

    def upgrade(self, data: Any, path: Path) -> tuple[dict[str, Any], int]:
        """(the document at the current version, the version it was read at)."""
        found = version = self.version_of(data, path)
        while version < self.current:
            data = self.upgrades[version](dict(data), path)
            version += 1
            data[self.version_key] = version
        return data, found
