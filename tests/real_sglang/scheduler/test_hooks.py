"""The server-side hooks in real interpreters: sitecustomize patches sglang's exact-fill gate
(sglang-marked: imports the real schedule_policy) and the sgl_kernel CPU stand-in's semantics."""

from __future__ import annotations

import sys

import pytest
from hook_runs import plain_python_with_hook, python_with_hook

from servegate.serve.launch import CPU_STANDIN_DIR

PROBE = ("import sglang.srt.managers.schedule_policy as sp; "
         "print('gate', sp._use_exact_chunk_fill())")


@pytest.mark.sglang
def test_forced_hook_patches_real_gate() -> None:
    out = python_with_hook(PROBE, {"SERVEGATE_FORCE_EXACT_FILL": "1",
                                   "SGLANG_EXACT_CHUNK_FILL": "0"})
    assert "gate True" in out.stdout
    assert "servegate-hook: exact chunk fill forced in pid" in out.stderr


@pytest.mark.sglang
def test_report_hook_shows_real_gate_off_on_cpu() -> None:
    out = python_with_hook(PROBE, {"SERVEGATE_REPORT_EXACT_FILL": "1",
                                   "SGLANG_EXACT_CHUNK_FILL": "1"})
    assert "gate False" in out.stdout                  # gfx95-only gate: off on a CPU
    assert "servegate-hook: exact chunk fill gate=False in pid" in out.stderr
    plain = plain_python_with_hook(PROBE, {"SGLANG_EXACT_CHUNK_FILL": "1"})
    assert "servegate-hook" not in plain.stderr


EMULATION_PROBE = (
    "import inspect\n"
    "import sglang.srt.managers.schedule_policy as sp, sglang.srt.utils.common as common\n"
    "gate = sp._use_exact_chunk_fill()\n"
    "real = inspect.unwrap(sp._use_exact_chunk_fill)\n"
    "print('gate', gate)\n"
    "print('gate fn from', real.__code__.co_filename.rsplit('/', 1)[-1])\n"
    "print('policy sees gfx95', sp.is_gfx95_supported())\n"
    "print('elsewhere gfx95', common.is_gfx95_supported(), common.is_gfx942_supported())\n"
    "import torch\n"
    "print('torch hip', torch.version.hip)\n")


@pytest.mark.sglang
@pytest.mark.parametrize(("env", "exact_fill", "gate", "line"), [
    ({"SERVEGATE_EMULATE_GFX95": "1"}, "1", True, "gfx95 emulated (gcnArchName=gfx950:sramecc+:xnack-)"),
    ({"SERVEGATE_EMULATE_GFX95": "1"}, "0", False, "gfx95 emulated (gcnArchName=gfx950:sramecc+:xnack-)"),
    ({"SERVEGATE_EMULATE_ARCH": "gfx950:sramecc+:xnack-"}, "1", True,
     "gfx95 emulated (gcnArchName=gfx950:sramecc+:xnack-)"),
    # released sglang's gate is gfx95-only: an emulated gfx942 or gfx1250 keeps it closed
    ({"SERVEGATE_EMULATE_ARCH": "gfx942:sramecc+:xnack-"}, "1", False,
     "gfx942 emulated (gcnArchName=gfx942:sramecc+:xnack-)"),
    ({"SERVEGATE_EMULATE_ARCH": "gfx1250"}, "1", False, "gfx1250 emulated (gcnArchName=gfx1250)")])
