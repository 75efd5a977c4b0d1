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
