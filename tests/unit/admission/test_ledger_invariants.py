"""Every ledger invariant fails on a trace that breaks it (issue 42 item 5): for each named
invariant of :mod:`servegate.admission.ledger_checks`, one healthy hand-written trace on which it
holds and one broken the way a wrong sglang change would break it (a leaked slot, a dLLM round
with exact fill on, a continuation charged to the SWA ring twice, ...), on which it fails with a
line naming the scenario, the mode and the invariant."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from servegate.admission.ledger_checks import check_ledger
from servegate.admission.ledger_spec import LedgerSpec
from servegate.admission.replay import Admission, Round, Trace
from servegate.admission.scenario import Prompt, Scenario

PAGE, CHUNK = 64, 2048
SPECS = {
    "tile-budget": LedgerSpec("tile-budget", tile_budget=16, tile_budget_mode="compact"),
    "swa": LedgerSpec("swa", sliding_window=512, swa_pool_tokens=1536),
    "swa-ring": LedgerSpec("swa", sliding_window=512, swa_pool_tokens=1536, swa_ring=True),
    "mamba": LedgerSpec("mamba"),
    "dllm": LedgerSpec("dllm", dllm_block_size=32),
}
_REFUSAL = {"candidate": 1048, "tiles": 17, "budget": 16, "mode": "compact"}


def _ceil(tokens: int) -> int:
    return -(-tokens // PAGE) * PAGE


def _adm(rid: str, extend: int, *, prefix: int = 0, chunked: bool = False, slot_cost: int = 0,
         **ledger: int) -> Admission:
    """An admission whose KV growth is what sglang's ledger charges: page-ceiled + a page (+ the
    mamba gap of its new state)."""
    kv = _ceil(extend) + PAGE + ledger.get("mamba_slots", 0) * slot_cost
    return Admission(rid, prefix, extend, kv, chunked, dict(ledger))


def _trace(kind: str, mode: str, rounds: list[list[Admission]], *, effective: bool | None = None,
           round_ledger: dict | None = None, **trace_ledger: object) -> Trace:
    scenario = Scenario(page_size=PAGE, chunk_size=CHUNK, prompts=(Prompt(1000), Prompt(3000)),
                        mix=kind, ledger=SPECS[kind])
    built = [Round(i, adms, sum(a.extend_len for a in adms), True, 0, 0, "other",
                   ledger=dict(round_ledger or {})) for i, adms in enumerate(rounds)]
    return Trace(scenario, mode, mode == "forced" if effective is None else effective, built,
                 pool_tokens=100, free_after=100, evictable_after=0, rows_total=3,
                 rows_free_after=3, ledger=dict(trace_ledger))


def _tile(mode: str, **kw: object) -> Trace:
    extends = [1000] if mode == "forced" else [1000, 1024]
    ledger = {"tile_refusals": [_REFUSAL]} if mode == "forced" else {}
    return _trace("tile-budget", mode, [[_adm(f"r{i}", n) for i, n in enumerate(extends)]],
                  round_ledger=ledger, **kw)


def _swa(mode: str, *, ring: bool = False, cap: int = 1024) -> Trace:
    ring_cost = 512
    first = _adm("r0", cap, chunked=True, chunk_tokens_limit=cap,
                 swa_reserved=ring_cost if ring else 0)
    rest = _adm("r0", 3000 - cap, prefix=cap, chunk_tokens_limit=CHUNK, swa_reserved=0)
    return _trace("swa-ring" if ring else "swa", mode, [[first], [rest]], swa_ring_cost=ring_cost)


def _mamba(mode: str, *, effective: bool | None = None, sharing: bool = False) -> Trace:
    first = _adm("r0", 2048, chunked=True, slot_cost=8, mamba_slots=1)
    rest = _adm("r0", 952, prefix=2048, slot_cost=8, mamba_slots=0)
    return _trace("mamba", mode, [[first], [rest]], effective=effective, mamba_slot_cost=8,
                  prefix_sharing=sharing)


def _dllm(mode: str, *, effective: bool = False) -> Trace:
    return _trace("dllm", mode, [[_adm("r0", 1000, dllm_charge=_ceil(1000))]], effective=effective)


def _break(trace: Trace, change: Callable[[Trace], None]) -> Trace:
    change(trace)
    return trace


def _set(obj: object, **values: object) -> Callable[[Trace], None]:
    return lambda _trace: [setattr(obj, k, v) for k, v in values.items()]


def _over_chunk(t: Trace) -> None:
    t.rounds[0].admissions.append(_adm("r9", 1400))
    t.rounds[0].batch_tokens = sum(a.extend_len for a in t.rounds[0].admissions)


def _kv_floor(t: Trace) -> None:
    t.rounds[0].admissions[0].kv_reserved = 1000 + PAGE      # floored, not page-ceiled


def _leak_tokens(t: Trace) -> None:
    t.free_after = 96                                         # 4 tokens never returned


def _leak_row(t: Trace) -> None:
    t.rows_free_after = 2


def _cut_past_cap(t: Trace) -> None:
    t.rounds[0].admissions[0].extend_len = 1088               # past chunk_tokens_limit 1024


def _no_continuation(t: Trace) -> None:
    t.rounds.pop()


def _ring_twice(t: Trace) -> None:
    t.rounds[1].admissions[0].ledger["swa_reserved"] = 512    # a continuation charged again


def _never_capped(t: Trace) -> None:
    for rnd in t.rounds:
        for adm in rnd.admissions:
            adm.ledger["chunk_tokens_limit"] = CHUNK


def _gap_per_chunk(t: Trace) -> None:
    t.rounds[1].admissions[0].ledger["mamba_slots"] = 1       # a continuation debits a new state
    t.rounds[1].admissions[0].kv_reserved += 8


def _dllm_floor(t: Trace) -> None:
    t.rounds[0].admissions[0].ledger["dllm_charge"] = 1000    # raw, not page-ceiled


# (invariant, healthy traces by mode, the same broken)
CASES: list[tuple[str, Callable[[], dict[str, Trace]], Callable[[], dict[str, Trace]]]] = [
    ("batch-within-chunk", lambda: {"off": _tile("off")},
     lambda: {"off": _break(_tile("off"), _over_chunk)}),
    ("kv-page-ceiled", lambda: {"off": _tile("off")},
     lambda: {"off": _break(_tile("off"), _kv_floor)}),
    ("slots-and-rows-return", lambda: {"off": _tile("off")},
     lambda: {"off": _break(_tile("off"), _leak_tokens)}),
    ("slots-and-rows-return", lambda: {"off": _mamba("off")},
     lambda: {"off": _break(_mamba("off"), _leak_row)}),
    ("forced-not-below-off-unless-named-budget",
     lambda: {"off": _tile("off"), "forced": _tile("forced")},
     lambda: {"off": _tile("off"),
              "forced": _break(_tile("forced"), lambda t: t.rounds[0].ledger.clear())}),
    ("tile-budget-binds-when-forced", lambda: {"forced": _tile("forced")},
     lambda: {"forced": _break(_tile("forced"), lambda t: t.rounds[0].ledger.clear())}),
    ("swa-capped-chunk-taken-at-cap", lambda: {"forced": _swa("forced")},
     lambda: {"forced": _break(_swa("forced"), _cut_past_cap)}),
    ("continuations-replayed", lambda: {"off": _swa("off")},
     lambda: {"off": _break(_swa("off"), _no_continuation)}),
    ("swa-continuation-charged-to-ring-once", lambda: {"off": _swa("off", ring=True)},
     lambda: {"off": _break(_swa("off", ring=True), _ring_twice)}),
    ("swa-cap-below-chunk", lambda: {"off": _swa("off")},
     lambda: {"off": _break(_swa("off"), _never_capped)}),
    ("mamba-gap-reserve-per-new-state", lambda: {"off": _mamba("off")},
     lambda: {"off": _break(_mamba("off"), _gap_per_chunk)}),
    ("mamba-prefix-sharing-excludes-exact-fill",
     lambda: {"forced": _mamba("forced", effective=False, sharing=True)},
     lambda: {"forced": _mamba("forced", effective=True, sharing=True)}),
    ("excluded-forced-equals-off",
     lambda: {"off": _mamba("off"), "forced": _mamba("forced", effective=False, sharing=True)},
     lambda: {"off": _mamba("off"),
              "forced": _break(_mamba("forced", effective=False, sharing=True),
                               lambda t: t.rounds[0].admissions[0].__setattr__("extend_len", 1984))}),
    ("dllm-budget-page-ceiled", lambda: {"off": _dllm("off")},
     lambda: {"off": _break(_dllm("off"), _dllm_floor)}),
    ("dllm-excludes-exact-fill", lambda: {"forced": _dllm("forced")},
     lambda: {"forced": _dllm("forced", effective=True)}),
]


@pytest.mark.parametrize(("name", "healthy", "broken"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_invariant_holds_on_a_healthy_trace_and_fails_on_one_that_breaks_it(
        name: str, healthy: Callable[[], dict[str, Trace]],
        broken: Callable[[], dict[str, Trace]]) -> None:
    good = check_ledger(healthy())
    assert good.invariants[name].holds, good.failures
    bad = check_ledger(broken())
    assert not bad.invariants[name].holds, bad.failures
    lines = [line for line in bad.failures if f": {name}: " in line]
    assert lines and all(" [" in line.split(f": {name}: ")[0] for line in lines), bad.failures


def test_every_named_invariant_has_a_breaking_case() -> None:
    """A new invariant in ledger_checks comes with a case above (the report names them all)."""
    seen: set[str] = set()
    for _name, healthy, broken in CASES:
        for traces in (healthy(), broken()):
            seen |= set(check_ledger(traces).invariants)
    assert seen == {c[0] for c in CASES}


def test_a_leaked_slot_is_named_with_its_counts() -> None:
    report = check_ledger({"off": _break(_tile("off"), _leak_tokens)})
    assert any("free 96 + evictable 0 != pool 100" in line for line in report.failures)


def test_a_dllm_round_with_exact_fill_on_is_named() -> None:
    report = check_ledger({"forced": replace(_dllm("forced"), effective=True)})
    assert report.failures == [
        "p64-c2048-dllm-radix-blk32 [forced]: dllm-excludes-exact-fill: forced exact fill stayed "
        "on with a DllmConfig"]


# ---- what a failure says: the whole line, with the numbers a reader needs --------------------

def _lines(traces: dict[str, Trace], *details: tuple[str, str | None, str, str]) -> list[str]:
    """Failure lines as (mode, round or None, invariant, detail), the scenario's id in front."""
    sid = next(iter(traces.values())).scenario.scenario_id
    return sorted(f"{sid} [{mode}]" + (f" round {rnd}" if rnd is not None else "")
                  + f": {name}: {detail}" for mode, rnd, name, detail in details)


