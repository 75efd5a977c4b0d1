"""Load GSM8K (the packaged copy, the hub, a local jsonl, or the HF cache offline), validate it
and fingerprint it; every source goes through ``datasets`` so that all are read the same way
(the sources and the source-independent ``content_sha256``: docs/guide/run.md, GSM8K accuracy)."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from servegate.accuracy.extract import gold_answer
from servegate.core.errors import ServegateError
from servegate.serve.kernel_stack import file_sha256

HUB_ID = "openai/gsm8k"
HUB_CONFIG = "main"
FIELDS = ("question", "answer")


class DatasetError(ServegateError, ValueError):
    """A GSM8K source is missing, unreadable or malformed; the message names file and field."""


@dataclass(frozen=True)
class Row:
    index: int          # 0-based position in the split (the record id)
    question: str
    answer: str         # full solution text ending in "#### <number>"
    gold: str           # normalized gold number, e.g. "2125"


@dataclass(frozen=True)
class GSM8K:
    source: str         # the path or hub id it came from
    split: str
    rows: tuple[Row, ...]
    sha256: str         # file bytes (local) or canonical JSONL (hub)
    content_sha256: str  # canonical JSONL of (question, answer) rows, source-independent


PACKAGED_DIR = Path(__file__).resolve().parents[1] / "data" / "gsm8k"
# sha256 of the files servegate ships (openai/grade-school-math, MIT; LICENSE beside them).
PACKAGED_SHA256 = {
    "train": "17f347dc51477c50d4efb83959dbb7c56297aba886e5544ee2aaed3024813465",
    "test": "3730d312f6e3440559ace48831e51066acaca737f6eabec99bccb9e4b3c39d14",
}
SOURCES = ("packaged", "hub")  # or a path to a jsonl file / a directory of <split>.jsonl


def packaged_file(split: str) -> Path:
    """The shipped ``<split>.jsonl``, checked against its pinned sha256 (a changed file is an error)."""
    if split not in PACKAGED_SHA256:
        raise DatasetError(f"GSM8K split {split!r}: expected one of {sorted(PACKAGED_SHA256)}")
    path = PACKAGED_DIR / f"{split}.jsonl"
    if not path.is_file():
        raise DatasetError(f"{path}: packaged GSM8K file missing (a broken install?)")
    actual = file_sha256(path)
    if actual != PACKAGED_SHA256[split]:
        raise DatasetError(f"{path}: sha256 {actual} does not match the pinned "
                           f"{PACKAGED_SHA256[split]} (the packaged GSM8K file was modified)")
    return path


def resolve_source(source: str | None, split: str) -> str:
    """``packaged`` (or None) -> the shipped file; ``hub`` -> the hub id; anything else as given."""
    if source in (None, "packaged"):
        return str(packaged_file(split))
    if source == "hub":
        return HUB_ID
    return source


def _looks_local(spec: str) -> bool:
    return (spec.startswith(("/", ".", "~")) or spec.endswith((".jsonl", ".json"))
            or Path(spec).expanduser().exists())


def resolve_local(spec: str, split: str) -> Path:
    """A file path as given, or ``<dir>/<split>.jsonl`` for a directory."""
    path = Path(spec).expanduser()
    if path.is_dir():
        path = path / f"{split}.jsonl"
    if not path.is_file():
        raise DatasetError(f"{path}: GSM8K file not found (expected a JSON-lines file with "
                           f"fields {', '.join(FIELDS)})")
    return path


def sibling_train(spec: str) -> str | None:
    """For a local ``.../test.jsonl`` the ``train.jsonl`` beside it; for a hub id the same id."""
    if not _looks_local(spec):
        return spec
    path = Path(spec).expanduser()
    directory = path if path.is_dir() else path.parent
    train = directory / "train.jsonl"
    return str(train) if train.is_file() else None


def canonical_sha256(pairs: list[tuple[str, str]]) -> str:
    digest = hashlib.sha256()
    for question, answer in pairs:
        digest.update((json.dumps({"question": question, "answer": answer}) + "\n").encode())
    return digest.hexdigest()


def _validate(columns: dict[str, list[object]], where: str) -> tuple[Row, ...]:
    n = len(next(iter(columns.values()), []))
    for field in FIELDS:
        if field not in columns:
            raise DatasetError(f"{where}: field {field!r} missing (expected fields "
                               f"{', '.join(FIELDS)} in every record)")
    rows = []
    for i in range(n):
        question, answer = columns["question"][i], columns["answer"][i]
        for field, value in (("question", question), ("answer", answer)):
            if not isinstance(value, str) or not value.strip():
                raise DatasetError(f"{where}: record {i + 1}: field {field!r} must be a "
                                   f"non-empty string, got {value!r}")
        gold = gold_answer(str(answer))
        if gold is None:
            raise DatasetError(f"{where}: record {i + 1}: field 'answer' must end in "
                               f"'#### <number>', got ...{str(answer)[-40:]!r}")
        rows.append(Row(index=i, question=str(question), answer=str(answer), gold=gold))
    if not rows:
        raise DatasetError(f"{where}: no records")
    return tuple(rows)


def load_gsm8k(spec: str | None, split: str, cache_dir: str | None = None) -> GSM8K:
    """Load ``split`` from ``packaged`` (the default), ``hub``, a local jsonl (file or directory)
    or a hub id (``openai/gsm8k``).

    With ``HF_HUB_OFFLINE=1`` the hub id is served from the local HF cache by ``datasets``.
    """
    import datasets  # heavy; only when actually loading

    datasets.disable_progress_bars()
    spec = resolve_source(spec, split)
    if _looks_local(spec):
        path = resolve_local(spec, split)
        try:
            ds = datasets.load_dataset("json", data_files=str(path), split="train",
                                       cache_dir=cache_dir)
        except Exception as err:  # datasets wraps parse errors in several exception types
            cause = err.__cause__ or err
            raise DatasetError(f"{path}: not valid JSON lines ({type(cause).__name__}: "
                               f"{str(cause).splitlines()[0] if str(cause) else ''})") from err
        rows = _validate(ds.to_dict(), str(path))
        content = canonical_sha256([(r.question, r.answer) for r in rows])
        return GSM8K(str(path), split, rows, file_sha256(path), content)
    try:
        ds = datasets.load_dataset(spec, HUB_CONFIG, split=split, cache_dir=cache_dir)
    except Exception as err:
        offline = os.environ.get("HF_HUB_OFFLINE") == "1"
        hint = ("not in the local HF cache" if offline else
                "hub unreachable? set HF_HUB_OFFLINE=1 with a warm cache")
        raise DatasetError(f"{spec} (config {HUB_CONFIG!r}, split {split!r}): could not load "
                           f"({hint}; or set [gsm8k].source = \"packaged\" or a local jsonl): "
                           f"{type(err).__name__}: {err}") from err
    rows = _validate(ds.to_dict(), f"{spec}[{split}]")
    content = canonical_sha256([(r.question, r.answer) for r in rows])
    return GSM8K(spec, split, rows, content, content)
