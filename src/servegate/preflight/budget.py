"""The admission budget the scheduler will use, read off sglang's parsed ``ServerArgs``: the
per-rank chunk, ``max_prefill_tokens``, the page size (a model's forced one is the profile's:
it needs the checkpoint's config) and the radix cache (the sglang lines: docs/serve.md, Preflight)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


class BudgetInvalid(Exception):
    """The resolved budget is one sglang would reject or cannot chunk with."""


@dataclass(frozen=True)
class Budget:
    chunk_size: int                 # per scheduler (per DP rank with DP attention)
    max_prefill_tokens: int
    page_size: int
    dp_size: int                    # schedulers sharing the load (attention-DP ranks or replicas)
    dp_attention: bool
    radix: bool
    configured_chunk_size: int      # --chunked-prefill-size as given

    def contract(self) -> dict[str, Any]:
        """The JSON contract's ``budget`` object (plus the extra fields, for reading)."""
        return asdict(self)


def resolve_budget(server_args: Any) -> Budget:
    chunk = server_args.chunked_prefill_size
    if chunk is None or chunk <= 0:
        raise BudgetInvalid(f"--chunked-prefill-size {chunk}: preflight needs chunked prefill "
                            f"(a positive chunk size)")
    page = server_args.page_size or 1
    attn_dp = int(getattr(server_args, "attn_dp_size", 1) or 1)
    dp = int(server_args.dp_size or 1)
    if getattr(server_args, "enable_dp_attention", False) and attn_dp == 1:
        attn_dp, dp = dp, 1         # the deprecated spelling, as parallel_hook resolves it
    per_rank = chunk // attn_dp if attn_dp > 1 else chunk
    if per_rank % page:
        raise BudgetInvalid(f"chunk size {per_rank} (per rank) is not a multiple of page size "
                            f"{page}")
    return Budget(chunk_size=per_rank, max_prefill_tokens=int(server_args.max_prefill_tokens),
                  page_size=page, dp_size=max(attn_dp, dp), dp_attention=attn_dp > 1,
                  radix=not server_args.disable_radix_cache, configured_chunk_size=chunk)