EXPECTED: dict[int, list[tuple[str, str | None, str, str]]] = {
    0: [("off", "0", "batch-within-chunk", "3424 tokens > chunk 2048")],
    1: [("off", "0", "kv-page-ceiled",
         "r0 grew the KV offset by 1064, expected ceil_page(1000) + page 64 = 1088")],
    2: [("off", None, "slots-and-rows-return", "free 96 + evictable 0 != pool 100")],
    3: [("off", None, "slots-and-rows-return", "2 of 3 rows free")],
    4: [("forced", "0", "forced-not-below-off-unless-named-budget",
         "forced admits 1000 tokens, off 2024, and no named budget refused"),
        ("forced", None, "tile-budget-binds-when-forced",
         "budget 16 refused nothing: the scenario no longer exercises the tile budget")],
    5: [("forced", None, "tile-budget-binds-when-forced",
         "budget 16 refused nothing: the scenario no longer exercises the tile budget")],
    6: [("forced", "0", "swa-capped-chunk-taken-at-cap",
         "r0 cut at 1088 under an SWA chunk_tokens_limit of 1024"),
        ("forced", "0", "kv-page-ceiled",
         "r0 grew the KV offset by 1088, expected ceil_page(1088) + page 64 = 1152")],
    7: [("off", None, "continuations-replayed", "no chunked continuation")],
    8: [("off", "1", "swa-continuation-charged-to-ring-once",
         "r0 charged 512 to the SWA ring, expected 0")],
    9: [("off", None, "swa-cap-below-chunk",
         "chunk_tokens_limit never went below the chunk: the SWA pool does not bind")],
    10: [("off", "1", "mamba-gap-reserve-per-new-state", "r0 debited 1 mamba slots, expected 0")],
    11: [("forced", None, "mamba-prefix-sharing-excludes-exact-fill",
          "exact fill effective True with prefix sharing True")],
    13: [("off", "0", "dllm-budget-page-ceiled",
          "r0 took 1000 off rem_dllm_tokens, expected ceil_page(1000) = 1024")],
    14: [("forced", None, "dllm-excludes-exact-fill",
          "forced exact fill stayed on with a DllmConfig")],
}


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c[0] for c in CASES])
def test_a_healthy_trace_fails_no_invariant_at_all(index: int) -> None:
    report = check_ledger(CASES[index][1]())
    assert report.failures == [] and all(i.holds for i in report.invariants.values())


