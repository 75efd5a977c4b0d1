"""The sglang modules the admission replay drives, imported once per process (one tree each).

Kept apart from the replay loop so the scenario kinds (``replay``, ``ledger_replay``) share one
import and its feature detection of releases 0.5.20-0.5.23.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from servegate.serve.trees import SglangTree, TreeError, describe_import_failure


class Sglang:
    """The sglang modules the replay drives, imported once (about 10 s on this machine)."""

    def __init__(self) -> None:
        import torch

        torch.set_num_threads(1)  # 2-core machines: intra-op threads only add contention
        from sglang.srt.managers import schedule_batch, schedule_policy
        from sglang.srt.mem_cache import common, memory_pool
        from sglang.srt.mem_cache.allocator import paged, token
        from sglang.srt.mem_cache.cache_init_params import CacheInitParams
        from sglang.srt.mem_cache.unified_cache.component_type import ComponentType
        from sglang.srt.mem_cache.unified_radix_cache import UnifiedRadixCache
        from sglang.srt.runtime_context import get_context
        from sglang.srt.sampling.sampling_params import SamplingParams
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        self.torch = torch
        self.policy: ModuleType = schedule_policy
        self.batch: ModuleType = schedule_batch
        self.common: ModuleType = common
        self.memory_pool: ModuleType = memory_pool
        self.paged: ModuleType = paged
        self.token: ModuleType = token
        self.CacheInitParams = CacheInitParams
        self.ComponentType = ComponentType
        self.UnifiedRadixCache = UnifiedRadixCache
        self.get_context = get_context
        self.SamplingParams = SamplingParams
        self.SpeculativeAlgorithm = SpeculativeAlgorithm
        import sglang

        self.version: str = getattr(sglang, "__version__", "unknown")
        self.package_dir: str = str(Path(next(iter(sglang.__path__))))
        self.has_gate: bool = hasattr(schedule_policy, "_use_exact_chunk_fill")
        self.adaptations: list[str] = []
        from sglang.srt.mem_cache import registry

        self.ChunkCache: Any = None
        if "sglang.srt.mem_cache.chunk_cache" in registry.default_radix_cache_factory.__code__.co_names:
            from sglang.srt.mem_cache.chunk_cache import ChunkCache

            self.ChunkCache = ChunkCache
        extend = paged.PagedTokenToKVPoolAllocator.alloc_extend
        if "alloc_extend_naive" not in extend.__code__.co_names and hasattr(paged, "alloc_extend_naive"):
            # 0.5.20-0.5.21: the paged extend always launches a triton kernel (no CPU driver
            # here); 0.5.22+ call the tree's own alloc_extend_naive on CPU, and so do we.
            paged.alloc_extend_kernel = _NaiveExtendLaunch(paged.alloc_extend_naive)
            self.adaptations.append(
                "paged alloc_extend: triton kernel -> the tree's alloc_extend_naive (CPU)")

    # Releases 0.5.20-0.5.23 name the same scheduler steps differently; each helper below calls
    # the tree's own function or reads its own field (feature-detected, never re-implemented).
    def checkpoint(self, req: Any, tree: Any) -> None:
        """Stash the chunked request before the next round (``Scheduler`` does this first)."""
        if hasattr(self.common, "checkpoint_kv_cache"):          # 0.5.22+
            self.common.checkpoint_kv_cache(req, tree)
        else:                                                    # 0.5.20-0.5.21: stash_chunked_request
            self.common.maybe_cache_unfinished_req(req, tree, chunked=True)

    def release(self, req: Any, tree: Any) -> None:
        """A finished prefill goes into the tree cache."""
        if "checkpoint" in inspect.signature(self.common.release_kv_cache).parameters:
            self.common.release_kv_cache(req, tree, checkpoint=True)
        else:
            self.common.release_kv_cache(req, tree)

    @staticmethod
    def prefix_len(req: Any) -> int:
        value = getattr(req, "prefix_len", None)
        return int(value) if isinstance(value, int) else len(req.prefix_indices)

    @staticmethod
    def extend_len(req: Any) -> int:
        value = getattr(req, "extend_len", None)
        return int(value) if isinstance(value, int) else int(req.extend_range.length)

    @staticmethod
    def kv_offset(adder: Any) -> int:
        """The KV budget's current offset (``memory_budget`` from 0.5.21, fields before)."""
        budget = getattr(adder, "memory_budget", None)
        return int(budget.current_offset if budget is not None else adder.cur_rem_token_offset)


class _NaiveExtendLaunch:
    """``alloc_extend_kernel[(bs,)](...)`` on CPU: the same call through sglang's own
    ``alloc_extend_naive`` (argument order as ``PagedTokenToKVPoolAllocator.alloc_extend``)."""

    def __init__(self, naive: Any) -> None:
        self._naive = naive

    def __getitem__(self, _grid: object) -> Any:
        def launch(prefix_lens: Any, seq_lens: Any, last_loc: Any, free_pages: Any,
                   out_indices: Any, _bs_pow2: int, page_size: int) -> None:
            self._naive(prefix_lens, seq_lens, last_loc, free_pages, out_indices, page_size,
                        out_indices.device)
        return launch


_SGLANG: Sglang | None = None


def load_sglang() -> Sglang:
    global _SGLANG
    if _SGLANG is None:
        _SGLANG = Sglang()
    return _SGLANG


def load_sglang_tree(tree: SglangTree) -> Sglang:
    """Import sglang from ``tree``, first on ``sys.path``; a failure names the tree and import."""
    loaded = sys.modules.get("sglang")
    if loaded is not None and Path(next(iter(loaded.__path__))).resolve() != tree.package_dir.resolve():
        raise TreeError(f"{tree.flag} {tree.path}: this process already imported sglang from "
                        f"{next(iter(loaded.__path__))}; a tree needs its own process")
    root = str(tree.import_root)
    if root in sys.path:
        sys.path.remove(root)
    sys.path.insert(0, root)
    try:
        sg = load_sglang()
    except Exception as err:  # any failure while importing the tree is reported
        raise TreeError(describe_import_failure(tree, err)) from err
    if Path(sg.package_dir).resolve() != tree.package_dir.resolve():
        raise TreeError(f"{tree.flag} {tree.path}: sglang was imported from {sg.package_dir}, "
                        f"expected {tree.package_dir}")
    return sg
