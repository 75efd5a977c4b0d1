"""A tiny declarative checker for TOML tables: unknown keys and wrong types name file and key."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from servegate.core.errors import ServegateError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


class ConfigError(ServegateError, ValueError):
    """A suite or model profile is invalid; the message names the file, the key and the rule."""


@dataclass(frozen=True)
class Field:
    kind: type | tuple[type, ...]
    required: bool = False
    item: type | None = None        # element type for lists / value type for str-keyed tables


def _kind_name(kind: type | tuple[type, ...]) -> str:
    if isinstance(kind, tuple):
        return " or ".join(k.__name__ for k in kind)
    return {dict: "table", list: "array", str: "string", int: "integer", float: "float",
            bool: "boolean"}.get(kind, kind.__name__)


def _is(value: Any, kind: type | tuple[type, ...]) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        return False                # TOML true is not an integer here
    if float in kinds and isinstance(value, int) and not isinstance(value, bool):
        return True
    return isinstance(value, kinds)


def check_table(path: Path, where: str, table: Any, spec: dict[str, Field]) -> dict[str, Any]:
    """Validate one table against ``spec``; ``where`` is its dotted name for messages."""
    label = f"[{where}]" if where else "top level"
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: {label}: expected a table, got {type(table).__name__}")
    for key in table:
        if key not in spec:
            known = ", ".join(sorted(spec))
            raise ConfigError(f"{path}: {label}: unknown key {key!r} (known: {known})")
    for key, field in spec.items():
        name = f"{where}.{key}" if where else key
        if key not in table:
            if field.required:
                raise ConfigError(f"{path}: missing required key {name!r}")
            continue
        value = table[key]
        if not _is(value, field.kind):
            raise ConfigError(f"{path}: {name}: expected {_kind_name(field.kind)}, "
                              f"got {type(value).__name__} {value!r}")
        if field.item is not None and isinstance(value, (list, dict)):
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for sub, item in items:
                if not _is(item, field.item):
                    raise ConfigError(f"{path}: {name}[{sub!r}]: expected "
                                      f"{_kind_name(field.item)}, got {type(item).__name__} "
                                      f"{item!r}")
    return table


def load_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(f"{path}: not found")
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"{path}: not valid TOML ({err})") from err