@pytest.mark.parametrize("index", sorted(EXPECTED), ids=[CASES[i][0] for i in sorted(EXPECTED)])
def test_a_broken_trace_fails_with_lines_naming_where_and_the_numbers(index: int) -> None:
    traces = CASES[index][2]()
    assert sorted(check_ledger(traces).failures) == _lines(traces, *EXPECTED[index])


def test_a_forced_replay_differing_from_off_where_exact_fill_is_excluded_says_where() -> None:
    """A mamba forced replay with exact fill off (excluded) that differs from off: the line gives
    the first difference (and the shorter forced chunk's KV growth is named too)."""
    from servegate.admission.checks import first_difference

    traces = CASES[12][2]()
    diff = first_difference(traces["off"], traces["forced"])
    assert diff is not None and diff.startswith("round 0: off extend [2048]")
    assert sorted(check_ledger(traces).failures) == _lines(
        traces, ("forced", None, "excluded-forced-equals-off", diff),
        ("forced", "0", "kv-page-ceiled", "r0 grew the KV offset by 2120, expected "
                                          "ceil_page(1984) + page 64 + mamba gap 8 = 2056"))


def test_a_note_left_by_the_replay_is_a_leak_named_by_it() -> None:
    trace = _tile("off")
    trace.notes.append("request r1 still holds 3 pages")
    assert check_ledger({"off": trace}).failures == _lines(
        {"off": trace}, ("off", None, "slots-and-rows-return", "request r1 still holds 3 pages"))


