"""Reducing sglang profiler traces to kernel time per forward by family.

The CPU trace is real: ``tests/data/profile/cpu-off.trace.json.gz`` was recorded from the sglang
0.5.23 CPU server (``suites/cpu.toml``, mode off, ``/start_profile`` num_steps 8, CPU activities)
and trimmed to its first EXTEND and first DECODE step (cpu_ops two levels deep). The GPU trace
is a test double, named as such: a GPU cannot run here, so it is built by hand in the shape
torch's profiler writes on a GPU (``kernel`` events tied by ``correlation`` to the runtime
launch inside the step span)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from servegate.attribution.trace import TraceError, load_events, reduce_events, reduce_trace

CPU_TRACE = Path(__file__).resolve().parents[2] / "data" / "profile" / "cpu-off.trace.json.gz"


def _roots_in(events: list[dict], step: dict) -> list[dict]:
    ops = sorted((e for e in events if e.get("cat") == "cpu_op"
                  and step["ts"] <= e["ts"] and e["ts"] + e["dur"] <= step["ts"] + step["dur"]),
                 key=lambda e: (e["ts"], -e["dur"]))
    roots, end = [], -1.0
    for op in ops:
        if op["ts"] >= end:
            roots.append(op)
            end = op["ts"] + op["dur"]
    return roots


def test_the_recorded_cpu_trace_reduces_to_its_two_forwards() -> None:
    reduced = reduce_trace(CPU_TRACE)
    assert reduced.device == "cpu"
    prefill, decode = reduced.forwards
    assert (prefill.stage, prefill.kind, prefill.bs, prefill.tokens) == ("EXTEND", "prefill", 1,
                                                                         256)
    assert (decode.stage, decode.kind, decode.bs, decode.tokens) == ("DECODE", "decode", 2, None)
    for forward in reduced.forwards:
        assert {"gemm", "attention", "norm_elementwise", "other"} == set(forward.us)
        assert sum(forward.us.values()) <= forward.span_us       # op time inside the step
        assert sum(forward.us.values()) > 0.9 * forward.span_us  # and nearly all of it
    # GEMM is the linear layers' (and the logits') torch ops, whole
    events = load_events(CPU_TRACE)
    step = next(e for e in events if e["name"].startswith("step[EXTEND"))
    linear = sum(e["dur"] for e in _roots_in(events, step)
                 if e["name"] in ("aten::linear", "aten::matmul"))
    assert prefill.us["gemm"] == pytest.approx(linear)
    attention = sum(e["dur"] for e in _roots_in(events, step)
                    if e["name"] == "aten::scaled_dot_product_attention")
    assert prefill.us["attention"] >= attention > 0
    # views and allocations are no family: listed by name
    assert {"aten::view", "aten::slice"} <= set(reduced.other_names)
    assert prefill.record()["us"]["gemm"] == round(prefill.us["gemm"], 1)


def _gpu_double() -> list[dict]:
    """A GPU trace double: one EXTEND step launching a hipBLASLt GEMM, an attention kernel, an
    unnamed kernel under aten::linear (GEMM by its launching op) and an all-reduce; a kernel
    launched outside the step does not count, nor does the step's mirror on the device
    timeline (``gpu_user_annotation``)."""
    step = {"ph": "X", "cat": "user_annotation", "name": "step[EXTEND bs=4 toks=16384]",
            "pid": 1, "tid": 7, "ts": 1000.0, "dur": 500.0}
    ops = [{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 7,
            "ts": 1100.0, "dur": 50.0}]
    launches, kernels = [], []
    for i, (name, ts, dur) in enumerate([
            ("Cijk_Alik_Bljk_BBS_BH_MT256x256x64", 1010.0, 300.0),
            ("fmha_fwd_hd128_bf16", 1050.0, 120.0),
            ("kernel_without_a_rule", 1110.0, 40.0),
            ("cross_device_reduce_1stage", 1200.0, 30.0),
            ("Cijk_outside", 2000.0, 999.0)]):
        launches.append({"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 1,
                         "tid": 7, "ts": ts, "dur": 2.0, "args": {"correlation": i}})
        kernels.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 3,
                        "ts": ts + 100, "dur": dur, "args": {"correlation": i}})
    mirror = {**step, "cat": "gpu_user_annotation", "pid": 0, "tid": 3, "ts": 1100.0}
    unlinked = {"ph": "X", "cat": "kernel", "name": "graph_replayed_kernel", "pid": 0,
                "tid": 3, "ts": 1400.0, "dur": 25.0, "args": {"correlation": 999}}
    return [step, mirror, *ops, *launches, *kernels, unlinked]


def test_a_gpu_trace_counts_the_kernels_launched_inside_each_step() -> None:
    reduced = reduce_events(_gpu_double())
    assert reduced.device == "gpu"
    (forward,) = reduced.forwards
    assert forward.tokens == 16384
    assert forward.us == {"gemm": 340.0, "attention": 120.0, "communication": 30.0}
    assert reduced.other_names == {}
    assert reduced.unlinked_us == 25.0          # a kernel no launch names: reported apart


def test_traces_without_steps_or_json_are_errors(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no sglang step spans"):
        reduce_events([{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 1}])
    bad = tmp_path / "bad.trace.json.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(TraceError, match="not a readable Chrome trace"):
        load_events(bad)
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"traceEvents": {}}))
    with pytest.raises(TraceError, match="no traceEvents list"):
        load_events(flat)
    listed = tmp_path / "listed.json.gz"
    with gzip.open(listed, "wt") as handle:
        json.dump([{"ph": "X", "name": "step[DECODE bs=1]", "ts": 0, "dur": 5}], handle)
    assert reduce_trace(listed).forwards[0].us == {}
