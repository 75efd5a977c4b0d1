"""Every shape rule of a stored baseline, one broken field at a time, with the exact error a
reviewer sees (file, field path, what was expected, what was found), and the edge values that
must stay valid (issue 15). The valid document is written out here, not built by the code under
test."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from servegate.judge.baselines import BaselineError, validate_baseline

PATH = Path("baselines/mi300x/glm/nightly.json")


def _valid() -> dict[str, Any]:
    return {
        "schema_version": 2, "runner_class": "mi300x", "model_profile": "glm", "suite": "nightly",
        "provenance": {"created_at": "2026-11-30T00:00:00+00:00", "source_run": "results/x"},
        "points": [{
            "mode": "off", "concurrency": 1,
            "metrics": {"mean_ttft_ms": {"value": 10.0, "n_repeats": 1, "repeats": [10.0],
                                         "spread": None}},
            "requests": {"ttft_ms": [9.0, 11.0]}}],
        "accuracy": {"off": {"n": 2, "correct": 2,
                             "outcomes": {"ids": [3, 7], "correct": "11"}}},
    }


def _set(doc: dict[str, Any], where: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node: Any = out
    keys = [int(k) if k.isdigit() else k for k in where.split("/")]
    for key in keys[:-1]:
        node = node[key]
    if value is DELETE:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return out


DELETE = object()
M = "points/0/metrics/mean_ttft_ms"


@pytest.mark.parametrize(("where", "value", "message"), [
    ("schema_version", 1, "schema_version must be 2, got 1"),
    ("runner_class", "", "runner_class must be a non-empty string, got ''"),
    ("model_profile", 3, "model_profile must be a non-empty string, got 3"),
    ("suite", DELETE, "suite must be a non-empty string, got None"),
    ("provenance", [], "provenance must be an object, got []"),
    ("provenance/created_at", None, "provenance.created_at must be a string, got None"),
    ("provenance/source_run", 1, "provenance.source_run must be a string, got 1"),
    ("points", {}, "points must be a list, got {}"),
    ("points/0", 5, "points[0] must be an object, got 5"),
    ("points/0/mode", "fast", "points[0].mode must be one of ('off', 'on', 'forced'), "
                              "got 'fast'"),
    ("points/0/concurrency", 0, "points[0].concurrency must be an integer >= 1, got 0"),
    ("points/0/concurrency", True, "points[0].concurrency must be an integer >= 1, got True"),
    ("points/0/concurrency", 2.0, "points[0].concurrency must be an integer >= 1, got 2.0"),
    ("points/0/metrics", [], "points[0].metrics must be an object, got []"),
    (M, 1.0, "points[0].metrics.mean_ttft_ms must be an object, got 1.0"),
    (f"{M}/value", "10", "points[0].metrics.mean_ttft_ms.value must be a number, got '10'"),
    (f"{M}/value", float("nan"), "points[0].metrics.mean_ttft_ms.value must be a number, "
                                 "got nan"),
    (f"{M}/n_repeats", 0, "points[0].metrics.mean_ttft_ms.n_repeats must be an integer >= 1, "
                          "got 0"),
    (f"{M}/repeats", [10.0, 11.0], "points[0].metrics.mean_ttft_ms.repeats must be a list of 1 "
                                   "numbers, got [10.0, 11.0]"),
    (f"{M}/repeats", [None], "points[0].metrics.mean_ttft_ms.repeats must be a list of 1 "
                             "numbers, got [None]"),
    (f"{M}/spread", "x", "points[0].metrics.mean_ttft_ms.spread must be a number or null, "
                         "got 'x'"),
    ("points/0/requests", [], "points[0].requests must be an object, got []"),
    ("points/0/requests/ttft_ms", [1.0, "2"], "points[0].requests.ttft_ms must be a list of "
                                              "numbers, got [1.0, '2']"),
    ("accuracy", [], "accuracy must be an object, got []"),
    ("accuracy/off", 1, "accuracy.off must be an object, got 1"),
    ("accuracy/off/n", -1, "accuracy.off.n must be an integer >= 0, got -1"),
    ("accuracy/off/correct", 1.0, "accuracy.off.correct must be an integer >= 0, got 1.0"),
    ("accuracy/off/correct", 3, "accuracy.off.correct must be <= n, got 3"),
    ("accuracy/off/outcomes", [], "accuracy.off.outcomes must be an object with ids and "
                                  "correct, got []"),
])
def test_each_broken_field_is_named(where: str, value: Any, message: str) -> None:
    with pytest.raises(BaselineError) as info:
        validate_baseline(_set(_valid(), where, value), PATH)
    assert str(info.value) == f"{PATH}: {message}"


def test_a_duplicate_point_is_named() -> None:
    doc = _valid()
    doc["points"].append(copy.deepcopy(doc["points"][0]))
    with pytest.raises(BaselineError) as info:
        validate_baseline(doc, PATH)
    assert str(info.value) == (f"{PATH}: points[1] must be a unique (mode, concurrency), "
                               "got ('off', 1)")


def test_not_an_object_names_the_type() -> None:
    with pytest.raises(BaselineError) as info:
        validate_baseline([], PATH)
    assert str(info.value) == f"{PATH}: top level must be a JSON object, got 'list'"


def test_edge_values_stay_valid() -> None:
    doc = _valid()
    assert validate_baseline(doc, PATH) is doc
    for where, value in (("points/0/requests", DELETE), ("accuracy", DELETE),
                         (f"{M}/spread", 0.5), (f"{M}/spread", DELETE),
                         ("accuracy/off/outcomes", DELETE), ("points", []),
                         ("points/0/mode", "forced")):
        validate_baseline(_set(_valid(), where, value), PATH)
    empty = _set(_set(_valid(), "accuracy/off/n", 0), "accuracy/off/correct", 0)
    del empty["accuracy"]["off"]["outcomes"]
    validate_baseline(empty, PATH)