def test_evictable_tokens_count_as_returned() -> None:
    trace = _tile("off")
    trace.free_after, trace.evictable_after = 90, 10
    assert check_ledger({"off": trace}).failures == []


def test_a_batch_of_exactly_the_chunk_is_within_it_and_dllm_rounds_are_not_held_to_it() -> None:
    full = _trace("tile-budget", "off", [[_adm("r0", 1024), _adm("r1", 1024)]])
    assert check_ledger({"off": full}).failures == []
    dllm = _trace("dllm", "off", [[_adm("r0", 1500, dllm_charge=1536),
                                   _adm("r1", 1000, dllm_charge=1024)]])
    assert dllm.rounds[0].batch_tokens == 2500 > CHUNK
    assert check_ledger({"off": dllm}).failures == []


def test_forced_is_compared_with_off_only_while_their_rounds_agree() -> None:
    """Round 0 identical, round 1 forced below off without a refusal: a failure; once a round's
    admissions differ, later rounds start from other states and are not compared; forced
    needing fewer rounds than off is compared on the rounds both have."""
    off = _trace("tile-budget", "off", [[_adm("r0", 1000)], [_adm("r1", 1024), _adm("r2", 512)]])
    below = _trace("tile-budget", "forced", [[_adm("r0", 1000)], [_adm("r1", 1024)]],
                   round_ledger={"tile_refusals": []})
    below.rounds[0].ledger["tile_refusals"] = [_REFUSAL]       # the budget bound in round 0
    report = check_ledger({"off": off, "forced": below})
    assert not report.invariants["forced-not-below-off-unless-named-budget"].holds
    moved = _trace("tile-budget", "forced", [[_adm("r0", 960)], [_adm("r1", 64)]])
    moved.rounds[0].ledger["tile_refusals"] = [_REFUSAL]
    moved.rounds[0].batch_tokens = 1000                        # same tokens, other split
    report = check_ledger({"off": off, "forced": moved})
    assert report.invariants["forced-not-below-off-unless-named-budget"].holds
    shorter = _trace("tile-budget", "forced", [[_adm("r0", 1000)]],
                     round_ledger={"tile_refusals": [_REFUSAL]})
    report = check_ledger({"off": off, "forced": shorter})
    assert report.invariants["forced-not-below-off-unless-named-budget"].holds


