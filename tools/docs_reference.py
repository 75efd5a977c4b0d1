"""The documentation site's reference pages, generated from the code at every ``mkdocs build``.

A mkdocs hook (``mkdocs.yml``: ``hooks``), so the pages exist only in the built site and cannot go
stale in the repository:

- ``reference/cli.md``: every command of ``servegate.commands.dispatch.COMMANDS`` and every
  option of the parser its module's ``build_parser()`` returns (subcommands included);
- ``reference/config.md``: every key of a suite (``suites/*.toml``) and a model profile
  (``models/*.toml``), from the tables ``servegate.config`` validates against;
- ``reference/run-json.md`` (+ ``run.schema.json``): run.json from ``core.results``' TypedDicts,
  through pydantic's JSON schema;
- ``reference/verdict-json.md``: verdict.json as ``report.verdict_json.build`` writes it.

A key's description is the comment beside it in the source (same line, or the lines above), so
it is written once, where the key is defined. tests/unit/tools/test_docs_reference.py fails when a
flag or key of the code is missing here.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import io
import json
import os
import re
import sys
import tokenize
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]


# --- comments beside keys in the source --------------------------------------------------------

def _node(tree: ast.Module, name: str) -> ast.AST:
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == name:
            return node
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return node
    raise LookupError(f"{name} is not defined at the top of its module")


def key_comments(module: ModuleType, name: str) -> dict[str, str]:
    """``{key: comment}`` for the dict keys and class fields inside ``module.name``: the comment
    on the key's line (when the line holds one key) and the comment lines just above it."""
    source = inspect.getsource(module)
    comments: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
    lines = source.splitlines()
    keys: list[tuple[str, int]] = []
    for node in ast.walk(_node(ast.parse(source), name)):
        if isinstance(node, ast.Dict):
            keys += [(k.value, k.lineno) for k in node.keys
                     if isinstance(k, ast.Constant) and isinstance(k.value, str)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            keys.append((node.target.id, node.lineno))
    per_line = {line: sum(1 for _, ln in keys if ln == line) for _, line in keys}
    found: dict[str, str] = {}
    for key, line in keys:
        above, at = [], line - 1
        while at >= 1 and lines[at - 1].lstrip().startswith("#"):
            above.insert(0, comments.get(at, ""))
            at -= 1
        beside = [comments[line]] if line in comments and per_line[line] == 1 else []
        text = " ".join(part for part in (*above, *beside) if part)
        found.setdefault(key, text)
    return found


# --- markdown ----------------------------------------------------------------------------------

def prose(text: str) -> str:
    """A docstring as one Markdown paragraph (Sphinx roles and double backticks as code)."""
    text = re.sub(r":(?:class|mod|func|meth|data|attr):`~?([^`]+)`", r"`\1`", text)
    return " ".join(text.replace("``", "`").split())


def cell(text: object) -> str:
    """Text safe inside a table cell (no HTML, no column break, no emphasis)."""
    return (str(text).replace("``", "`").replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "&#124;").replace("*", "&#42;").replace("\n", " ").strip())