def test_device_double_evaluates_the_real_gate_on_the_emulated_device(
        env: dict[str, str], exact_fill: str, gate: bool, line: str) -> None:
    """The device double (SERVEGATE_EMULATE_ARCH, or the older SERVEGATE_EMULATE_GFX95=1):
    schedule_policy's real _use_exact_chunk_fill, evaluated with torch answering as the emulated
    device; the env var still decides, nothing else in sglang (not even schedule_policy's own
    name for the device check) sees the emulated device, and the double names itself."""
    out = python_with_hook(EMULATION_PROBE, {**env, "SGLANG_EXACT_CHUNK_FILL": exact_fill})
    assert f"gate {gate}" in out.stdout
    assert "gate fn from schedule_policy.py" in out.stdout      # sglang's own gate, untouched
    assert "policy sees gfx95 False" in out.stdout              # the CPU stays a CPU elsewhere
    assert "elsewhere gfx95 False False" in out.stdout
    assert "torch hip None" in out.stdout
    assert f"servegate-hook: device double: {line} in pid" in out.stderr


@pytest.mark.sglang
def test_without_the_device_double_the_real_gate_stays_closed_on_this_cpu() -> None:
    """The emulations' control (one run for all of them): the same probe, exact fill asked for,
    no emulation variable: the CPU is a CPU and the double never names itself."""
    plain = plain_python_with_hook(EMULATION_PROBE, {"SGLANG_EXACT_CHUNK_FILL": "1"})
    assert "gate False" in plain.stdout and "device double" not in plain.stderr


@pytest.mark.sglang
def test_cpu_standin_matches_triton_semantics() -> None:
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(CPU_STANDIN_DIR))
    try:
        import sgl_kernel  # the stand-in
    finally:
        sys.path.remove(str(CPU_STANDIN_DIR))
    assert sgl_kernel.SERVEGATE_CPU_STANDIN
    registered = [n for n in torch._C._dispatch_get_all_op_names() if n.startswith("sgl_kernel::")]
    assert registered == []                 # sglang keeps its forward_native paths
    req_to_token = torch.zeros((4, 16), dtype=torch.int32)
    rows = torch.tensor([2, 0], dtype=torch.int64)
    start = torch.tensor([3, 0], dtype=torch.int64)
    end = torch.tensor([6, 2], dtype=torch.int64)
    out_cache_loc = torch.tensor([100, 101, 102, 200, 201], dtype=torch.int64)
    sgl_kernel.assign_req_to_token_pool_cpu(rows, req_to_token, start, end, out_cache_loc, 16)
    assert req_to_token[2, 3:6].tolist() == [100, 101, 102]
    assert req_to_token[0, 0:2].tolist() == [200, 201]
    assert int(req_to_token.sum()) == 100 + 101 + 102 + 200 + 201

    k = torch.arange(24, dtype=torch.float32).reshape(6, 4)
    v = torch.arange(100, 124, dtype=torch.float32).reshape(6, 4)
    ptrs = torch.tensor([k.data_ptr(), v.data_ptr()], dtype=torch.int64)
    strides = torch.tensor([k.stride(0) * 4, v.stride(0) * 4], dtype=torch.int64)
    k_before, v_before = k.clone(), v.clone()
    sgl_kernel.copy_all_layer_kv_cache_cpu(ptrs, strides, torch.tensor([0, 1]),
                                           torch.tensor([1, 0]))      # in-place swap
    assert torch.equal(k[0], k_before[1]) and torch.equal(k[1], k_before[0])
    assert torch.equal(v[0], v_before[1]) and torch.equal(v[2:], v_before[2:])
    with pytest.raises(NotImplementedError, match="CPU stand-in"):
        sgl_kernel.verify_tree_greedy_cpu()


RUN_PREFILL_BATCH = (
    "import time, types\n"
    "from sglang.srt.managers.scheduler import Scheduler\n"
    "class Mode:\n"
    "    def __init__(self, extend): self.extend = extend\n"
    "    def is_extend(self): return self.extend\n"
    "    def is_decode(self): return not self.extend\n"
    "t = time.monotonic()\n"
    "try:\n"
    "    Scheduler.run_batch(None, types.SimpleNamespace(forward_mode=Mode(True)))\n"
    "except Exception:\n"
    "    pass\n"
    "print('slept', round(time.monotonic() - t, 2))\n")