def test_a_tile_refusal_finding_carries_every_number_in_the_report_json() -> None:
    traces = {"off": _tile("off"), "forced": _tile("forced")}
    report = check_ledger(traces)
    sid = traces["off"].scenario.scenario_id
    data = report.to_json()
    assert (data["scenario"], data["kind"], data["modes"]) == (sid, "tile-budget", ["off", "forced"])
    assert {i["name"]: (i["holds"], i["failures"]) for i in data["invariants"]} == {
        "kv-page-ceiled": (True, []), "batch-within-chunk": (True, []),
        "slots-and-rows-return": (True, []), "tile-budget-binds-when-forced": (True, []),
        "forced-not-below-off-unless-named-budget": (True, [])}
    assert data["findings"] == [{
        "name": "tile-budget-refusal",
        "detail": f"{sid} round 0: compact tile budget 16 refused forced's 1048-token chunk "
                  f"(17 tiles > 16) with no smaller page-aligned retry: forced admits 1000 "
                  f"(1000), off admits 2024 (1000 + 1024)",
        "round": 0, "refused_len": 1048, "tiles": 17, "budget": 16, "tile_mode": "compact",
        "forced_tokens": 1000, "off_tokens": 2024, "forced_extend_lens": [1000],
        "off_extend_lens": [1000, 1024]}]


def test_a_failed_invariant_is_reported_not_holding_in_the_json() -> None:
    data = check_ledger({"off": _break(_tile("off"), _leak_row)}).to_json()
    [leak] = [i for i in data["invariants"] if i["name"] == "slots-and-rows-return"]
    assert leak["holds"] is False and leak["failures"] == [
        f"{data['scenario']} [off]: slots-and-rows-return: 2 of 3 rows free"]


def test_a_tile_budget_that_ignores_admitted_requests_is_a_finding_at_its_first_round() -> None:
    """sglang's _admitted_extend_lens reading a Req attribute this sglang lacks: rounds of
    several requests over the budget (a round's single first request is never checked, a
    round at the budget is within it) make one finding, at the first such round."""
    rounds = [[_adm("r0", 1000)], [_adm("r1", 512), _adm("r2", 512)],
              [_adm("r3", 1000), _adm("r4", 1024)], [_adm("r5", 640), _adm("r6", 640)]]
    tiles = [20, 16, 17, 18]

    def trace(missing: bool) -> Trace:
        t = _trace("tile-budget", "off", rounds, tile_admitted_attr_missing=missing)
        for rnd, n in zip(t.rounds, tiles, strict=True):
            rnd.ledger["tiles"] = n
        return t

    assert check_ledger({"off": trace(False)}).findings == []
    report = check_ledger({"off": trace(True)})
    sid = report.scenario
    assert report.to_json()["findings"] == [{
        "name": "tile-budget-ignores-admitted",
        "detail": f"{sid} [off] round 2: the round's compact tiles are 17 > budget 16 "
                  f"(1000 + 1024 tokens): _admitted_extend_lens reads Req.extend_input_len, "
                  f"which this sglang's Req does not have, so admitted requests count 0 tiles",
        "round": 2, "mode": "off", "tiles": 17, "budget": 16, "extend_lens": [1000, 1024]}]


