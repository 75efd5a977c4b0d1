"""servegate.serve.detect: runner detection, its fallbacks and the fingerprint's fields (issue 15).
Vendor tools and torch are faked; their outputs are written out by hand."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from fake_torch import FakeTorch
from hung_tool import timing_out_subprocess

from servegate.core import hardware
from servegate.serve import detect


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("SERVEGATE_RUNNER", "SGLANG_COMMIT", *detect.IMAGE_ENV_VARS):
        monkeypatch.delenv(var, raising=False)


@pytest.mark.parametrize("fake", [
    FakeTorch(has_cuda=False),                    # a torch without a cuda module
    FakeTorch(count=2, available=False),          # devices but not available
    FakeTorch(count=0, available=True),           # available but no device
    FakeTorch(count=1, hip=None, cuda=None),      # neither a ROCm nor a CUDA build
    FakeTorch(cuda="12.8", count=0, available=True),   # a CUDA build, no device
    FakeTorch(hip="6.4", arch="gfx950", count=4, available=False),   # devices, unavailable
])
def test_torch_without_a_usable_gpu_is_a_cpu(fake: FakeTorch) -> None:
    assert detect.detect(torch_module=fake) == detect.Detected("cpu", "torch")


def test_cuda_without_compute_capability_is_cuda_arch() -> None:
    found = detect.detect(torch_module=FakeTorch(cuda="12.8", name="NVIDIA H100 80GB",
                                                 major=None, count=1))
    assert (found.runner_class, found.gpu_arch, found.gpu_name) == ("h100", "cuda",
                                                                    "NVIDIA H100 80GB")
    sm = detect.detect(torch_module=FakeTorch(cuda="12.8", name="NVIDIA B200", major=10,
                                              minor=0, count=8))
    assert (sm.gpu_arch, sm.gpu_count) == ("sm_100", 8)


def test_run_returns_stdout_only_on_success(tmp_path: Path) -> None:
    assert detect._run([sys.executable, "-c", "print('hello')"]) == "hello\n"
    assert detect._run([sys.executable, "-c", "print('x'); raise SystemExit(3)"]) == ""
    assert detect._run(["servegate-no-such-tool-xyz"]) == ""
    not_executable = tmp_path / "tool"
    not_executable.write_text("#!/bin/sh\necho hi\n")
    not_executable.chmod(0o755)
    assert detect._run([str(not_executable)]) == "hi\n"
    not_executable.write_text("not a script")       # exec format error: OSError
    assert detect._run([str(not_executable)]) == ""


def _tools(monkeypatch: pytest.MonkeyPatch, outputs: dict[str, str]) -> list[list[str]]:
    calls: list[list[str]] = []

    def fake_run(argv: list[str]) -> str:
        calls.append(argv)
        return outputs.get(argv[0], "")

    monkeypatch.setattr(detect, "_run", fake_run)
    monkeypatch.setattr(detect, "_import_torch", lambda: None)
    return calls


ROCMINFO = """\
Agent 1
  Name:                    AMD EPYC 9575F 64-Core Processor
  Marketing Name:          AMD EPYC 9575F 64-Core Processor
Agent 2
  Name:                    gfx950
  Marketing Name:          AMD Instinct MI355X
Agent 3
  Name:                    gfx950
  Marketing Name:          AMD Instinct MI355X
