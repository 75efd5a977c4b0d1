"""Replay a ledger scenario: the same scheduler loop as ``replay``, reading more of the ledger.

Per admission it records what sglang's own objects charged beyond the KV offset: the SWA budget's
``swa_offset`` growth, the mamba slots debited, the ``chunk_tokens_limit`` that
``_check_prefill_budget`` returned and the continuation cap from ``available_chunk_tokens``.
Per round: the tile budget's refusals. Methods are wrapped only to record their return values;
sglang's code still decides.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from servegate.admission.ledger_pools import MambaPools, SwaPools
from servegate.admission.replay import (
    Admission,
    Replayer,
    Round,
    Sglang,
    Trace,
    _token_ids,
    cpu_scheduler,
    load_sglang,
)
from servegate.admission.scenario import Scenario, ScenarioError
from servegate.admission.tile_budget import TileRecorder, round_tiles, tile_budget


class ReturnRecorder:
    """Wrap ``owner.name`` for the replay; keep each call's return value until drained."""

    def __init__(self) -> None:
        self.calls: dict[str, list[Any]] = {}

    @contextlib.contextmanager
    def wrap(self, owner: type, name: str) -> Iterator[None]:
        real = owner.__dict__.get(name)
        if real is None:
            yield
            return
        calls = self.calls.setdefault(name, [])

        def recording(*args: Any, **kwargs: Any) -> Any:
            value = real(*args, **kwargs)
            calls.append(value)
            return value

        setattr(owner, name, recording)
        try:
            yield
        finally:
            setattr(owner, name, real)

    def drain(self, name: str) -> list[Any]:
        calls = self.calls.get(name, [])
        values = list(calls)
        calls.clear()               # in place: the wrapper appends to this list
        return values


class LedgerReplayer(Replayer):
    def __init__(self, sg: Sglang, scenario: Scenario, pools: Any, returns: ReturnRecorder,
                 tiles: TileRecorder | None) -> None:
        super().__init__(sg, scenario, pools)
        self.returns, self.tiles = returns, tiles

    def observe(self, adder: Any) -> dict[str, int]:
        for name in ("_check_prefill_budget", "available_chunk_tokens"):
            self.returns.drain(name)
        return self.observe_values(adder)

    def note(self, adder: Any, seen: Any, admission: Admission) -> Admission:
        after = self.observe_values(adder)
        ledger = admission.ledger
        if isinstance(self.pools, SwaPools):
            ledger["swa_reserved"] = after["swa_offset"] - seen["swa_offset"]
            checked = [v for v in self.returns.drain("_check_prefill_budget") if v and v[0]]
            if checked and checked[-1][1] is not None:
                ledger["chunk_tokens_limit"] = int(checked[-1][1])
            capped = [v for v in self.returns.drain("available_chunk_tokens") if v is not None]
            if capped:
                ledger["continuation_cap"] = int(capped[-1])
        if isinstance(self.pools, MambaPools):
            ledger["mamba_slots"] = seen["mamba_slots"] - after["mamba_slots"]
        return admission

    @staticmethod
    def observe_values(adder: Any) -> dict[str, int]:
        budget = getattr(adder, "memory_budget", None)
        return {"swa_offset": int(getattr(budget, "swa_offset", 0) or 0),
                "mamba_slots": int(getattr(adder, "rem_mamba_slots", None) or 0)}

    def end_round(self, adder: Any, rnd: Round) -> None:
        if self.tiles is None:
            return
        spec = self.scenario.ledger
        assert spec is not None and spec.tile_budget_mode is not None
        rnd.ledger["tiles"] = round_tiles(self.sg.policy, rnd.extend_lens, spec.tile_budget_mode)
        refusals = self.tiles.drain()
        if refusals:
            rnd.ledger["tile_refusals"] = refusals


