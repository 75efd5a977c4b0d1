"""The one registry of kernel families: which op or kernel name belongs to GEMM, attention, MoE,
communication or norm/elementwise; everything else is ``other`` and listed by name, so a missing
rule shows in the report (the rules' order and matching: docs/serve.md, Profiled blocks)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

GEMM = "gemm"
ATTENTION = "attention"
MOE = "moe"
COMMUNICATION = "communication"
NORM_ELEMENTWISE = "norm_elementwise"
OTHER = "other"
FAMILIES: tuple[str, ...] = (GEMM, ATTENTION, MOE, COMMUNICATION, NORM_ELEMENTWISE, OTHER)
LABELS: dict[str, str] = {GEMM: "dense GEMM", ATTENTION: "attention", MOE: "MoE",
                          COMMUNICATION: "communication", NORM_ELEMENTWISE: "norm/elementwise",
                          OTHER: "other"}


@dataclass(frozen=True)
class Rule:
    """Names matching ``pattern`` (a regular expression, case-insensitive) are ``family``."""

    family: str
    pattern: str
    why: str


RULES: tuple[Rule, ...] = (
    Rule(COMMUNICATION, r"all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|alltoall|nccl|"
                        r"rccl|c10d::|cross_device_reduce|custom_ar|broadcast|deepep|mori",
         "collectives (NCCL/RCCL, sglang's custom all-reduce, torch.distributed)"),
    Rule(MOE, r"moe|expert|topk_softmax|grouped_topk|biased_grouped_topk|fmoe",
         "fused MoE GEMMs, routing and sorting (sglang fused_moe, aiter fmoe, CK MoE)"),
    Rule(ATTENTION, r"attention|attn|flash|fmha|sdpa|paged_?mqa|mla_|_mla|decode_attention|"
                    r"extend_attention|indexer|dsa_|nsa_|sparse_mla|kv_?cache|set_kv_buffer",
         "attention kernels, sparse-attention indexers and the KV cache writes"),
    Rule(GEMM, r"aten::(linear|mm|addmm|matmul|bmm|baddbmm|_scaled_mm)\b|gemm|gemv|Cijk_|"
               r"cublas|cutlass|hipblas|tgemm|weight_packed_linear|wvsplitk|a16w16|a8w8|"
               r"a4w4|_mm_|bmm|sm\d+_xmma|splitk",
         "dense and batched GEMMs: torch linear/matmul ops, hipBLASLt/Tensile (Cijk_), "
         "aiter/CK GEMMs, cuBLAS/CUTLASS"),
    Rule(NORM_ELEMENTWISE, r"norm|rms|silu|gelu|act_and_mul|rotary|rope|softmax|elementwise|"
                           r"reduce_kernel|aten::(add|add_|sub|mul|mul_|div|div_|pow|mean|sum|"
                           r"neg|exp|rsqrt|sqrt|tanh|sigmoid|clamp|where|copy_|to|_to_copy|"
                           r"cat|fill_|zero_|index|index_put_|_index_put_impl_|index_select|"
                           r"gather|scatter|embedding|argmax|cumsum|masked_fill)\b|memcpy|"
                           r"memset|copy",
         "norms, activations, rotary embedding and the memory-bound elementwise ops "
         "(casts, copies, gathers, concatenation)"),
)


@lru_cache(maxsize=1)
def _compiled() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((rule.family, re.compile(rule.pattern, re.IGNORECASE)) for rule in RULES)


@lru_cache(maxsize=4096)
def classify(name: str) -> str:
    """The family of one op or kernel name (``other`` when no rule matches)."""
    for family, pattern in _compiled():
        if pattern.search(name):
            return family
    return OTHER


def label(family: str) -> str:
    """How a person reads the family's name."""
    return LABELS.get(family, family)
