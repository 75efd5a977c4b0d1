"""servegate.core.stack: a fingerprint's components as one comparable view (what `reference:`
and the history's change points both compare)."""

from __future__ import annotations

from servegate.core import stack

CLOCKS = {"tool": "amd-smi", "sclk_mhz": [132, 141], "sclk_max_mhz": [2400, 2400],
          "mclk_mhz": [1600, 1600], "mclk_max_mhz": [1600, 1600]}
FP = {"rocm": "7.0.51831", "torch": "2.8.0", "aiter": "0.1.9", "aiter_commit": "c16d44b9",
      "hipblaslt": "1.0.0", "triton": "3.4.0", "image": "rocm/sgl-dev:x", "sglang": "0.5.23",
      "host": "mi355x-03", "tilelang": "", "gemm_configs": {"AITER_CONFIG_GEMM_A8W8": "ab" * 32,
                                                            "HIPBLASLT_TUNING_FILE": "missing"},
      "gpu_clocks": CLOCKS}


def test_components_are_the_stack_only_with_short_hashes_and_clock_caps() -> None:
    assert stack.components(FP) == {
        "rocm": "7.0.51831", "torch": "2.8.0", "aiter": "0.1.9", "aiter_commit": "c16d44b9",
        "hipblaslt": "1.0.0", "triton": "3.4.0", "image": "rocm/sgl-dev:x",
        "gemm_config:AITER_CONFIG_GEMM_A8W8": "sha256:" + "ab" * 6,
        "gemm_config:HIPBLASLT_TUNING_FILE": "missing",
        "gpu_clock_limits": "sclk max 2400 MHz, mclk max 1600 MHz"}
    assert stack.components(None) == {} and stack.components({"gpu_clocks": "x"}) == {}


def test_clocks_at_start_wander_but_only_a_changed_cap_is_a_change() -> None:
    warmer = {**FP, "gpu_clocks": {**CLOCKS, "sclk_mhz": [1800, 2100]}}
    assert stack.changed(stack.components(FP), stack.components(warmer)) == []
    capped = {**FP, "gpu_clocks": {**CLOCKS, "sclk_max_mhz": [1900, 2400]}}
    assert stack.changed(stack.components(FP), stack.components(capped)) == [
        ("gpu_clock_limits", "sclk max 2400 MHz, mclk max 1600 MHz",
         "sclk max 1900/2400 MHz, mclk max 1600 MHz")]
    assert stack.clock_limits({"tool": "rocm-smi", "sclk_mhz": [132]}) is None


def test_changed_names_only_what_both_sides_recorded() -> None:
    older = {"aiter": "0.1.9", "torch": "2.8.0"}
    newer = {"aiter": "0.1.10", "torch": "2.8.0", "triton": "3.4.0"}
    assert stack.changed(older, newer) == [("aiter", "0.1.9", "0.1.10")]
    assert stack.changed(newer, older) == [("aiter", "0.1.10", "0.1.9")]


def test_labels() -> None:
    assert stack.label("aiter_commit") == "aiter commit"
    assert stack.label("gemm_config:AITER_CONFIG_GEMM_A8W8") == "gemm config AITER_CONFIG_GEMM_A8W8"
    assert stack.label("gpu_clock_limits") == "gpu clock limits"
    assert stack.label("sglang_commit") == "sglang commit" and stack.label("new") == "new"
