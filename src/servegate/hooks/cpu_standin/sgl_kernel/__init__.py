"""TEST DOUBLE: servegate's CPU stand-in for sgl_kernel's CPU build (which is not on PyPI).

sglang's CPU engine does ``from sgl_kernel import assign_req_to_token_pool_cpu`` (every
allocation, ``sglang/srt/mem_cache/allocation.py``) and ``copy_all_layer_kv_cache_cpu``
(speculative decoding only, ``sglang/kernels/ops/kvcache/cache_move.py``). This package provides
exactly those two in plain torch with the same semantics as sglang's Triton kernels. It registers
NO ``torch.ops.sgl_kernel`` ops, so sglang keeps its ``forward_native`` paths everywhere else.
servegate puts it on the server's PYTHONPATH only for the ``cpu`` runner class.
"""

from __future__ import annotations

import ctypes

import torch

__version__ = "0.0.0+servegate.cpu.standin"
SERVEGATE_CPU_STANDIN = True


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """``req_to_token[req, start:end] = out_cache_loc[cursor:cursor+end-start]`` per request.

    Same as the Triton ``assign_req_to_token_pool``: request i's slice of ``out_cache_loc``
    starts after the lengths of requests 0..i-1 (``pool_len`` is the row length, implied here).
    """
    del pool_len
    starts = start_offset.tolist()
    ends = end_offset.tolist()
    rows = req_pool_indices.tolist()
    cursor = 0
    for row, start, end in zip(rows, starts, ends, strict=False):
        length = end - start
        if length > 0:
            req_to_token[row, start:end] = out_cache_loc[cursor:cursor + length].to(
                req_to_token.dtype)
        cursor += length


def copy_all_layer_kv_cache_cpu(
    data_ptrs: torch.Tensor,
    strides: torch.Tensor,
    tgt_loc: torch.Tensor,
    src_loc: torch.Tensor,
) -> None:
    """For every buffer b: row ``tgt_loc[j]`` = row ``src_loc[j]`` (rows of ``strides[b]`` bytes).

    All source rows are read before any target row is written, so an in-place permutation is
    safe, as in the Triton ``copy_all_layer_kv_cache_tiled``.
    """
    src = src_loc.tolist()
    tgt = tgt_loc.tolist()
    for base, stride in zip(data_ptrs.tolist(), strides.tolist(), strict=False):
        rows = [ctypes.string_at(base + s * stride, stride) for s in src]
        for t, data in zip(tgt, rows, strict=False):
            ctypes.memmove(base + t * stride, data, stride)


def _speculative_only(name: str) -> object:
    """sglang imports these at module load on CPU; they run only for speculative decoding,
    which the servegate CPU profile never enables. Calling one is a loud error, not a guess."""

    def _unsupported(*args: object, **kwargs: object) -> None:
        raise NotImplementedError(
            f"sgl_kernel.{name}: speculative decoding is not provided by servegate's CPU "
            f"stand-in for sgl_kernel (test double)")

    _unsupported.__name__ = name
    return _unsupported


build_tree_kernel_efficient_cpu = _speculative_only("build_tree_kernel_efficient_cpu")
verify_tree_greedy_cpu = _speculative_only("verify_tree_greedy_cpu")
rotate_input_ids_cpu = _speculative_only("rotate_input_ids_cpu")
fill_accept_out_cache_loc_cpu = _speculative_only("fill_accept_out_cache_loc_cpu")
fill_bonus_tokens_cpu = _speculative_only("fill_bonus_tokens_cpu")
assign_draft_cache_locs_contiguous_cpu = _speculative_only("assign_draft_cache_locs_contiguous_cpu")
assign_extend_cache_locs_cpu = _speculative_only("assign_extend_cache_locs_cpu")