"""


def test_rocminfo_skips_the_cpu_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    _tools(monkeypatch, {"rocminfo": ROCMINFO})
    assert detect.detect() == detect.Detected("mi355x", "rocminfo", "AMD Instinct MI355X",
                                              "gfx950", 2)


def test_nvidia_smi_when_rocminfo_has_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _tools(monkeypatch, {"nvidia-smi": "NVIDIA H200\n\nNVIDIA H200\n"})
    assert detect.detect() == detect.Detected("h200", "nvidia-smi", "NVIDIA H200", "", 2)
    assert calls == [["rocminfo"], ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]]


def test_no_torch_and_no_tools_is_a_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    _tools(monkeypatch, {})
    assert detect.detect() == detect.Detected("cpu", "none")


def test_driver_from_nvidia_smi_then_amdgpu_then_amd_smi(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    outputs: dict[str, str] = {"nvidia-smi": "570.86.15\n570.86.15\n",
                               "amd-smi": "AMDSMI Tool: 25.3 | ROCm version: 7.0\nmore\n"}
    calls = _tools(monkeypatch, outputs)
    assert detect._driver() == "570.86.15"
    assert calls[0] == ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
    del outputs["nvidia-smi"]
    version = tmp_path / "version"
    real_path = detect.Path
    monkeypatch.setattr(detect, "Path", lambda p: version if p == "/sys/module/amdgpu/version"
                        else real_path(p))
    version.write_text("6.12.12\n")
    assert detect._driver() == "amdgpu 6.12.12"
    version.unlink()
    assert detect._driver() == "AMDSMI Tool: 25.3 | ROCm version: 7.0"
    assert calls[-1] == ["amd-smi", "version"]
    del outputs["amd-smi"]
    assert detect._driver() == ""


class _Dist:
    def __init__(self, direct_url: str | None) -> None:
        self.direct_url = direct_url

    def read_text(self, name: str) -> str | None:
        return self.direct_url if name == "direct_url.json" else None


@pytest.mark.parametrize(("direct_url", "commit"), [
    (json.dumps({"url": "https://x", "vcs_info": {"vcs": "git", "commit_id": "0123abc"}}),
     "0123abc"),
    (json.dumps({"url": "file:///x", "dir_info": {}}), ""),
    ("{not json", ""),
    (None, ""),
])
def test_sglang_commit_from_pip_metadata(monkeypatch: pytest.MonkeyPatch,
                                         direct_url: str | None, commit: str) -> None:
    monkeypatch.setattr(importlib.metadata, "distribution",
                        lambda name: _Dist(direct_url) if name == "sglang" else None)
    assert detect._sglang_commit() == commit
    monkeypatch.setenv("SGLANG_COMMIT", "feedbeef")
    assert detect._sglang_commit() == "feedbeef"


def test_sglang_commit_without_sglang(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest_version = importlib.metadata.version("pytest")
    assert detect._version("pytest") == pytest_version
    assert detect._version("servegate-no-such-package") == ""

    def missing(name: str) -> Any:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    assert detect._sglang_commit() == ""


def _fp(monkeypatch: pytest.MonkeyPatch, detected: detect.Detected, torch: Any = None,
        **kw: Any) -> dict[str, Any]:
    driver_calls: list[int] = []
    monkeypatch.setattr(detect, "_driver", lambda: driver_calls.append(1) or "drv 1")
    monkeypatch.setattr(detect, "_import_torch", lambda: None)
    fp = dict(detect.fingerprint(detected, "m", torch_module=torch, **kw))
    fp["_driver_calls"] = len(driver_calls)
    return fp


def test_cpu_fingerprint_names_the_cpu_and_asks_no_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    fp = _fp(monkeypatch, detect.Detected("cpu", "none"))
    assert fp["gpu_name"] == (f"none (CPU: {platform.processor() or 'cpu'}, "
                              f"{os.cpu_count()} cores)")
    assert fp["_driver_calls"] == 0 and "driver" not in fp
    assert "device_double" not in fp and "model_revision" not in fp
    assert "gpu_arch" not in fp and "torch" not in fp
    assert fp["runner_class"] == "cpu" and fp["gpu_count"] == 0 and fp["model"] == "m"


def test_emulated_fingerprint_declares_the_device_double(monkeypatch: pytest.MonkeyPatch) -> None:
    fp = _fp(monkeypatch, detect.Detected("cpu-gfx95", "override"))
    assert fp["device_double"] == ("gfx95 emulated at sglang's device check (servegate hook, "
                                   "SERVEGATE_EMULATE_ARCH=gfx950:sramecc+:xnack-)")
    assert fp["gpu_name"].startswith("none (CPU: ") and fp["_driver_calls"] == 0


def test_gpu_fingerprint_records_driver_cuda_and_the_first_image(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SGLANG_IMAGE", "lmsysorg/sglang:v0.5.23")
    monkeypatch.setenv("DOCKER_IMAGE", "other:1")
    monkeypatch.setenv("SGLANG_COMMIT", "c0ffee")
    monkeypatch.setattr(detect, "_version", lambda p: "0.5.23" if p == "sglang" else "")
    torch = FakeTorch(cuda="12.8")
    fp = _fp(monkeypatch, detect.Detected("h200", "torch", "NVIDIA H200", "sm_90", 4), torch)
    assert fp["driver"] == "drv 1" and fp["_driver_calls"] == 1
    assert fp["cuda"] == "12.8" and "rocm" not in fp and fp["torch"] == "2.14.1+fake"
    assert fp["image"] == "lmsysorg/sglang:v0.5.23"
    assert (fp["sglang"], fp["sglang_commit"]) == ("0.5.23", "c0ffee")
    assert (fp["gpu_name"], fp["gpu_arch"], fp["gpu_count"]) == ("NVIDIA H200", "sm_90", 4)


def test_unregistered_class_fingerprint_asks_the_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(detect, "_version", lambda p: "")
    fp = _fp(monkeypatch, detect.Detected("mi999x", "override"))
    assert fp["_driver_calls"] == 1 and "gpu_name" not in fp
    assert "sglang" not in fp and "sglang_commit" not in fp and "image" not in fp


class _BareTorch(types.ModuleType):
    """A torch whose device properties and version namespace lack optional attributes."""

    def __init__(self, version: types.SimpleNamespace, props: object, count: int = 2) -> None:
        super().__init__("torch")
        self.version = version
        self.asked: list[int] = []

        def properties(index: int) -> object:
            self.asked.append(index)
            return props

        self.cuda = types.SimpleNamespace(is_available=lambda: True,
                                          device_count=lambda: count,
                                          get_device_properties=properties)


def test_device_zero_decides_and_missing_names_are_empty() -> None:
    torch = _BareTorch(types.SimpleNamespace(hip="6.4"),
                       types.SimpleNamespace(gcnArchName="gfx950:sramecc+:xnack-"))
    found = detect.detect(torch_module=torch)
    assert found == detect.Detected("mi355x", "torch", "", "gfx950", 2)
    assert torch.asked == [0]


def test_rocm_device_without_an_architecture_is_named() -> None:
    torch = _BareTorch(types.SimpleNamespace(hip="6.4"),
                       types.SimpleNamespace(name="AMD Instinct MI300X"))
    with pytest.raises(detect.runner_classes.UnknownRunner, match="GPU architecture ''"):
        detect.detect(torch_module=torch)


def test_cuda_build_without_hip_attribute_or_capability() -> None:
    torch = _BareTorch(types.SimpleNamespace(cuda="12.8"),
                       types.SimpleNamespace(name="NVIDIA H100"))
    assert detect.detect(torch_module=torch) == detect.Detected("h100", "torch", "NVIDIA H100",
                                                                "cuda", 2)
    no_build = _BareTorch(types.SimpleNamespace(), types.SimpleNamespace(name="x"))
    assert detect.detect(torch_module=no_build) == detect.Detected("cpu", "torch")


def test_override_is_recorded_as_such() -> None:
    assert detect.detect("mi300x", torch_module=FakeTorch()) == detect.Detected("mi300x",
                                                                                "override")


def test_first_device_of_the_vendor_tools_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    mixed = ("  Name:   gfx942\n  Marketing Name:  AMD Instinct MI300X\n"
             "  Name:   gfx950\n  Marketing Name:  AMD Instinct MI355X\n")
    _tools(monkeypatch, {"rocminfo": mixed})
    assert detect.detect() == detect.Detected("mi300x", "rocminfo", "AMD Instinct MI300X",
                                              "gfx942", 2)
    _tools(monkeypatch, {"rocminfo": "  Name:   gfx950\n  Marketing Name:  gfx950 device\n"})
    assert detect.detect() == detect.Detected("mi355x", "rocminfo", "", "gfx950", 1)
    _tools(monkeypatch, {"nvidia-smi": "NVIDIA H100\nNVIDIA H200\n"})
    assert detect.detect() == detect.Detected("h100", "nvidia-smi", "NVIDIA H100", "", 2)


def test_driver_is_the_first_line(monkeypatch: pytest.MonkeyPatch) -> None:
    _tools(monkeypatch, {"nvidia-smi": "570.86.15\n550.00.01\n"})
    assert detect._driver() == "570.86.15"


def test_a_hanging_vendor_tool_is_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tool that never answers is abandoned after a bounded time (detection goes on)."""
    def hanging(argv: list[str], **kwargs: Any) -> Any:
        limit = kwargs.get("timeout")
        if limit is None or limit > 120:
            raise AssertionError("no bound: detection would hang with the tool")
        raise detect.subprocess.TimeoutExpired(argv, limit)

    monkeypatch.setattr(detect.shutil, "which", lambda name: "/usr/bin/" + name)
    monkeypatch.setattr(detect.subprocess, "run", hanging)
    assert detect._run(["rocminfo"]) == ""