@contextlib.contextmanager
def _mamba_chunk_grid(sg: Sglang) -> Iterator[None]:
    """Pre-seed ``_mamba_cache_chunk_size`` on the server args, as sglang's own fixtures do, so
    ``MambaComponent`` does not load a model's HF config (there is no model here)."""
    from sglang.srt.runtime_context import get_server_args

    args = get_server_args()
    had = "_mamba_cache_chunk_size" in vars(args)
    previous = vars(args).get("_mamba_cache_chunk_size")
    args._mamba_cache_chunk_size = 64       # FLA's CHUNK_SIZE, sglang's fallback
    try:
        yield
    finally:
        if had:
            args._mamba_cache_chunk_size = previous
        else:
            del args._mamba_cache_chunk_size


def replay_ledger(scenario: Scenario, mode: str, sg: Sglang | None = None) -> Trace:
    """One ledger scenario under exact-fill ``mode``; dLLM goes through ``dllm_ledger``."""
    scenario.validate()
    spec = scenario.ledger
    if spec is None:
        raise ScenarioError(f"{scenario.scenario_id}: not a ledger scenario")
    sg = sg or load_sglang()
    if spec.kind == "dllm":
        from servegate.admission.dllm_ledger import replay_dllm

        return replay_dllm(scenario, mode, sg)
    _, prompt_ids = _token_ids(scenario)
    longest = max(len(ids) for ids in prompt_ids)
    returns = ReturnRecorder()
    with contextlib.ExitStack() as stack:
        stack.enter_context(cpu_scheduler(sg, scenario, mode))
        tiles = None
        if spec.kind == "tile-budget":
            assert spec.tile_budget is not None and spec.tile_budget_mode is not None
            tiles = stack.enter_context(
                tile_budget(sg.policy, spec.tile_budget, spec.tile_budget_mode))
        if spec.kind == "mamba":
            MambaPools.check_page(scenario)
            stack.enter_context(_mamba_chunk_grid(sg))
        stack.enter_context(returns.wrap(sg.policy.PrefillAdder, "_check_prefill_budget"))
        pools = _pools(sg, scenario, longest, len(prompt_ids))
        budget_cls = type(pools.allocator.create_prefill_budget(pools.tree))
        stack.enter_context(returns.wrap(budget_cls, "available_chunk_tokens"))
        replayer = LedgerReplayer(sg, scenario, pools, returns, tiles)
        rounds = replayer.run([replayer.make_req(ids) for ids in prompt_ids])
        free, evictable = (pools.free_and_evictable() if hasattr(pools, "free_and_evictable")
                           else (int(pools.allocator.available_size()),
                                 int(pools.tree.evictable_size())))
    trace = Trace(scenario=scenario, mode=mode, effective=bool(replayer.effective), rounds=rounds,
                  pool_tokens=getattr(pools, "free_before", pools.tokens), free_after=free,
                  evictable_after=evictable, rows_total=pools.rows,
                  rows_free_after=int(pools.req_to_token.available_size()))
    trace.notes += pools.leaks() if hasattr(pools, "leaks") else []
    trace.ledger.update(_trace_ledger(pools, tiles))
    return trace


def _pools(sg: Sglang, scenario: Scenario, longest: int, requests: int) -> Any:
    from servegate.admission.replay import Pools

    assert scenario.ledger is not None
    kind = scenario.ledger.kind
    if kind == "swa":
        return SwaPools(sg, scenario, longest, requests)
    if kind == "mamba":
        return MambaPools(sg, scenario, longest, requests)
    return Pools(sg, scenario, longest, requests)


def _trace_ledger(pools: Any, tiles: TileRecorder | None) -> dict[str, Any]:
    """Whole-replay readings the checks need (never part of the golden rounds)."""
    out: dict[str, Any] = {}
    if isinstance(pools, SwaPools):
        out["swa_pool"] = pools.swa_size
        out["swa_ring_cost"] = int(pools.allocator.swa_ring_cost_tokens)
    if isinstance(pools, MambaPools):
        out["mamba_slot_cost"] = pools.slot_cost
        out["prefix_sharing"] = bool(pools.tree.supports_prefix_sharing())
    if tiles is not None:
        out["tile_admitted_attr_missing"] = tiles.admitted_attr_missing
    return out
