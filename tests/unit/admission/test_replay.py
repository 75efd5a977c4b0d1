"""servegate.admission.replay: a replayed trace's checks (issue 15).

Every trace here is written out by hand, KV reservations included (worked out on paper, never
with the formula the checks use), so a check that computes the wrong thing cannot agree with
its own test by construction.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from servegate.admission import checks, golden
from servegate.admission.replay import Admission, Round, Trace
from servegate.admission.scenario import Prompt, Scenario

# page 64: ceil to the page, then one more page; page 1: the length plus one token.
# (3000 -> 3008 + 64, 5000 -> 5056 + 64, 7000 -> 7040 + 64, 1280 -> 1280 + 64, ...)
P64 = Scenario(page_size=64, chunk_size=16384,
               prompts=tuple(Prompt(n) for n in (3000, 5000, 7000, 9000)))


OFF_ROUNDS = [  # (extend, kv_reserved) per admission, then batch tokens, saturated
    ([(3000, 3072), (5000, 5120), (7000, 7104), (1280, 1344)], 16280, True),
    ([(7720, 7808)], 7720, False),
]


FORCED_ROUNDS = [
    ([(3000, 3072), (5000, 5120), (7000, 7104), (1384, 1472)], 16384, True),
    ([(7616, 7680)], 7616, False),
]


def _rounds(spec: list[tuple[list[tuple[int, int]], int, bool]]) -> list[Round]:
    rounds = []
    for index, (adms, tokens, saturated) in enumerate(spec):
        last = len(adms) - 1
        rounds.append(Round(index, [Admission(f"r{i}", 0, n, kv, saturated and i == last)
                                    for i, (n, kv) in enumerate(adms)],
                            tokens, saturated, 0 if saturated else 8664, 16384,
                            "chunk" if saturated else "drained"))
    return rounds


def _trace(mode: str, spec: list[tuple[list[tuple[int, int]], int, bool]], *,
           effective: bool = False, rows_free: int = 6, free: int = 900) -> Trace:
    return Trace(scenario=P64, mode=mode, effective=effective, rounds=_rounds(spec),
                 pool_tokens=1000, free_after=free, evictable_after=100, rows_total=6,
                 rows_free_after=rows_free)


def test_hand_written_traces_pass_every_check() -> None:
    """The fixtures are right: a clean off and a clean forced trace raise nothing."""
    assert checks.check_trace(_trace("off", OFF_ROUNDS)).failures == []
    assert checks.check_trace(_trace("forced", FORCED_ROUNDS, effective=True)).failures == []


def test_kv_reservation_off_by_a_page_fails() -> None:
    spec = [([(3000, 3008), (5000, 5120), (7000, 7104), (1280, 1344)], 16280, True)]
    failures = checks.check_trace(_trace("off", spec)).failures
    assert failures == ["p64-c16384-custom-radix [off] round 0: KV budget for r0 grew by 3008, "
                        "expected ceil_page(3000) + page = 3072"]


def test_off_trace_with_exact_fill_effective_fails() -> None:
    failures = checks.check_trace(_trace("off", OFF_ROUNDS, effective=True)).failures
    assert any("off mode but PrefillAdder.exact_chunk_fill is on" in f for f in failures)


def test_forced_trace_without_exact_fill_fails() -> None:
    failures = checks.check_trace(_trace("forced", FORCED_ROUNDS, effective=False)).failures
    assert any("forced mode but PrefillAdder.exact_chunk_fill is off" in f for f in failures)


def test_leaked_request_row_fails() -> None:
    failures = checks.check_trace(_trace("off", OFF_ROUNDS, rows_free=5)).failures
    assert failures == ["p64-c16384-custom-radix [off]: request rows leaked: 5 of 6 free"]


def test_leaked_kv_slot_fails_even_by_one() -> None:
    failures = checks.check_trace(_trace("off", OFF_ROUNDS, free=899)).failures
    assert failures == ["p64-c16384-custom-radix [off]: KV slots leaked: free 899 + evictable 100 "
                        "!= pool 1000"]


def test_round_at_exactly_the_chunk_is_not_over_it() -> None:
    spec = [([(16384, 16448)], 16384, True)]
    assert checks.check_trace(_trace("off", spec)).failures == []
    over = [([(16384, 16448), (1, 128)], 16385, True)]
    assert any("batch 16385 tokens exceeds chunk size 16384" in f
               for f in checks.check_trace(_trace("off", over)).failures)


def test_forced_kv_stop_is_not_a_short_batch() -> None:
    """A forced round that stopped on KV is allowed to be short of the chunk."""
    trace = _trace("forced", OFF_ROUNDS, effective=True)
    trace.rounds[0].stop = "kv"
    assert checks.check_trace(trace).failures == []
    trace.rounds[0].stop = "chunk"
    assert any("saturated forced batch is 16280" in f for f in checks.check_trace(trace).failures)


def test_forced_sub_page_chunk_is_a_finding_not_a_failure() -> None:
    spec = [([(16344, 16448), (40, 128)], 16384, True)]
    result = checks.check_trace(_trace("forced", spec, effective=True))
    assert result.failures == []
    assert result.findings == ["p64-c16384-custom-radix [forced] round 0: forced mode admitted a "
                               "sub-page chunk of 40 tokens (page 64) for r1"]


def test_forced_cap_by_alignment_is_a_finding() -> None:
    sc = dataclasses.replace(P64, chunk_size=2048, truncation_align_size=96)
    trace = Trace(scenario=sc, mode="forced", effective=True,
                  rounds=[Round(0, [Admission("r0", 0, 1957, 2048, True)], 1957, True, 91, 16384,
                                "chunk")],
                  pool_tokens=10, free_after=10, evictable_after=0, rows_total=1,
                  rows_free_after=1)
    result = checks.check_trace(trace)
    assert result.failures == []
    assert result.findings == [f"{sc.scenario_id} [forced] round 0: truncation_align_size 96 "
                               "capped the forced fill at 1957 of 2048 tokens"]


def test_on_is_compared_with_off_not_with_forced() -> None:
    """With off, on and forced all present: on == off passes although forced differs, and
    on == forced (!= off) fails."""
    off = _trace("off", OFF_ROUNDS)
    forced = _trace("forced", FORCED_ROUNDS, effective=True)
    on_like_off = _trace("on", OFF_ROUNDS)
    assert checks.check_modes({"off": off, "on": on_like_off, "forced": forced}).failures == []
    on_like_forced = _trace("on", FORCED_ROUNDS)
    failures = checks.check_modes({"off": off, "on": on_like_forced, "forced": forced}).failures
    assert failures == ["p64-c16384-custom-radix [on]: not a no-op off gfx95: round 0: off extend "
                        "[3000, 5000, 7000, 1280] (rem_chunk 0, rem_input 16384) vs on extend "
                        "[3000, 5000, 7000, 1384] (rem_chunk 0, rem_input 16384)"]


def test_on_differing_only_in_a_counter_or_in_length_fails() -> None:
    off = _trace("off", OFF_ROUNDS)
    on = _trace("on", OFF_ROUNDS)
    on.rounds[1].rem_input_tokens = 1
    assert any("not a no-op" in f for f in checks.check_modes({"off": off, "on": on}).failures)
    shorter = _trace("on", OFF_ROUNDS[:1])
    failures = checks.check_modes({"off": off, "on": shorter}).failures
    assert any("off has 2 rounds, on has 1" in f for f in failures)


def test_on_gfx95_may_differ_from_off() -> None:
    off = _trace("off", OFF_ROUNDS)
    on = _trace("on", FORCED_ROUNDS, effective=True)
    assert checks.check_modes({"off": off, "on": on}, gfx95=True).failures == []


def test_page_one_identical_traces_pass_and_larger_pages_may_differ() -> None:
    off = _trace("off", OFF_ROUNDS)
    forced = _trace("forced", FORCED_ROUNDS, effective=True)
    assert checks.check_modes({"off": off, "forced": forced}).failures == []   # page 64
    p1 = dataclasses.replace(P64, page_size=1, chunk_size=2048)
    same = [Round(0, [Admission("r0", 0, 2048, 2049, True)], 2048, True, 0, 16384, "chunk")]
    a = Trace(p1, "off", False, same, 10, 10, 0, 1, 1)
    b = Trace(p1, "forced", True, [dataclasses.replace(r) for r in same], 10, 10, 0, 1, 1)
    assert checks.check_modes({"off": a, "forced": b}).failures == []


# Golden traces: the record of a round, written out by hand.

STORED_ROUND_0 = {"extend": [3000, 5000, 7000, 1280], "prefix": [0, 0, 0, 0],
                  "kv": [3072, 5120, 7104, 1344], "tokens": 16280, "saturated": True,
                  "rem_chunk": 0, "rem_input": 16384, "stop": "chunk"}


STORED_ROUND_1 = {"extend": [7720], "prefix": [0], "kv": [7808], "tokens": 7720,
                  "saturated": False, "rem_chunk": 8664, "rem_input": 16384, "stop": "drained"}


def test_round_record_keeps_every_field() -> None:
    assert golden.round_record(_trace("off", OFF_ROUNDS)) == [STORED_ROUND_0, STORED_ROUND_1]


@pytest.mark.parametrize(("field", "stored_value", "words"), [
    ("kv", [3072, 5120, 7104, 1280], "kv [3072, 5120, 7104, 1280] -> [3072, 5120, 7104, 1344]"),
    ("prefix", [0, 0, 0, 64], "prefix [0, 0, 0, 64] -> [0, 0, 0, 0]"),
    ("extend", [3000, 5000, 7000, 1384],
     "extend [3000, 5000, 7000, 1384] -> [3000, 5000, 7000, 1280]"),
    ("tokens", 16384, "tokens 16384 -> 16280"),
    ("saturated", False, "saturated False -> True"),
    ("rem_chunk", 104, "rem_chunk 104 -> 0"),
    ("rem_input", 100, "rem_input 100 -> 16384"),
    ("stop", "input", "stop input -> chunk"),
])
def test_golden_diff_sees_every_field(field: str, stored_value: object, words: str) -> None:
    """A stored round that differs from the replay in any one field (the KV reservation
    included) is a diff naming that field, stored value first."""
    stored = {P64.scenario_id: {"off": {"effective": False,
                                        "rounds": [{**STORED_ROUND_0, field: stored_value},
                                                   STORED_ROUND_1]}}}
    diffs = golden.diff_traces(stored, [_trace("off", OFF_ROUNDS)])
    assert diffs == [f"{P64.scenario_id} [off] round 0: {words}"]


def test_golden_diff_names_every_changed_field_in_order() -> None:
    stored = {P64.scenario_id: {"off": {"effective": False, "rounds": [
        {**STORED_ROUND_0, "tokens": 1, "kv": [1]}, STORED_ROUND_1]}}}
    assert golden.diff_traces(stored, [_trace("off", OFF_ROUNDS)]) == [
        f"{P64.scenario_id} [off] round 0: kv [1] -> [3072, 5120, 7104, 1344]; "
        "tokens 1 -> 16280"]


def test_golden_diff_identical_round_is_silent() -> None:
    stored = {P64.scenario_id: {"off": {"effective": False,
                                        "rounds": [STORED_ROUND_0, STORED_ROUND_1]}}}
    assert golden.diff_traces(stored, [_trace("off", OFF_ROUNDS)]) == []


def test_golden_diff_effective_extra_round_and_missing_scenario() -> None:
    sid = P64.scenario_id
    stored = {sid: {"off": {"effective": True, "rounds": [STORED_ROUND_0]}}}
    diffs = golden.diff_traces(stored, [_trace("off", OFF_ROUNDS), _trace("on", OFF_ROUNDS)])
    assert diffs == [f"{sid} [off]: effective True -> False",
                     f"{sid} [off] round 1: None -> {STORED_ROUND_1}",
                     f"{sid} [on]: not in the golden traces (new scenario?)"]


def test_one_token_chunk_is_not_zero_length() -> None:
    spec = [([(1, 128)], 1, False)]
    assert checks.check_trace(_trace("off", spec)).failures == []


@pytest.mark.parametrize(("mode", "extend", "kv", "chunked", "finding"), [
    ("forced", 63, 128, True, True),      # one token short of a page: a sub-page chunk
    ("forced", 64, 128, True, False),     # a whole page is not sub-page
    ("forced", 40, 128, False, False),    # a short request that finished is not a chunk
    ("off", 40, 128, True, False),        # only forced mode reports it
])
def test_sub_page_finding_only_for_forced_chunked_admissions(
        mode: str, extend: int, kv: int, chunked: bool, finding: bool) -> None:
    rnd = Round(0, [Admission("r0", 0, 16384 - extend, _kv64(16384 - extend), False),
                    Admission("r1", 0, extend, kv, chunked)], 16384, False, 0, 16384, "drained")
    trace = Trace(P64, mode, mode == "forced", [rnd], 10, 10, 0, 1, 1)
    result = checks.check_trace(trace)
    assert result.failures == []
    assert bool(result.findings) is finding


def _kv64(extend: int) -> int:
    """The KV reservations the sub-page test needs (worked out by hand: ceil_64 + 64)."""
    return {16321: 16448, 16320: 16384, 16344: 16448}[extend]


def test_forced_cap_by_max_prefill_tokens_is_a_finding() -> None:
    sc = dataclasses.replace(P64, chunk_size=2048, max_prefill_tokens=1000)
    trace = Trace(scenario=sc, mode="forced", effective=True,
                  rounds=[Round(0, [Admission("r0", 0, 960, 1024, True)], 960, True, 1088, 40,
                                "input")],
                  pool_tokens=10, free_after=10, evictable_after=0, rows_total=1,
                  rows_free_after=1)
    result = checks.check_trace(trace)
    assert result.failures == []
    assert result.findings == [f"{sc.scenario_id} [forced] round 0: max_prefill_tokens 1000 "
                               "capped the forced fill at 960 of 2048 tokens"]


def test_capped_forced_round_that_reaches_the_chunk_is_no_finding() -> None:
    """A cap that did not bite (the round still filled the chunk) reports nothing, and a cap
    is not an excuse when nothing caps: alignment-free forced rounds must be exact."""
    sc = dataclasses.replace(P64, chunk_size=2048, truncation_align_size=64)
    full = Trace(sc, "forced", True, [Round(0, [Admission("r0", 0, 2048, 2112, True)], 2048,
                                            True, 0, 16384, "chunk")], 10, 10, 0, 1, 1)
    assert checks.check_trace(full).failures == [] and checks.check_trace(full).findings == []
    free = dataclasses.replace(P64, chunk_size=2048)
    short = Trace(free, "forced", True, [Round(0, [Admission("r0", 0, 1984, 2048, True)], 1984,
                                               True, 64, 16384, "chunk")], 10, 10, 0, 1, 1)
    result = checks.check_trace(short)
    assert result.findings == []
    assert result.failures == [f"{free.scenario_id} [forced] round 0: exact-fill-fills-chunk: "
                               "saturated forced batch is 1984 tokens, expected exactly the chunk "
                               "size 2048"]
    big_input = dataclasses.replace(P64, chunk_size=2048, max_prefill_tokens=4096)
    short_big = dataclasses.replace(short, scenario=big_input)
    assert checks.check_trace(short_big).failures != []         # 4096 >= 2048: nothing caps


# Golden files: written and read back (no sglang: the traces are the hand-written ones above).

def test_write_golden_renders_one_round_per_line(tmp_path: Path) -> None:
    other_mix = dataclasses.replace(P64, mix="long", chunk_size=2048)
    small = Trace(other_mix, "off", False, [Round(0, [Admission("r0", 8, 100, 192, False)], 100,
                                                  False, 1948, 16384, "drained")], 1, 1, 0, 1, 1)
    written = golden.write_golden(tmp_path, [_trace("off", OFF_ROUNDS),
                                             _trace("forced", FORCED_ROUNDS, effective=True),
                                             small], "0.5.23", ["nox", "-s", "admission"])
    assert written == [tmp_path / "custom.json", tmp_path / "long.json"]
    lines = (tmp_path / "long.json").read_text().splitlines()
    assert lines[0] == "{" and lines[2:] == [
        '  "schema": 1,',
        '  "scenarios": {',
        '    "p64-c2048-long-radix": {',
        '      "off": {"effective": false, "rounds": [',
        '        {"extend": [100], "kv": [192], "prefix": [8], "rem_chunk": 1948, '
        '"rem_input": 16384, "saturated": false, "stop": "drained", "tokens": 100}',
        '      ]}',
        '    }',
        '  }',
        '}']
    custom = (tmp_path / "custom.json").read_text().splitlines()
    assert custom[4] == '    "p64-c16384-custom-radix": {'
    assert custom[5] == '      "forced": {"effective": true, "rounds": ['
    assert custom[6].endswith('"tokens": 16384},') and custom[7].endswith('"tokens": 7616}')
    assert custom[8] == "      ]},"
    assert custom[9] == '      "off": {"effective": false, "rounds": ['
    assert custom[-4:] == ["      ]}", "    }", "  }", "}"]
    prov = json.loads(lines[1].strip().removeprefix('"provenance": ').rstrip(","))
    assert prov["sglang_version"] == "0.5.23" and prov["command"] == "nox -s admission"
    assert set(prov) == {"sglang_version", "date", "command", "host", "python"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", prov["date"])


def test_written_golden_loads_back_and_diffs_clean(tmp_path: Path) -> None:
    traces = [_trace("off", OFF_ROUNDS), _trace("forced", FORCED_ROUNDS, effective=True)]
    golden.write_golden(tmp_path, traces, "0.5.23", ["x"])
    stored, provenance = golden.load_golden(tmp_path)
    assert list(provenance) == ["custom.json"] and provenance["custom.json"]["command"] == "x"
    assert stored[P64.scenario_id]["off"] == {"effective": False,
                                              "rounds": [STORED_ROUND_0, STORED_ROUND_1]}
    assert golden.diff_traces(stored, traces) == []
    changed = _trace("forced", FORCED_ROUNDS, effective=True)
    changed.rounds[1].admissions[0] = dataclasses.replace(changed.rounds[1].admissions[0],
                                                          kv_reserved=7616)
    assert golden.diff_traces(stored, [changed]) == [
        f"{P64.scenario_id} [forced] round 1: kv [7680] -> [7616]"]


def test_where_names_the_round_in_every_round_failure() -> None:
    over = [([(16384, 16448), (1, 128)], 16385, True)]
    assert checks.check_trace(_trace("off", over)).failures == [
        "p64-c16384-custom-radix [off] round 0: batch 16385 tokens exceeds chunk size 16384"]
    zero = [([(0, 64)], 0, False)]
    assert checks.check_trace(_trace("off", zero)).failures == [
        "p64-c16384-custom-radix [off] round 0: zero-length chunk for r0"]


def test_golden_diff_reports_every_trace_and_unknown_scenarios() -> None:
    other = dataclasses.replace(P64, mix="long")
    unknown = Trace(other, "off", False, _rounds(OFF_ROUNDS), 1000, 900, 100, 6, 6)
    stored = {P64.scenario_id: {"off": {"effective": False, "rounds": [
                  {**STORED_ROUND_0, "tokens": 1}, STORED_ROUND_1]},
              "forced": {"effective": False, "rounds": []}}}
    diffs = golden.diff_traces(stored, [unknown, _trace("off", OFF_ROUNDS),
                                        _trace("forced", FORCED_ROUNDS, effective=True)])
    assert diffs[0] == f"{other.scenario_id} [off]: not in the golden traces (new scenario?)"
    assert diffs[1] == f"{P64.scenario_id} [off] round 0: tokens 1 -> 16280"
    assert diffs[2] == f"{P64.scenario_id} [forced]: effective False -> True"
    assert len(diffs) == 5 and diffs[3].startswith(f"{P64.scenario_id} [forced] round 0: None")


def test_golden_files_list_scenarios_with_commas_and_sorted_provenance(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime as dt
    import time

    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        second = dataclasses.replace(P64, chunk_size=2048)
        traces = [_trace("off", OFF_ROUNDS),
                  Trace(second, "off", False, _rounds(OFF_ROUNDS[1:]), 1, 1, 0, 1, 1)]
        golden.write_golden(tmp_path, traces, "0.5.23", ["c"])
    finally:
        monkeypatch.undo()
        time.tzset()
    lines = (tmp_path / "custom.json").read_text().splitlines()
    assert lines[1].startswith('  "provenance": {"command": "c", "date": ')
    assert lines.count("    },") == 1 and lines.count("    }") == 1
    json.loads("\n".join(lines))
    stamp = json.loads("\n".join(lines))["provenance"]["date"]
    written = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    assert abs((dt.datetime.now(dt.timezone.utc) - written).total_seconds()) < 600   # UTC