def test_fingerprint_imports_torch_itself_and_tolerates_a_bare_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    bare = _BareTorch(types.SimpleNamespace(), types.SimpleNamespace())
    monkeypatch.setattr(detect, "_import_torch", lambda: bare)
    monkeypatch.setattr(detect, "_driver", lambda: "")
    fp = detect.fingerprint(detect.Detected("cpu", "none"), "m")
    assert fp["torch"] == "" and "rocm" not in fp and "cuda" not in fp
    no_version = types.ModuleType("torch")
    fp = detect.fingerprint(detect.Detected("cpu", "none"), "m", torch_module=no_version)
    assert fp["torch"] == ""


def test_cpu_fingerprint_keeps_a_detected_device_name(monkeypatch: pytest.MonkeyPatch) -> None:
    fp = _fp(monkeypatch, detect.Detected("cpu", "override", gpu_name="Intel Xeon (host)"))
    assert fp["gpu_name"] == "Intel Xeon (host)"


@pytest.mark.parametrize(("arch", "name", "expected"), [
    ("gfx950:sramecc+:xnack-", "AMD Instinct MI355X", "mi355x"),
    ("gfx950", "", "mi355x"),                       # the only registered gfx95 model
    ("gfx942:sramecc+:xnack-", "AMD Instinct MI300X", "mi300x"),
    ("gfx942:sramecc+:xnack-", "AMD Instinct MI325X", "mi325x"),
])
def test_rocm_models(arch: str, name: str, expected: str) -> None:
    fake = FakeTorch(hip="6.4.1", arch=arch, name=name, count=8)
    found = detect.detect(torch_module=fake)
    assert found.runner_class == expected
    assert found.gpu_arch == arch.split(":")[0]
    assert found.gpu_count == 8 and found.how == "torch"


