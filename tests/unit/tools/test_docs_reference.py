"""The generated reference covers the code: every flag of every command, every key of every suite
and model table, every run.json and verdict.json key (tools/docs_reference.py, the docs' hook).

Each test reads the truth from the code itself (the parsers, every table spec found in
``servegate.config``, the pydantic schema, the verdict writer), never from the generator's own
lists, so a new flag, key or table the generator does not render fails here.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import re
import textwrap
from pathlib import Path

import docs_reference as ref
import pytest

import servegate.config
from servegate.commands.dispatch import COMMANDS
from servegate.config._schema import Field

Section = tuple[str, set[str]]


def sections(page: str) -> list[Section]:
    """(heading, the backticked names in the first column of its table rows), in page order."""
    out: list[Section] = []
    for line in page.splitlines():
        if line.startswith("#"):
            out.append((line.lstrip("#").strip(), set()))
        elif line.startswith("| `") and out:
            out[-1][1].update(re.findall(r"`([^`]+)`", line.split("|")[1]))
    return out


def parser_options(title: str, parser: argparse.ArgumentParser) -> dict[str, set[str]]:
    """{"servegate history add": {"run_dir", "--store"}, ...}: every parser and subparser."""
    found = {title: {opt for action in parser._actions
                     if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))
                     for opt in (action.option_strings or [action.dest])}}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(parser_options(f"{title} {name}", sub))
    return found


def missing_flags(page: str, commands: dict[str, argparse.ArgumentParser]) -> list[str]:
    rendered = dict(sections(page))
    missing = []
    for name, parser in commands.items():
        for title, options in parser_options(f"servegate {name}", parser).items():
            if title not in rendered:
                missing.append(f"{title}: no section")
            missing += [f"{title}: {opt}" for opt in sorted(options - rendered.get(title, set()))]
    return missing


def all_commands() -> dict[str, argparse.ArgumentParser]:
    return {name: importlib.import_module(module).build_parser()
            for name, (module, _) in COMMANDS.items()}


def test_every_flag_of_every_command_is_in_the_cli_reference() -> None:
    commands = all_commands()
    assert {"bench", "compare", "history", "admission"} <= set(commands)
    assert missing_flags(ref.cli_page(), commands) == []


def test_a_flag_left_out_of_the_page_is_named() -> None:
    commands = all_commands()
    page = "\n".join(line for line in ref.cli_page().splitlines()
                     if not line.startswith("| `--history-store`"))
    assert missing_flags(page, commands) == ["servegate compare: --history-store"]
    extra = argparse.ArgumentParser()
    extra.add_argument("--new-flag")
    assert missing_flags(ref.cli_page(), {"extra": extra}) == ["servegate extra: no section",
                                                               "servegate extra: --new-flag"]


def config_specs() -> dict[str, dict[str, Field]]:
    """Every table spec in servegate.config: a module-level dict of ``Field`` values."""
    specs = {}
    for info in pkgutil.iter_modules(servegate.config.__path__, "servegate.config."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if isinstance(value, dict) and value and all(isinstance(v, Field)
                                                         for v in value.values()):
                specs[f"{info.name}.{name}"] = value
    return specs


def missing_tables(page: str, specs: dict[str, set[str]]) -> list[str]:
    rendered = [keys for _, keys in sections(page)]
    return [name for name, keys in specs.items() if keys not in rendered]


def test_every_table_and_key_of_the_config_is_in_the_config_reference() -> None:
    from servegate.config import judge

    specs = {name: set(spec) for name, spec in config_specs().items()}
    assert len(specs) >= 10       # suites (7), profiles (4), profiling, speed
    specs["[judge]"] = set(judge._TOP_KEYS)
    specs["[judge.claims]"] = set(judge._CLAIM_KEYS)
    page = ref.config_page()
    assert missing_tables(page, specs) == []
    assert all(f"`{old}`" in page for old in judge.DEPRECATED_CLAIM_KEYS)


def test_a_key_left_out_of_the_config_page_is_named() -> None:
    page = "\n".join(line for line in ref.config_page().splitlines()
                     if not line.startswith("| `range_ratio`"))
    specs = {name: set(spec) for name, spec in config_specs().items()}
    assert missing_tables(page, specs) == ["servegate.config.suites._LOAD"]


def test_every_run_json_key_is_in_the_run_json_reference() -> None:
    from pydantic import TypeAdapter

    from servegate.core.results import Run

    schema = TypeAdapter(Run).json_schema()
    rendered = dict(sections(ref.run_json_page()))
    for name, part in [("Run", schema), *schema["$defs"].items()]:
        assert set(part["properties"]) == rendered[name], name


def test_every_verdict_json_key_is_in_the_verdict_json_reference() -> None:
    from servegate.config.judge import JudgeConfig
    from servegate.judge.checks import CHECK_KEYS, Check
    from servegate.judge.judgement import Judgement
    from servegate.report.verdict_json import build

    doc = build(Judgement(Path("r"), None, JudgeConfig(), [Check("integrity", "", "", "pass")],
                          baseline_file=Path("b.json")))
    rendered = dict(sections(ref.verdict_json_page()))
    assert set(doc) == rendered["Top level"]
    assert set(doc["baseline"]) == rendered["baseline"]
    assert set(CHECK_KEYS) == rendered["checks[]"]


def test_every_written_description_names_a_key_of_the_code() -> None:
    """``NOTES`` describe keys the source does not comment; a renamed key leaves none behind."""
    pages = sections(ref.config_page()) + sections(ref.verdict_json_page())
    where = {"verdict": "Top level", "baseline": "baseline", "check": "checks[]"}
    for table, notes in ref.NOTES.items():
        heading = where.get(table, table if table == "Top level" else f"`{table}`")
        keys = set().union(*(k for h, k in pages if h == heading))
        assert set(notes) <= keys, (table, set(notes) - keys)


def test_descriptions_are_the_comments_beside_each_key(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "commented.py").write_text(textwrap.dedent('''
        from dataclasses import dataclass

        SPEC = {
            "plain": 1,
            # the line above
            # and the next one
            "above": 2,
            "beside": 3,      # on its line
            "a": 4, "b": 5,   # two keys share this comment: neither gets it
        }


        @dataclass
        class Settings:
            floor: float = 0.1    # the floor
            # a field's comment above it
            seed: int = 1
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("commented")
    assert ref.key_comments(module, "SPEC") == {
        "plain": "", "above": "the line above and the next one", "beside": "on its line",
        "a": "", "b": ""}
    assert ref.key_comments(module, "Settings") == {"floor": "the floor",
                                                     "seed": "a field's comment above it"}
    with pytest.raises(LookupError):
        ref.key_comments(module, "Missing")


def test_usage_lines_do_not_depend_on_the_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    narrow = ref.cli_page()
    monkeypatch.setenv("COLUMNS", "250")
    assert ref.cli_page() == narrow