def table(header: tuple[str, ...], rows: list[tuple[str, ...]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return out + ["| " + " | ".join(row) + " |" for row in rows] + [""]


def code(text: object) -> str:
    return f"`{text}`"


def _notes() -> dict[str, dict[str, str]]:
    from servegate.config._schema import load_toml

    return load_toml(Path(__file__).with_name("docs_notes.toml"))


# Descriptions for keys whose source comment is missing or says too little (docs_notes.toml).
NOTES: dict[str, dict[str, str]] = _notes()

# --- CLI ---------------------------------------------------------------------------------------

def command_parsers() -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    """(command, what it does, its parser) for every command the ``servegate`` front door has."""
    from servegate.commands.dispatch import COMMANDS

    for name, (module, about) in COMMANDS.items():
        yield name, about, importlib.import_module(module).build_parser()


def subparsers(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """{name: (its help line, its parser)} of a parser's subcommands."""
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            found.update({name: (helps.get(name, ""), sub) for name, sub in action.choices.items()})
    return found


def _default(action: argparse.Action) -> str:
    value = action.default
    if value in (None, False, (), [], argparse.SUPPRESS) or action.required:
        return ""
    if value == sys.executable:
        return "this interpreter"
    if isinstance(value, (str, Path)) and Path(value).is_absolute():
        path = Path(value)
        return code(path.relative_to(REPO) if path.is_relative_to(REPO) else path)
    if isinstance(value, (tuple, list)):
        return code(",".join(map(str, value)))
    return code(value)


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices is not None:
        return " \\| ".join(code(c) for c in action.choices)
    return code(action.metavar or action.dest.upper())


def option_rows(parser: argparse.ArgumentParser) -> list[tuple[str, ...]]:
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        names = ", ".join(code(o) for o in action.option_strings) or code(action.dest)
        what = action.help or ""
        if action.required and action.option_strings:
            what = f"required. {what}"
        rows.append((names, _value(action), _default(action), cell(what)))
    return rows


def _command_section(level: int, title: str, about: str, parser: argparse.ArgumentParser) -> list[str]:
    out = [f"{'#' * level} {title}", ""]
    description = (parser.description or "").split("\n\n")[0].strip()
    for text in dict.fromkeys(t for t in (about, description) if t):
        out += [prose(text), ""]
    out += ["```text", parser.format_usage().strip(), "```", ""]
    rows = option_rows(parser)
    if rows:
        out += table(("option", "value", "default", "what it does"), rows)
    for name, (about, sub) in subparsers(parser).items():
        out += _command_section(level + 1, f"{title} {name}", about, sub)
    return out


def cli_page() -> str:
    out = ["# Command line", "",
           "Generated from the parsers (`build_parser()` of each command module named in "
           "`servegate.commands.dispatch.COMMANDS`). Exit codes for every command: 0 pass or "
           "improvement, 1 regression, 2 infrastructure or input error, 3 inconclusive with "
           "`--strict`. Outside an installed servegate: "
           "`PYTHONPATH=src python -m servegate <command> ...`; the nox sessions that wrap "
           "them are in the [user guide](../guide/run.md#nox-sessions).", ""]
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"           # argparse wraps usage lines to the terminal's width
    try:
        for name, about, parser in command_parsers():
            out += _command_section(2, f"servegate {name}", about, parser)
    finally:
        os.environ.pop("COLUMNS") if columns is None else os.environ.update(COLUMNS=columns)
    return "\n".join(out)


# --- suite and model TOML ----------------------------------------------------------------------

def _toml_type(kind: object) -> str:
    from servegate.config._schema import _kind_name

    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(_kind_name(k) for k in kinds)  # type: ignore[arg-type]


def _annotation_type(annotation: str) -> str:
    for prefix, name in (("tuple", "array"), ("list", "array"), ("dict", "table"),
                         ("float", "float"), ("int", "integer"), ("bool", "boolean"),
                         ("str", "string")):
        if annotation.startswith(prefix):
            return name
    return annotation


def _defaults(cls: type | None) -> dict[str, str]:
    if cls is None:
        return {}
    out = {}
    for f in dataclasses.fields(cls):
        value = f.default if f.default is not dataclasses.MISSING else \
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None
        if value not in (None, "", (), {}) and not dataclasses.is_dataclass(value):
            out[f.name] = code(",".join(map(str, value)) if isinstance(value, tuple) else
                               json.dumps(value) if isinstance(value, (dict, str, bool))
                               else value)
    return out


@dataclasses.dataclass(frozen=True)
class TomlTable:
    """One table of a suite or profile file: its keys from a Field spec (``module.spec``), their
    defaults from the dataclass that holds them (``defaults``)."""

    name: str
    module: str
    spec: str
    defaults: str | None = None
    about: str = ""


SUITE_TABLES = (
    TomlTable("Top level", "servegate.config.suites", "_TOP", None,
              "The tables of a suite file; unknown tables are refused."),
    TomlTable("[suite]", "servegate.config.suites", "_SUITE", "Suite"),
    TomlTable("[server]", "servegate.config.suites", "_SERVER", None,
              "Overrides of the model profile's runner section for this suite."),
    TomlTable("[load]", "servegate.config.suites", "_LOAD", "Load"),
    TomlTable("[design]", "servegate.config.suites", "_DESIGN", "Design"),
    TomlTable("[gsm8k]", "servegate.config.suites", "_GSM8K", "servegate.config.gsm8k:GSM8KSettings"),
    TomlTable("[profile]", "servegate.config.profiling", "_PROFILE",
              "servegate.config.profiling:ProfileSettings"),
)
PROFILE_TABLES = (
    TomlTable("Top level", "servegate.config.profiles", "_TOP", None,
              "The tables of a model profile; the file's name is the model's name."),
    TomlTable("[model]", "servegate.config.profiles", "_MODEL", "ModelProfile"),
    TomlTable("[model.prepare]", "servegate.config.profiles", "_PREPARE", "Prepare"),
    TomlTable("[runners.<key>]", "servegate.config.profiles", "_RUNNER", "RunnerProfile"),
    TomlTable("[runners.<key>.speed]", "servegate.config.speed", "_SPEED", None),
)


def _dataclass(where: str | None, module: ModuleType) -> type | None:
    if where is None:
        return None
    if ":" in where:
        name, attr = where.split(":")
        return getattr(importlib.import_module(name), attr)
    return getattr(module, where)


def toml_section(spec: TomlTable) -> list[str]:
    module = importlib.import_module(spec.module)
    fields = getattr(module, spec.spec)
    holder = _dataclass(spec.defaults, module)
    notes = key_comments(sys.modules[holder.__module__], holder.__name__) if holder else {}
    notes.update({key: text for key, text in key_comments(module, spec.spec).items() if text})
    notes = {**{k: v for k, v in notes.items() if v}, **NOTES.get(spec.name, {})}
    defaults = _defaults(holder)
    rows = [(code(key), _toml_type(f.kind) + (f" of {_toml_type(f.item)}" if f.item else ""),
             "yes" if f.required else "", "" if f.required else defaults.get(key, ""),
             cell(notes.get(key, ""))) for key, f in fields.items()]
    title = spec.name if spec.name == "Top level" else f"`{spec.name}`"
    out = [f"### {title}", ""] + ([spec.about, ""] if spec.about else [])
    return out + table(("key", "type", "required", "default", "what it is"), rows)


def judge_sections() -> list[str]:
    """``[judge]`` and ``[judge.claims]``: keys checked one by one (servegate.config.judge)."""
    from servegate.config import judge

    fields = {f.name: f for f in dataclasses.fields(judge.JudgeConfig)}
    comments = {k: v for k, v in key_comments(judge, "JudgeConfig").items() if v}
    notes = {**comments, **NOTES["[judge]"], **NOTES["[judge.claims]"]}
    defaults = _defaults(judge.JudgeConfig)

    def rows(keys: tuple[str, ...]) -> list[tuple[str, ...]]:
        out = []
        for key in keys:
            if key in judge.RETIRED_KEYS:
                out.append((code(key), "", "", "", "retired with the request-level judge: read, "
                            "ignored, named in the verdict's notes"))
            elif key == "claims":
                out.append((code(key), "table", "", "", "the claims: [`[judge.claims]`]"
                            "(#judgeclaims)"))
            else:
                kind = _annotation_type(str(fields[key].type))
                out.append((code(key), kind, "", defaults.get(key, ""), cell(notes.get(key, ""))))
        return out

    deprecated = ", ".join(f"{code(old)} (read as {code(new)})"
                           for old, new in judge.DEPRECATED_CLAIM_KEYS.items())
    header = ("key", "type", "required", "default", "what it is")
    return ["### `[judge]`", "",
            "Every key has a default, so a suite without `[judge]` is still judged; how each is "
            "used: [the judge](../judge.md).", "", *table(header, rows(judge._TOP_KEYS)),
            "### `[judge.claims]`", "", f"Still read under their old names: {deprecated}.", "",
            *table(header, rows(judge._CLAIM_KEYS))]


def config_page() -> str:
    from servegate.config.profiles import SECTION_KEYS

    out = ["# Suite and model files", "",
           "Generated from the tables `servegate.config` validates against: an unknown key or a "
           "wrong type is an error naming the file and the key. Types are TOML's.", "",
           "## Suites (`suites/<name>.toml`)", ""]
    for spec in SUITE_TABLES:
        out += toml_section(spec)
        if spec.name == "[gsm8k]":
            out += judge_sections()
    out += ["## Model profiles (`models/<name>.toml`)", "",
            "A `[runners.<key>]` section is keyed by a runner class or an architecture: "
            + ", ".join(code(k) for k in SECTION_KEYS) + "; a class uses its own section when "
            "the profile has one, else its architecture's.", ""]
    for spec in PROFILE_TABLES:
        out += toml_section(spec)
    return "\n".join(out)


# --- run.json ----------------------------------------------------------------------------------

def run_schema() -> dict[str, Any]:
    from pydantic import TypeAdapter

    from servegate.core.results import Run

    return TypeAdapter(Run).json_schema()


def _json_type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in schema:
        return " or ".join(_json_type(s) for s in schema["anyOf"])
    if "enum" in schema:
        return " \\| ".join(code(json.dumps(v)) for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array" and "items" in schema:
        return f"array of {_json_type(schema['items'])}"
    extra = schema.get("additionalProperties")
    if kind == "object" and isinstance(extra, dict):
        return f"object of {_json_type(extra)}"
    return str(kind)


def run_json_page() -> str:
    from servegate.core import results

    schema = run_schema()
    out = ["# run.json", "",
           f"The run folder's record (schema version {results.RUN_SCHEMA_VERSION}), validated on "
           "every read by pydantic over the TypedDicts of `servegate.core.results`; older files "
           "are upgraded on read (`servegate upgrade` rewrites them). Generated from those types; "
           "the JSON Schema itself: [run.schema.json](run.schema.json).", ""]
    for name, part in [("Run", schema), *schema["$defs"].items()]:
        cls = getattr(results, name)
        notes = key_comments(results, name)
        required = set(part.get("required", ()))
        rows = [(code(key), _json_type(prop), "yes" if key in required else "",
                 cell(notes.get(key, ""))) for key, prop in part["properties"].items()]
        extra = part.get("additionalProperties")
        out += [f"## {name}", ""]
        if cls.__doc__ and not cls.__doc__.startswith(f"{name}("):
            out += [prose(inspect.cleandoc(cls.__doc__)), ""]
        if extra is True:
            out += ["Other keys are kept (forward compatible).", ""]
        out += table(("key", "type", "required", "what it is"), rows)
    return "\n".join(out)


# --- verdict.json ------------------------------------------------------------------------------

def sample_verdicts() -> list[dict[str, Any]]:
    """verdict.json documents from the real writer: one with a ratio and a difference check and
    a baseline (every value filled somewhere), one with a bare check and no baseline (what may
    be null)."""
    from servegate.config.judge import JudgeConfig
    from servegate.judge.checks import Check
    from servegate.judge.judgement import Judgement
    from servegate.judge.stats import Interval
    from servegate.report.verdict_json import build

    def checked(kind: str, scale: str) -> Check:
        interval = Interval(1.08, 0.95, 1.23, 0.99, "blocks", 12, 12, scale=scale,  # type: ignore[arg-type]
                            se=0.05, df=24.0)
        return Check(kind, f"{kind} check", "mean_ttft_ms", "inconclusive", mode="off",  # type: ignore[arg-type]
                     concurrency=4, interval=interval, floor=0.05, current_value=111.4,
                     reference_value=103.1, claim="improvement")

    provenance = {key: "..." for key in ("created_at", "source_run", "sglang", "sglang_commit")}
    run = {"suite": "s", "runner_class": "c", "model_profile": "m", "sequential": {}}
    filled = build(Judgement(Path("RUN"), run, JudgeConfig(),  # type: ignore[arg-type]
                             [checked("baseline", "ratio"), checked("accuracy", "difference")],
                             baseline_file=Path("baseline.json"),
                             baseline={"provenance": provenance}))
    bare = build(Judgement(Path("RUN"), None, JudgeConfig(), [Check("integrity", "", "", "pass")]))
    return [filled, bare]


def _json_name(values: list[object]) -> str:
    names = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
             dict: "object", type(None): "null"}
    kinds = list(dict.fromkeys(names[type(v)] for v in values))
    return " or ".join(sorted(kinds, key=lambda k: k == "null"))


def _rows(docs: list[dict[str, Any]], notes: dict[str, str]) -> list[tuple[str, ...]]:
    """One row per key of the first document, typed by its values in all of them."""
    return [(code(key), _json_name([d[key] for d in docs if key in d]), cell(notes.get(key, "")))
            for key in docs[0]]


def verdict_json_page() -> str:
    from servegate.judge import checks
    from servegate.report import verdict_json

    docs = sample_verdicts()
    top = {**key_comments(verdict_json, "build"), **NOTES["verdict"]}
    check_notes = {**{k: v for k, v in key_comments(checks, "Check").items() if v}, **NOTES["check"]}
    out = ["# verdict.json", "",
           f"The machine-readable verdict (schema version {verdict_json.VERDICT_SCHEMA_VERSION}) "
           "beside run.json, written by `servegate.report.verdict_json.build` (this page is "
           "generated from what it writes). Read `overall` and `exit_code` for the decision and "
           "`checks` for the reasons; an example, annotated: "
           "[Reading verdict.json](../judge.md#reading-verdictjson).", "",
           "## Top level", ""]
    out += table(("key", "type", "what it is"), _rows(docs, top))
    out += ["## baseline", "", "`null` when the run was judged without a stored baseline; "
            "otherwise from the baseline file's provenance.", ""]
    out += table(("key", "type", "what it is"), _rows([docs[0]["baseline"]], NOTES["baseline"]))
    out += ["## checks[]", "", "One object per check, every key always present "
            "(`servegate.judge.checks.CHECK_KEYS`).", ""]
    out += table(("key", "type", "what it is"),
                 _rows([c for d in docs for c in d["checks"]], check_notes))
    return "\n".join(out)


# --- the mkdocs hook ---------------------------------------------------------------------------

PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page,
    "reference/config.md": config_page,
    "reference/run-json.md": run_json_page,
    "reference/verdict-json.md": verdict_json_page,
    "reference/run.schema.json": lambda: json.dumps(run_schema(), indent=2) + "\n",
}


def on_files(files: Any, config: Any) -> Any:
    """mkdocs hook: add the generated pages to the site's files."""
    from mkdocs.structure.files import File

    for path, page in PAGES.items():
        files.append(File.generated(config, path, content=page()))
    return files