def test_nvidia_and_cpu() -> None:
    h200 = detect.detect(torch_module=FakeTorch(cuda="12.8", name="NVIDIA H200", count=4))
    assert (h200.runner_class, h200.gpu_arch, h200.gpu_count) == ("h200", "sm_90", 4)
    b200 = detect.detect(torch_module=FakeTorch(cuda="12.8", name="NVIDIA B200", major=10,
                                                  count=8))
    assert b200.runner_class == "b200"
    assert detect.detect(torch_module=FakeTorch()).runner_class == "cpu"


def test_detect_imports_torch_when_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """Detection also works through ``import torch`` (a fake module in sys.modules)."""
    monkeypatch.setitem(__import__("sys").modules, "torch",
                        FakeTorch(hip="6.3", arch="gfx942:sramecc+:xnack-",
                                  name="AMD Instinct MI325X", count=8))
    assert detect.detect().runner_class == "mi325x"


def test_override_wins_and_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeTorch(hip="6.4", arch="gfx950", count=8)
    assert detect.detect("mi300x", torch_module=fake).runner_class == "mi300x"
    monkeypatch.setenv("SERVEGATE_RUNNER", "cpu")
    assert detect.detect(torch_module=fake).runner_class == "cpu"
    with pytest.raises(detect.RunnerError, match="--runner 'gfx95': expected one of cpu, mi355x"):
        detect.detect("gfx95", torch_module=fake)


def test_tools_used_only_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    outputs = {"rocminfo": "  Name:                    gfx942\n  Marketing Name:  AMD Instinct "
                           "MI300X\n  Name:  gfx942\n  Marketing Name:  AMD Instinct MI300X\n"}
    monkeypatch.setattr(detect, "_run", lambda argv: outputs.get(argv[0], ""))
    monkeypatch.setattr(detect, "_import_torch", lambda: None)
    found = detect.detect()
    assert (found.runner_class, found.how, found.gpu_count) == ("mi300x", "rocminfo", 2)


