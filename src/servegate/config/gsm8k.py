"""The suite's ``[gsm8k]`` table, validated into :class:`GSM8KSettings` when the suite loads.

``source`` picks the data: ``packaged`` (the copy servegate ships, the default), ``hub``
(``openai/gsm8k`` through ``datasets``, or its offline cache), or a path to a jsonl file or a
folder of ``<split>.jsonl``. ``dataset`` is ``source``'s deprecated name (``"test"`` meant the
default source).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from servegate.config._schema import ConfigError

EXTRACTIONS = ("flexible", "strict")
SPLIT_ALIAS = {"dataset": "test", "train_dataset": "train"}


class AccuracyConfigError(ConfigError):
    """A ``[gsm8k]`` suite setting is wrong; the message names the key and what was expected."""


@dataclass(frozen=True)
class GSM8KSettings:
    questions: int | None = None     # first N of the evaluated split; None = all
    shots: int = 5
    concurrency: int = 8
    max_tokens: int = 512
    source: str = "packaged"          # "packaged" (shipped, default) | "hub" | a jsonl path/dir
    train_dataset: str | None = None  # None or "train" = the same source's train split
    seed: int = 1234
    extraction: str = "flexible"

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> GSM8KSettings:
        known = set(cls.__dataclass_fields__) | {"dataset"}  # dataset: source's old name
        unknown = sorted(set(raw) - known)
        if unknown:
            raise AccuracyConfigError(f"[gsm8k]: unknown key(s) {unknown}; expected some of "
                                      f"{sorted(known)}")
        values: dict[str, Any] = {}
        for key in ("shots", "concurrency", "max_tokens", "seed"):
            if key in raw:
                values[key] = _int(key, raw[key], minimum=0 if key in {"shots", "seed"} else 1)
        if "questions" in raw:
            q = raw["questions"]
            values["questions"] = None if q == "all" else _int("questions", q, minimum=1)
        if "source" in raw and "dataset" in raw:
            raise AccuracyConfigError("[gsm8k]: set source (dataset is its deprecated name), "
                                      "not both")
        for key in ("source", "dataset", "train_dataset"):
            if key in raw and (not isinstance(raw[key], str) or not raw[key]):
                raise AccuracyConfigError(f"[gsm8k].{key}: expected \"packaged\", \"hub\", "
                                          f"a hub id or a path, got {raw[key]!r}")
        if "source" in raw:
            values["source"] = raw["source"]
        elif "dataset" in raw:  # deprecated spelling: "test" meant the default source
            values["source"] = "packaged" if raw["dataset"] == SPLIT_ALIAS["dataset"] \
                else raw["dataset"]
        if "train_dataset" in raw and raw["train_dataset"] != SPLIT_ALIAS["train_dataset"]:
            values["train_dataset"] = raw["train_dataset"]
        if "extraction" in raw:
            if raw["extraction"] not in EXTRACTIONS:
                raise AccuracyConfigError(f"[gsm8k].extraction: expected one of {EXTRACTIONS}, "
                                          f"got {raw['extraction']!r}")
            values["extraction"] = raw["extraction"]
        return cls(**values)


def _int(key: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        extra = ' or "all"' if key == "questions" else ""
        raise AccuracyConfigError(f"[gsm8k].{key}: expected an integer >= {minimum}{extra}, "
                                  f"got {value!r}")
    return value