@pytest.mark.sglang
@pytest.mark.parametrize(("launch_mode", "sleeps"), [("forced", True), ("off", False)])
def test_inject_modes_scope_the_delay_by_launch_mode(launch_mode: str, sleeps: bool) -> None:
    """Without mode control the hook's mode is the launch mode build_launch exports."""
    out = python_with_hook(RUN_PREFILL_BATCH, {"SERVEGATE_INJECT_DELAY_MS": "300",
                                               "SERVEGATE_INJECT_MODES": "forced, on",
                                               "SERVEGATE_MODE": launch_mode})
    assert "servegate-hook: injecting delay prefill=300ms decode=0ms modes=forced,on in pid" \
        in out.stderr
    assert (float(out.stdout.split("slept")[1]) >= 0.3) is sleeps


@pytest.mark.sglang
def test_inject_delay_wraps_real_scheduler() -> None:
    out = python_with_hook(RUN_PREFILL_BATCH, {"SERVEGATE_INJECT_DELAY_MS": "300"})
    assert "servegate-hook: injecting delay prefill=300ms decode=0ms in pid" in out.stderr
    assert float(out.stdout.split("slept")[1]) >= 0.3


# The real UnquantizedLinearMethod on a real torch layer, under torch's profiler: the GEMM ops
# the first and a later linear layer's calls record, each profiled alone, and their time (sglang
# 0.5.23 srt/layers/quantization/unquant.py). Profiled apart, "once per forward, first layer
# only" does not rest on how many GEMMs fit in the delay: on a busy CPU one 256 x 256 GEMM has
# taken the whole 20 ms (CI, stop 36).
LINEAR_PROBE = (
    "import torch, types\n"
    "from sglang.srt.layers.quantization.unquant import UnquantizedLinearMethod\n"
    "layer = types.SimpleNamespace(weight=torch.randn(8, 4), use_intel_amx_backend=False)\n"
    "other = types.SimpleNamespace(weight=torch.randn(8, 4), use_intel_amx_backend=False)\n"
    "UnquantizedLinearMethod().apply(layer, torch.randn(3, 4))   # the first layer: operands made\n"
    "def mm_of(lay):\n"
    "    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:\n"
    "        out = UnquantizedLinearMethod().apply(lay, torch.randn(3, 4))\n"
    "    ops = {e.key: (e.count, e.cpu_time_total) for e in prof.key_averages()}\n"
    "    count, us = ops.get('aten::mm', (0, 0))\n"
    "    return out, count, us / 1000\n"
    "out, count, ms = mm_of(layer)\n"
    "_, later_count, later_ms = mm_of(other)               # a later layer: no delay\n"
    "print('shape', tuple(out.shape))\n"
    "print('first', count, ms, 'later', later_count, later_ms)\n")


@pytest.mark.sglang
@pytest.mark.parametrize(("launch_mode", "injected"), [("forced", True), ("off", False)])
def test_gemm_delay_is_gemm_ops_in_the_real_linear_layer_in_its_modes(
        launch_mode: str, injected: bool) -> None:
    out = python_with_hook(LINEAR_PROBE, {"SERVEGATE_INJECT_GEMM_DELAY_MS": "20",
                                          "SERVEGATE_INJECT_MODES": "forced",
                                          "SERVEGATE_MODE": launch_mode})
    assert ("servegate-hook: injecting 20ms of GEMM per forward (first linear layer) "
            "modes=forced") in out.stderr
    assert "shape (3, 8)" in out.stdout
    fields = out.stdout.split("first ", 1)[1].split()
    count, ms, later_count = int(fields[0]), float(fields[1]), int(fields[3])
    assert later_count == 1, out.stdout            # a later layer: its own GEMM only
    if injected:       # the layer's GEMM, then injected GEMMs for most of the 20 ms (the rest is
        assert count >= 2 and ms >= 12.0, out.stdout            # the loop between them)
    else:
        assert count == 1 and ms < 12.0, out.stdout