def test_fingerprint_fields_and_no_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_supersecretvalue123")
    monkeypatch.setenv("SERVEGATE_IMAGE", "rocm/sgl-dev:v0.5.23-rocm700-mi35x")
    monkeypatch.setattr(detect, "_driver", lambda: "amdgpu 6.12.12")
    fake = FakeTorch(hip="7.0.0", arch="gfx950:sramecc+:xnack-", name="AMD Instinct MI355X",
                     count=8)
    detected = detect.detect(torch_module=fake)
    fp = detect.fingerprint(detected, "amd/GLM-5.2-MXFP4", "abc123", torch_module=fake)
    assert fp["runner_class"] == "mi355x"
    assert (fp["gpu_name"], fp["gpu_count"], fp["gpu_arch"]) == ("AMD Instinct MI355X", 8, "gfx950")
    assert fp["rocm"] == "7.0.0" and "cuda" not in fp
    assert fp["torch"] == "2.14.1+fake" and fp["driver"] == "amdgpu 6.12.12"
    assert (fp["model"], fp["model_revision"]) == ("amd/GLM-5.2-MXFP4", "abc123")
    assert fp["image"] == "rocm/sgl-dev:v0.5.23-rocm700-mi35x"
    assert fp["host"] and fp["python"]
    assert "hf_supersecretvalue123" not in json.dumps(fp)


# The fingerprint's CPU fields (servegate.serve.detect): what the verdict's reference line compares.


def test_cpu_model_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\n"
                    "model name\t: AMD EPYC 7763 64-Core Processor  \nprocessor\t: 1\n"
                    "model name\t: AMD EPYC 7763 64-Core Processor\n")
    assert detect._cpu_model(info) == "AMD EPYC 7763 64-Core Processor"
    info.write_text("processor\t: 0\nHardware\t: BCM2835\n")             # ARM boards
    assert detect._cpu_model(info) == "BCM2835"
    info.write_text("cpu model\t\t: Loongson-3A5000\n")
    assert detect._cpu_model(info) == "Loongson-3A5000"


def test_cpu_model_survives_bytes_that_are_not_utf8(tmp_path: Path) -> None:
    """/proc/cpuinfo is bytes from firmware: a stray byte is replaced, never a crash."""
    info = tmp_path / "cpuinfo"
    info.write_bytes(b"processor\t: 0\nmodel name\t: Vendor \xff CPU 9\n")
    assert detect._cpu_model(info) == "Vendor \ufffd CPU 9"


def test_a_hung_device_tool_costs_detection_at_most_thirty_seconds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setattr(detect, "subprocess", timing_out_subprocess(seen))
    assert detect._run([sys.executable, "-c", "pass"]) == ""
    assert seen == {"capture_output": True, "text": True, "timeout": 30}


def test_cpu_model_falls_back_to_platform(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "processor", lambda: "arm")
    assert detect._cpu_model(tmp_path / "missing") == "arm"
    nameless = tmp_path / "cpuinfo"
    nameless.write_text("processor\t: 0\nflags\t: fpu\nmodel\t: 1\n")
    assert detect._cpu_model(nameless) == "arm"
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert detect._cpu_model(nameless) == ""


def test_fingerprint_records_the_cpu_model_and_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(detect, "_cpu_model", lambda: "Intel Xeon Gold 6338")
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    fp = detect.fingerprint(detect.Detected("cpu", "override"), "m", torch_module=None)
    assert (fp["cpu_model"], fp["cpu_count"]) == ("Intel Xeon Gold 6338", 64)  # type: ignore
    monkeypatch.setattr(detect, "_cpu_model", lambda: "")
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    fp = detect.fingerprint(detect.Detected("cpu", "override"), "m", torch_module=None)
    assert "cpu_model" not in fp and "cpu_count" not in fp


def test_the_real_machine_is_named() -> None:
    fp = detect.fingerprint(detect.Detected("cpu", "override"), "m", torch_module=None)
    assert fp.get("cpu_count") == os.cpu_count()
    assert fp.get("cpu_model") == (detect._cpu_model() or None)


# Runner class ``cpu-gfx95``: a CPU server whose exact-fill device check sees gfx95.
#
# The one double is servegate's, at sglang's device check (``SERVEGATE_EMULATE_GFX95``, in the
# exact-fill hook); these tests pin what surrounds it: chosen only by name, the profile section
# that sets it, an inherited value never reaching another class's server, the read-back that ties
# every gate report to the double (and forbids the double on real devices), and bench judging the
# suite's in-run claims without a stored baseline. The real-server path is
# ``tests/test_bench_e2e.py::test_cpu_gfx95_suite_end_to_end``; the hook in a real sglang process
# is in ``tests/real_sglang/scheduler/test_hooks.py``.


