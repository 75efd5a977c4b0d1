"""Model profiles (``models/<name>.toml``): how to serve one model on each runner class.

A ``[runners.<key>]`` section is keyed by a runner class (``mi355x``) or by an architecture
(``gfx95``, ``gfx942``, ``nvidia``, ``cpu``; see :mod:`servegate.core.runner_classes`): a class uses its own
section when the profile has one, else its architecture's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from servegate.config._schema import ConfigError, Field, check_table, load_toml
from servegate.config.speed import SpeedModel, parse_speed
from servegate.core import runner_classes

SECTION_KEYS: tuple[str, ...] = (*runner_classes.ARCHES, *runner_classes.names())
HEALTH_PATHS = ("/health", "/health_generate")
PREPARE_KINDS = ("gguf-from-package",)

_MODEL = {
    "name": Field(str, required=True),
    "path": Field(str, required=True),
    "revision": Field(str),
    "description": Field(str),
    "prepare": Field(dict),
}
_PREPARE = {
    "kind": Field(str, required=True),
    "package_file": Field(str, required=True),
}
_RUNNER = {
    "description": Field(str),
    "launch_timeout_s": Field(int, required=True),
    "chunked_prefill_size": Field(int, required=True),
    "page_size": Field(int),
    "args": Field(list, item=str),
    "env": Field(dict, item=str),
    "cpu_standin": Field(bool),
    "health_path": Field(str),
    "speed": Field(dict),
}
_TOP = {"model": Field(dict, required=True), "runners": Field(dict, required=True)}


@dataclass(frozen=True)
class Prepare:
    kind: str
    package_file: str


@dataclass(frozen=True)
class RunnerProfile:
    """Server settings for one runner class; ``args`` are extra argv items, never a shell string."""

    runner_class: str
    launch_timeout_s: int
    chunked_prefill_size: int
    page_size: int | None = None
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    cpu_standin: bool = False
    health_path: str = "/health"
    description: str = ""
    speed: SpeedModel | None = None     # [runners.<key>.speed]: what servegate plan prices


@dataclass(frozen=True)
class ModelProfile:
    name: str
    path: str                      # HF id (GPU) or logical id when ``prepare`` makes a folder
    source: Path
    runners: dict[str, RunnerProfile]
    revision: str | None = None
    prepare: Prepare | None = None
    description: str = ""

    def for_runner(self, runner_class: str) -> RunnerProfile:
        """The class's own section, else its architecture's (``runner_class`` may itself be an
        architecture, e.g. for preflight)."""
        keys = [runner_class]
        if runner_class in runner_classes.REGISTRY:
            keys.append(runner_classes.REGISTRY[runner_class].arch)
        for key in keys:
            if key in self.runners:
                return self.runners[key]
        raise ConfigError(
            f"{self.source}: no [runners.{'] or [runners.'.join(keys)}] section (model "
            f"{self.name!r} has {', '.join(sorted(self.runners)) or 'none'})")


def _positive(path: Path, name: str, value: int | None) -> None:
    if value is not None and value <= 0:
        raise ConfigError(f"{path}: {name}: expected a positive integer, got {value}")


def _runner(path: Path, cls: str, raw: object) -> RunnerProfile:
    where = f"runners.{cls}"
    table = check_table(path, where, raw, _RUNNER)
    if cls not in SECTION_KEYS:
        raise ConfigError(f"{path}: [runners.{cls}]: unknown runner class or architecture "
                          f"(expected one of {', '.join(SECTION_KEYS)})")
    for key in ("launch_timeout_s", "chunked_prefill_size", "page_size"):
        _positive(path, f"{where}.{key}", table.get(key))
    chunk, page = table["chunked_prefill_size"], table.get("page_size")
    if page is not None and chunk % page:
        raise ConfigError(f"{path}: {where}.chunked_prefill_size {chunk} must be a multiple "
                          f"of page_size {page}")
    args = tuple(table.get("args", ()))
    for managed in ("--chunked-prefill-size", "--page-size", "--port", "--host", "--model-path"):
        if managed in args:
            raise ConfigError(f"{path}: {where}.args: {managed} is set by servegate (use the "
                              f"profile's own key instead)")
    health = table.get("health_path", "/health")
    if health not in HEALTH_PATHS:
        raise ConfigError(f"{path}: {where}.health_path: expected one of {HEALTH_PATHS}")
    return RunnerProfile(
        runner_class=cls, launch_timeout_s=table["launch_timeout_s"],
        chunked_prefill_size=chunk, page_size=page, args=args, env=dict(table.get("env", {})),
        cpu_standin=table.get("cpu_standin", False), health_path=health,
        description=table.get("description", ""),
        speed=parse_speed(path, f"{where}.speed", table["speed"]) if "speed" in table else None)


def load_profile(path: Path) -> ModelProfile:
    """Load and validate one profile; every error names the file and the offending key."""
    path = Path(path)
    data = check_table(path, "", load_toml(path), _TOP)
    model = check_table(path, "model", data["model"], _MODEL)
    if model["name"] != path.stem:
        raise ConfigError(f"{path}: model.name {model['name']!r} must match the file name "
                          f"{path.stem!r}")
    prepare = None
    if "prepare" in model:
        raw = check_table(path, "model.prepare", model["prepare"], _PREPARE)
        if raw["kind"] not in PREPARE_KINDS:
            raise ConfigError(f"{path}: model.prepare.kind {raw['kind']!r}: expected one of "
                              f"{PREPARE_KINDS}")
        prepare = Prepare(kind=raw["kind"], package_file=raw["package_file"])
    runners_raw = data["runners"]
    if not runners_raw:
        raise ConfigError(f"{path}: [runners]: needs at least one runner class section")
    runners = {cls: _runner(path, cls, raw) for cls, raw in runners_raw.items()}
    return ModelProfile(
        name=model["name"], path=model["path"], source=path, runners=runners,
        revision=model.get("revision"), prepare=prepare,
        description=model.get("description", ""))
