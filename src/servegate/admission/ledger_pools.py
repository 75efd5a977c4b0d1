"""Real hybrid pools for ledger scenarios: a SWA model's and a mamba hybrid's, as sglang builds them.

Same attributes as ``replay.Pools`` (``kv``, ``allocator``, ``req_to_token``, ``tree``, ``tokens``,
``rows``) so the one ``Replayer`` drives them; plus ``leaks()``: what did not come back.
"""

from __future__ import annotations

from typing import Any

from servegate.admission.scenario import Scenario, ScenarioError


def _pool_tokens(scenario: Scenario, requests: int) -> int:
    page = scenario.page_size
    total = sum(p.length for p in scenario.prompts)
    raw = 2 * total + 4 * scenario.chunk_size + 8 * page * (requests + 1)
    return -(-raw // page) * page


class SwaPools:
    """``SWAKVPool`` + ``SWATokenToKVPoolAllocator`` + a FULL+SWA ``UnifiedRadixCache``.

    A small SWA sub-pool makes ``SWAPrefillBudget.check_prefill`` return a ``chunk_tokens_limit``
    below the chunk. ``swa_ring`` sets the pool's ``swa_req_ring_size`` (as DeepSeek V4's pool,
    which needs its compressed-state kernels), so the allocator budgets one ring per request row."""

    def __init__(self, sg: Any, scenario: Scenario, longest: int, requests: int) -> None:
        spec = scenario.ledger
        assert spec is not None and spec.sliding_window and spec.swa_pool_tokens
        if scenario.page_size < 2:
            raise ScenarioError(f"{scenario.scenario_id}: SWATokenToKVPoolAllocator.alloc_extend "
                                f"asserts page_size > 1")
        try:
            from sglang.srt.mem_cache.allocator.swa import SWATokenToKVPoolAllocator
            from sglang.srt.mem_cache.swa_memory_pool import SWAKVPool
        except ImportError as err:
            raise ScenarioError(f"{scenario.scenario_id}: this sglang has no SWA pools ({err})") from err
        torch, page = sg.torch, scenario.page_size
        self.tokens = _pool_tokens(scenario, requests)
        self.swa_tokens = -(-spec.swa_pool_tokens // page) * page
        self.kv = SWAKVPool(size=self.tokens, size_swa=self.swa_tokens, page_size=page,
                            dtype=torch.bfloat16, head_num=1, head_dim=4,
                            swa_attention_layer_ids=[0], full_attention_layer_ids=[1], device="cpu")
        if spec.swa_ring:
            self.kv.swa_req_ring_size = spec.sliding_window
        self.rows = requests + 2
        self.req_to_token = sg.memory_pool.ReqToTokenPool(
            size=self.rows, max_context_len=longest + page + 8, device="cpu",
            enable_memory_saver=False)
        self.allocator = SWATokenToKVPoolAllocator(
            self.tokens, self.swa_tokens, page, torch.bfloat16, "cpu", self.kv, need_sort=False,
            req_to_token_pool=self.req_to_token)
        self.swa_size = int(self.allocator.size_swa)
        params = sg.CacheInitParams(
            disable=not scenario.radix, req_to_token_pool=self.req_to_token,
            token_to_kv_pool_allocator=self.allocator, page_size=page,
            tree_components=(sg.ComponentType.FULL, sg.ComponentType.SWA),
            chunked_prefill_size=scenario.chunk_size, sliding_window_size=spec.sliding_window,
            swa_gates_prefix_match=not spec.swa_ring)
        self.tree = sg.UnifiedRadixCache(params)

    def free_and_evictable(self) -> tuple[int, int]:
        return int(self.allocator.full_available_size()), int(self.tree.full_evictable_size())

    def leaks(self) -> list[str]:
        free = int(self.allocator.swa_available_size())
        # A ring belongs to a request row, not to tree nodes: all rows free means all rings free.
        evictable = 0 if self.allocator.swa_req_ring else int(self.tree.swa_evictable_size())
        if free + evictable != self.swa_size:
            return [f"SWA slots leaked: free {free} + evictable {evictable} != SWA pool {self.swa_size}"]
        return []


class MambaPools:
    """sglang's own ``init_unified_mamba_pools`` (one byte buffer for full KV and mamba states)
    + a FULL+MAMBA ``UnifiedRadixCache``: the allocator whose ``mamba_slot_full_token_cost`` makes
    ``PrefillAdder`` charge ``mamba_gap_reserve``. Page 1 only (see ``check_page``)."""

    def __init__(self, sg: Any, scenario: Scenario, longest: int, requests: int) -> None:
        self.check_page(scenario)
        try:
            from sglang.srt.configs.mamba_utils import (
                Mamba2CacheParams,
                Mamba2StateDType,
                Mamba2StateShape,
            )
            from sglang.srt.mem_cache.unified_memory_pool import init_unified_mamba_pools
        except ImportError as err:
            raise ScenarioError(f"{scenario.scenario_id}: this sglang has no unified mamba pool "
                                f"(the allocator that charges mamba_gap_reserve): {err}") from err
        torch = sg.torch
        shape = Mamba2StateShape.create(tp_world_size=1, intermediate_size=64, n_groups=1,
                                        num_heads=2, head_dim=32, state_size=16, conv_kernel=4)
        params = Mamba2CacheParams(shape=shape, layers=[0], dtype=Mamba2StateDType(
            conv=torch.bfloat16, temporal=torch.float32))
        self.rows = requests + 2
        self.tokens = _pool_tokens(scenario, requests)
        bundle = init_unified_mamba_pools(
            device="cpu", kv_cache_dtype=torch.bfloat16, head_num=1, head_dim=8, page_size=1,
            start_layer=0, end_layer=2, is_draft_worker=False, use_mla_backend=False,
            mamba_layer_ids=[0], full_attention_layer_ids=[1], mamba2_cache_params=params,
            model_context_len=longest + 8, extra_max_context_len=8,
            max_total_num_tokens=self.tokens, max_mamba_cache_size=2 * self.rows + 3,
            max_num_reqs=self.rows, enable_memory_saver=False, enable_mamba_extra_buffer=False,
            enable_mamba_extra_buffer_lazy=False, speculative_num_draft_tokens=None,
            disable_overlap_schedule=True, need_sort=False)
        self.kv, self.allocator = bundle.token_to_kv_pool, bundle.token_to_kv_pool_allocator
        self.req_to_token = bundle.req_to_token_pool
        self.slot_cost = int(self.allocator.mamba_slot_full_token_cost())
        self.free_before = int(self.allocator.available_size())
        cache = sg.CacheInitParams(
            disable=not scenario.radix, req_to_token_pool=self.req_to_token,
            token_to_kv_pool_allocator=self.allocator, page_size=1,
            tree_components=(sg.ComponentType.FULL, sg.ComponentType.MAMBA),
            chunked_prefill_size=scenario.chunk_size)
        self.tree = sg.UnifiedRadixCache(cache)

    @staticmethod
    def check_page(scenario: Scenario) -> None:
        if scenario.page_size != 1:
            raise ScenarioError(
                f"{scenario.scenario_id}: mamba at page {scenario.page_size} cannot be built on a "
                f"CPU sglang: MambaComponent requires page_size 1 without the mamba extra buffer, "
                f"and with it the unified sub-pool's paged alloc_extend launches a triton kernel "
                f"(no CPU driver); use page_size = 1")

    def free_and_evictable(self) -> tuple[int, int]:
        """Free tokens and what the tree can give back: its full KV and its mamba states' bytes
        (a cached state holds ``slot_cost`` tokens of the shared buffer)."""
        held = int(self.tree.mamba_evictable_size()) * self.slot_cost if self.tree.supports_mamba() else 0
        return int(self.allocator.available_size()), int(self.tree.full_evictable_size()) + held

    def leaks(self) -> list[str]:
        return []