def test_exact_fill_exclusion_is_checked_for_dllm_and_mamba_only() -> None:
    """A dLLM forced replay that exact fill left alone equals off (checked); an SWA forced
    replay that is not effective is no exclusion case (not checked)."""
    dllm = check_ledger({"off": _dllm("off"), "forced": _dllm("forced", effective=False)})
    assert dllm.invariants["excluded-forced-equals-off"].holds
    swa_forced = replace(_swa("forced"), effective=False)
    swa = check_ledger({"off": _swa("off"), "forced": swa_forced})
    assert "excluded-forced-equals-off" not in swa.invariants


def test_only_a_chunk_capped_below_the_chunk_size_is_held_to_its_cap() -> None:
    """forced must take a capped chunk at the cap, off may cut it shorter; a chunk whose limit is
    the chunk size, or an unchunked last piece, is not capped; an admission without a recorded
    limit (the budget check returned none) counts as uncapped."""
    def swa(mode: str, first: int, rest_limit: int | None, rest_chunked: bool = False) -> Trace:
        a = _adm("r0", first, chunked=True, chunk_tokens_limit=1024, swa_reserved=0)
        extra = {} if rest_limit is None else {"chunk_tokens_limit": rest_limit}
        b = _adm("r0", 3000 - first, prefix=first, chunked=rest_chunked, swa_reserved=0, **extra)
        return _trace("swa", mode, [[a], [b]], swa_ring_cost=512)

    assert check_ledger({"off": swa("off", 960, 2048)}).failures == []
    assert check_ledger({"forced": swa("forced", 1024, 1024)}).failures == []
    assert check_ledger({"forced": swa("forced", 1024, 2048, rest_chunked=True)}).failures == []
    lone = _adm("r9", 128, swa_reserved=0)                  # no limit recorded
    capped = _adm("r0", 1024, chunked=True, chunk_tokens_limit=1024, swa_reserved=0)
    rest = _adm("r0", 1976, prefix=1024, chunk_tokens_limit=2048, swa_reserved=0)
    unlimited = _trace("swa", "off", [[lone], [capped], [rest]], swa_ring_cost=512)
    assert check_ledger({"off": unlimited}).failures == []
    short = swa("forced", 960, 2048)
    assert check_ledger({"forced": short}).failures == _lines(
        {"forced": short}, ("forced", "0", "swa-capped-chunk-taken-at-cap",
                            "r0 cut at 960 under an SWA chunk_tokens_limit of 1024"))
    over = swa("off", 1088, 2048)
    assert check_ledger({"off": over}).failures == _lines(
        {"off": over}, ("off", "0", "swa-capped-chunk-taken-at-cap",
                        "r0 cut at 1088 under an SWA chunk_tokens_limit of 1024"))


def test_a_continuation_after_a_one_token_chunk_debits_no_new_mamba_state() -> None:
    first = _adm("r0", 1, chunked=True, slot_cost=8, mamba_slots=1)
    rest = _adm("r0", 999, prefix=1, slot_cost=8, mamba_slots=0)
    trace = _trace("mamba", "off", [[first], [rest]], mamba_slot_cost=8, prefix_sharing=False)
    assert check_ledger({"off": trace}).failures == []


def test_a_tile_refusal_finding_lists_each_admitted_length() -> None:
    off = _tile("off")
    forced = _trace("tile-budget", "forced", [[_adm("r0", 600), _adm("r1", 400)]],
                    round_ledger={"tile_refusals": [_REFUSAL]})
    [finding] = check_ledger({"off": off, "forced": forced}).findings
    assert finding.detail.endswith("forced admits 1000 (600 + 400), off admits 2024 (1000 + 1024)")
