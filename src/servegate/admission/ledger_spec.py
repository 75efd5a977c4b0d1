"""What a ledger scenario adds to a plain one: the budget or pool kind whose risk it replays.

PR #32888 split the prefill ledger into KV budgets (charged by page) and compute budgets
(charged by token); its review names where that can go wrong. Each kind here replays one of
them on sglang's real objects: the AMD tile budget, a hybrid SWA model's pools, a mamba hybrid's
pools, a dLLM config.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from servegate.core.errors import ServegateError

LEDGER_KINDS: tuple[str, ...] = ("tile-budget", "swa", "mamba", "dllm")
# sglang 0.5.23 schedule_policy: SGLANG_PREFILL_TILE_BUDGET_MODE accepts exactly these.
TILE_MODES: tuple[str, ...] = ("compact", "legacy")


# What a CPU sglang cannot build of these risks, and what the suite replays instead (printed
# by `servegate admission suite`, listed as "not_built" in its JSON).
NOT_BUILT: tuple[dict[str, str], ...] = (
    {"kind": "mamba", "what": "mamba hybrid at page size > 1",
     "why": "MambaComponent requires page_size 1 without the mamba extra buffer, and with it "
            "the unified sub-pool's paged alloc_extend launches a triton kernel (no CPU "
            "driver); the mamba scenarios run at page 1"},
    {"kind": "mamba", "what": "the DCP mamba chunk grid (mamba_prefill_chunk_grid)",
     "why": "needs a published exec/parallel config with DCP enabled; on CPU the grid is 1 "
            "and floor_chunked_tokens leaves cuts alone"},
    {"kind": "swa", "what": "DeepSeek V4's own SWA pool (where sglang sets swa_req_ring_size)",
     "why": "not built here (a DeepSeek V4 model's compressed-state pool); the ring scenario "
            "sets swa_req_ring_size on the real SWAKVPool, so SWATokenToKVPoolAllocator and "
            "SWAPrefillBudget take their ring paths"},
    {"kind": "dllm", "what": "dLLM forward and staging rounds",
     "why": "need the scheduler's dllm_manager and a model; one admission round through "
            "process_dllm_incoming_reqs's calls is replayed, without KV allocation"},
    {"kind": "tile-budget", "what": "the HIP extend-attention kernel the budget protects",
     "why": "only admission is replayed: _IS_HIP and the budget constants are patched in "
            "schedule_policy, no kernel runs"},
)


class LedgerSpecError(ServegateError, ValueError):
    """A ledger scenario's parameters are invalid; the message names the key."""


@dataclass(frozen=True)
class LedgerSpec:
    kind: str
    tile_budget: int | None = None          # SGLANG_PREFILL_TILE_BUDGET (q tiles per head)
    tile_budget_mode: str | None = None     # SGLANG_PREFILL_TILE_BUDGET_MODE
    sliding_window: int | None = None       # the SWA model's window (tokens)
    swa_pool_tokens: int | None = None      # SWA sub-pool size; small makes chunk_tokens_limit bind
    swa_ring: bool = False                  # per-request SWA ring accounting (one ring per row)
    dllm_block_size: int | None = None

    @property
    def tag(self) -> str:
        """The scenario id's suffix: every parameter that changes the replay."""
        if self.kind == "tile-budget":
            return f"tb{self.tile_budget}{self.tile_budget_mode}"
        if self.kind == "swa":
            return f"sw{self.sliding_window}-swa{self.swa_pool_tokens}" + ("-ring" if self.swa_ring else "")
        if self.kind == "dllm":
            return f"blk{self.dllm_block_size}"
        return ""

    def validate(self) -> None:
        where = f"ledger kind {self.kind!r}"
        if self.kind not in LEDGER_KINDS:
            raise LedgerSpecError(f"kind {self.kind!r} is not one of {', '.join(LEDGER_KINDS)}")
        needed = {"tile-budget": ("tile_budget", "tile_budget_mode"),
                  "swa": ("sliding_window", "swa_pool_tokens"),
                  "dllm": ("dllm_block_size",)}.get(self.kind, ())
        for key in needed:
            value = getattr(self, key)
            if value is None:
                raise LedgerSpecError(f"{where}: '{key}' is required")
            if isinstance(value, int) and value < 1:
                raise LedgerSpecError(f"{where}: '{key}' must be >= 1, got {value}")
        if self.kind == "tile-budget" and self.tile_budget_mode not in TILE_MODES:
            raise LedgerSpecError(f"{where}: 'tile_budget_mode' {self.tile_budget_mode!r} is not "
                                  f"one of {', '.join(TILE_MODES)} (sglang's own modes)")

    def describe(self) -> dict[str, object]:
        return {k: v for k, v in asdict(self).items() if v not in (None, False)}
