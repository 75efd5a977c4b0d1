"""servegate.admission.golden: golden trace files and their diffs (issue 15).

Every trace here is written out by hand, KV reservations included (worked out on paper, never
with the formula the checks use), so a check that computes the wrong thing cannot agree with
its own test by construction.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from servegate.admission import golden
from servegate.admission.scenario import Prompt, Scenario

# page 64: ceil to the page, then one more page; page 1: the length plus one token.
# (3000 -> 3008 + 64, 5000 -> 5056 + 64, 7000 -> 7040 + 64, 1280 -> 1280 + 64, ...)
P64 = Scenario(page_size=64, chunk_size=16384,
               prompts=tuple(Prompt(n) for n in (3000, 5000, 7000, 9000)))


# Golden traces: the record of a round, written out by hand.

STORED_ROUND_0 = {"extend": [3000, 5000, 7000, 1280], "prefix": [0, 0, 0, 0],
                  "kv": [3072, 5120, 7104, 1344], "tokens": 16280, "saturated": True,
                  "rem_chunk": 0, "rem_input": 16384, "stop": "chunk"}


STORED_ROUND_1 = {"extend": [7720], "prefix": [0], "kv": [7808], "tokens": 7720,
                  "saturated": False, "rem_chunk": 8664, "rem_input": 16384, "stop": "drained"}


def test_golden_files_from_two_mixes_load_together(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(
        {"schema": 1, "provenance": {"p": 1}, "scenarios": {"s1": {"off": {"rounds": []}}}}))
    (tmp_path / "b.json").write_text(json.dumps(
        {"schema": 1, "scenarios": {"s2": {"on": {"rounds": []}}}}))
    stored, provenance = golden.load_golden(tmp_path)
    assert stored == {"s1": {"off": {"rounds": []}}, "s2": {"on": {"rounds": []}}}
    assert provenance == {"a.json": {"p": 1}, "b.json": {}}


@pytest.mark.parametrize(("content", "words"), [
    ("{not json", r"bad\.json: not valid JSON"),
    (json.dumps({"schema": 1, "scenarios": []}), r"bad\.json: 'scenarios' must be an object"),
    (json.dumps({"schema": 1, "scenarios": {"s": {"off": {"effective": True}}}}),
     r"bad\.json: scenarios\.s: each mode needs a 'rounds' list"),
    (json.dumps({"schema": 1, "scenarios": {"s": ["off"]}}),
     r"bad\.json: scenarios\.s: each mode needs a 'rounds' list"),
    (json.dumps({"schema": 1, "scenarios": {"s": {"off": {"rounds": {}}}}}),
     r"bad\.json: scenarios\.s: each mode needs a 'rounds' list"),
    (json.dumps({"schema": 99, "scenarios": {}}), r"bad\.json"),
])
def test_malformed_golden_file_names_file_and_field(tmp_path: Path, content: str,
                                                    words: str) -> None:
    (tmp_path / "bad.json").write_text(content)
    with pytest.raises(golden.GoldenError, match=words):
        golden.load_golden(tmp_path)


def test_no_golden_files_says_how_to_make_them(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("")
    with pytest.raises(golden.GoldenError, match=r"no golden traces; create them with "
                                                 r"`nox -s admission -- --update`"):
        golden.load_golden(tmp_path)


def test_golden_diff_round_dropped_and_field_only_on_one_side() -> None:
    sid = P64.scenario_id
    dropped = golden.diff_entry(sid, "off", {"rounds": [STORED_ROUND_0, STORED_ROUND_1]},
                                {"rounds": [STORED_ROUND_0]})
    assert dropped == [f"{sid} [off] round 1: {STORED_ROUND_1} -> None"]
    later = golden.diff_entry(sid, "off", {"rounds": [STORED_ROUND_0, STORED_ROUND_1]},
                              {"rounds": [STORED_ROUND_0, {**STORED_ROUND_1, "stop": "kv"}]})
    assert later == [f"{sid} [off] round 1: stop drained -> kv"]
    extra = golden.diff_entry(sid, "off", {"rounds": [STORED_ROUND_1]},
                              {"rounds": [{**STORED_ROUND_1, "warm": 3}]})
    assert extra == [f"{sid} [off] round 0: warm None -> 3"]