def test_detection_never_picks_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVEGATE_RUNNER", raising=False)
    monkeypatch.setattr(detect, "_import_torch", lambda: None)
    monkeypatch.setattr(detect, "_run", lambda argv: "")
    assert detect.detect().runner_class == "cpu"
    assert detect.detect("cpu-gfx95").runner_class == "cpu-gfx95"


def test_fingerprint_names_the_double(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(detect, "_driver", lambda: pytest.fail("no GPU driver on a CPU class"))
    fp = detect.fingerprint(detect.Detected("cpu-gfx95", "override"), "m", torch_module=None)
    assert "gfx95 emulated" in fp["device_double"] and fp["gpu_name"].startswith("none (CPU")
    real = detect.fingerprint(detect.Detected("cpu", "override"), "m", torch_module=None)
    assert "device_double" not in real


# The hardware identity (issue 39): what kernels dispatch on and what sets their speed.

EPYC_CPUINFO = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
                "model name\t: AMD EPYC\nstepping\t: 1\nmicrocode\t: 0x1000065\nflags\t\t: fpu "
                "sse4_2 avx f16c avx2 avx512f avx512bw avx512vl avx512_bf16 avx512_vnni fma\n\n"
                "processor\t: 1\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n")


def test_cpu_hardware_reads_the_first_processor_its_isa_and_memory() -> None:
    found = detect.cpu_hardware(EPYC_CPUINFO, "MemTotal:       24683664 kB\nMemFree: 1 kB\n")
    assert found == {"cpu_vendor": "AuthenticAMD", "cpu_family": "25",
                     "cpu_model_number": "17", "cpu_stepping": "1", "memory_gib": 24,
                     # the registry's features, in its order; fpu / sse4_2 / avx are not in it
                     "cpu_isa": ["avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                                 "avx512_vnni", "avx512_bf16"]}
    graviton = ("processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd sve i8mm bf16 "
                "sve2\nCPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x1\n"
                "CPU part\t: 0xd40\nCPU revision\t: 1\n")
    assert detect.cpu_hardware(graviton, "") == {
        "cpu_vendor": "0x41", "cpu_family": "8", "cpu_model_number": "0xd40",
        "cpu_stepping": "1", "cpu_isa": ["asimd", "sve", "sve2", "i8mm", "bf16"]}
    assert detect.cpu_hardware("", "") == {}


def test_the_hardware_digest_is_the_machine_not_its_name_or_idle_clocks(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    info, mem = tmp_path / "cpuinfo", tmp_path / "meminfo"
    info.write_text(EPYC_CPUINFO)
    mem.write_text("MemTotal: 24683664 kB\n")
    monkeypatch.setattr(detect, "CPUINFO", info)
    monkeypatch.setattr(detect, "MEMINFO", mem)
    monkeypatch.setattr(detect, "_cpu_model", lambda: "AMD EPYC")
    fp = detect.fingerprint(detect.Detected("cpu", "override"), "m", torch_module=None)
    assert (fp["cpu_family"], fp["cpu_model_number"], fp["memory_gib"]) == ("25", "17", 24)
    assert fp["hardware"] == hardware.digest(fp) and len(fp["hardware"]) == 12
    renamed = {**fp, "host": "another-node", "sglang": "0.6",
               "gpu_clocks": {"sclk_mhz": [900], "sclk_max_mhz": [2400]}}
    slower = {**renamed, "gpu_clocks": {"sclk_mhz": [900], "sclk_max_mhz": [2100]}}
    assert hardware.digest(renamed) == hardware.digest({**fp, "gpu_clocks": {
        "sclk_mhz": [132], "sclk_max_mhz": [2400]}})        # clocks at start: not hardware
    assert hardware.digest(renamed) != hardware.digest(slower)      # a clock cap is
    info.write_text(EPYC_CPUINFO.replace("avx512_bf16 ", ""))
    other = detect.fingerprint(detect.Detected("cpu", "override"), "m", torch_module=None)
    assert other["hardware"] != fp["hardware"]
    assert hardware.compare(fp, other) == ("other", "other hardware: isa \"avx2 fma f16c "
                                           "avx512f avx512bw avx512vl avx512_vnni avx512_bf16\" "
                                           "-> \"avx2 fma f16c avx512f avx512bw avx512vl "
                                           "avx512_vnni\"")
