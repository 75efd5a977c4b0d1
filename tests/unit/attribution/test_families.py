"""The family registry: CPU op names and GPU kernel names land in their family, MoE and
attention before GEMM, and anything unnamed is ``other``."""

from __future__ import annotations

import pytest

from servegate.attribution.families import FAMILIES, LABELS, OTHER, RULES, classify, label


@pytest.mark.parametrize(("name", "family"), [
    ("aten::linear", "gemm"), ("aten::addmm", "gemm"), ("aten::matmul", "gemm"),
    ("aten::bmm", "gemm"),
    ("Cijk_Alik_Bljk_BBS_BH_MT256x256x64_MI16x16x1", "gemm"),
    ("void wvSplitK_hf_sml_<__hip_bfloat16, 64, 2>", "gemm"),
    ("aiter::gemm_a8w8_bpreshuffle", "gemm"),
    ("aten::scaled_dot_product_attention", "attention"),
    ("_fwd_kernel_unified_attention_2d", "attention"),
    ("fmha_fwd_hd128_bf16_causal", "attention"),
    ("aiter::mla_decode_stage1", "attention"),
    ("fused_moe_kernel", "moe"), ("aiter::fmoe_g1u1", "moe"),
    ("ck_moe_stage1_gemm", "moe"),                   # a grouped GEMM of the MoE: MoE, not GEMM
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "communication"),
    ("cross_device_reduce_1stage", "communication"),
    ("aiter::rmsnorm2d_fwd", "norm_elementwise"), ("aten::rms_norm", "norm_elementwise"),
    ("aten::silu", "norm_elementwise"), ("aten::mul", "norm_elementwise"),
    ("aten::to", "norm_elementwise"), ("aten::copy_", "norm_elementwise"),
    ("void at::native::vectorized_elementwise_kernel<4>", "norm_elementwise"),
    ("aten::slice", "other"), ("aten::topk", "other"), ("some_new_kernel", "other"),
])
def test_names_land_in_their_family(name: str, family: str) -> None:
    assert classify(name) == family


def test_every_rule_names_a_family_and_every_family_has_a_label() -> None:
    assert {rule.family for rule in RULES} == set(FAMILIES) - {OTHER}
    assert set(LABELS) == set(FAMILIES)
    assert label("gemm") == "dense GEMM" and label("unknown") == "unknown"
