"""The admission budget the scheduler will use, read off sglang's parsed ``ServerArgs``.

- chunk size: ``--chunked-prefill-size``; with DP attention each rank gets ``chunk // attn_dp``
  (``sglang/srt/arg_groups/parallel_hook.py`` line 331; the deprecated ``--dp-size N
  --enable-dp-attention`` becomes ``attn_dp_size = N``, lines 50-57).
- ``max_prefill_tokens``: ``--max-prefill-tokens``, default 16384
  (``srt/arg_groups/fields/schedule.py`` lines 71-81), passed unchanged as the adder's
  ``rem_input_tokens`` (``srt/managers/tp_worker.py`` line 577); the adder stops a round once
  ``rem_input_tokens <= 0`` (``srt/managers/schedule_policy.py`` line 883, ``budget_state``), so a
  value below the chunk caps every batch below it.
- page size: ``--page-size`` (servegate's profile key ``page_size``). A model may force its own:
  for DSA models (GLM-5.x, DeepSeek-V3.2) sglang 0.5.23 sets ``page_size = 64 * index_kpool``
  on CUDA and on ROCm with aiter's preshuffle paged-MQA path, and 1 on the legacy ROCm path
  (``srt/arg_groups/model_overrides/deepseek_v2.py`` lines 151-173). That needs the checkpoint's
  config, which preflight does not download, so the profile states it (``page_size``, with the
  upstream line cited) and preflight replays what the profile says.
- radix cache: on unless ``--disable-radix-cache`` (which admission path the adder takes).
"""

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
