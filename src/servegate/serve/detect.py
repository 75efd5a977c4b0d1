"""Runner detection (which registered runner class this machine is) and the provenance
fingerprint (with the hardware identity, servegate.core.hardware). torch is asked first, as
sglang decides (``gcnArchName`` on ROCm); ``rocminfo`` / ``nvidia-smi`` only without torch;
``--runner`` (or ``SERVEGATE_RUNNER``) overrides."""

from __future__ import annotations

import importlib
import os
import platform
import re
import shutil
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from servegate.core import hardware, runner_classes
from servegate.core.errors import ServegateError
from servegate.core.results import Fingerprint
from servegate.serve import kernel_stack

CPUINFO, MEMINFO = Path("/proc/cpuinfo"), Path("/proc/meminfo")
# fingerprint key -> its /proc/cpuinfo names (x86, then Arm)
CPU_FIELDS = {"cpu_vendor": ("vendor_id", "CPU implementer"),
              "cpu_family": ("cpu family", "CPU architecture"),
              "cpu_model_number": ("model", "CPU part"),
              "cpu_stepping": ("stepping", "CPU revision"), "cpu_isa": ("flags", "Features")}
IMAGE_ENV_VARS = ("SERVEGATE_IMAGE", "SGLANG_IMAGE", "DOCKER_IMAGE", "CONTAINER_IMAGE")
# nvidia-smi names no architecture: any NVIDIA device classifies as "cuda" (arch_of lowercases)
NVIDIA_SMI_ARCH = "cuda"  # pragma: no mutate (any case of cuda classifies alike)


class RunnerError(ServegateError, ValueError):
    """An unknown ``--runner`` value."""


@dataclass(frozen=True)
class Detected:
    runner_class: str
    how: str                        # "override", "torch", "rocminfo", "nvidia-smi", "none"
    gpu_name: str = ""
    gpu_arch: str = ""
    gpu_count: int = 0


def _import_torch() -> ModuleType | None:
    try:
        return importlib.import_module("torch")
    except ImportError:
        return None


def _from_torch(torch: ModuleType) -> Detected | None:
    cuda = getattr(torch, "cuda", None)
    if cuda is None or not cuda.is_available() or cuda.device_count() < 1:
        return None
    props = cuda.get_device_properties(0)
    count = int(cuda.device_count())
    name = str(getattr(props, "name", ""))
    if getattr(torch.version, "hip", None):
        arch = str(getattr(props, "gcnArchName", ""))
        return Detected(runner_classes.classify(arch, name).name, "torch", name, arch.partition(":")[0],
                        count)
    if getattr(torch.version, "cuda", None):
        major, minor = getattr(props, "major", None), getattr(props, "minor", None)
        arch = f"sm_{major}{minor}" if major is not None else "cuda"
        return Detected(runner_classes.classify(arch, name).name, "torch", name, arch, count)
    return None


def _run(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        return ""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout if proc.returncode == 0 else ""


def _from_tools() -> Detected | None:
    info = _run(["rocminfo"])
    archs = re.findall(r"^\s*Name:\s*(gfx9\w+)", info, flags=re.M)
    if archs:
        names = re.findall(r"^\s*Marketing Name:\s*(.+?)\s*$", info, flags=re.M)
        name = next((n for n in names if "MI" in n), "")
        return Detected(runner_classes.classify(archs[0], name).name, "rocminfo", name, archs[0],
                        len(archs))
    names = [line.strip() for line in _run(
        ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"]).splitlines() if line.strip()]
    if names:
        return Detected(runner_classes.classify(NVIDIA_SMI_ARCH, names[0]).name, "nvidia-smi", names[0], "",
                        len(names))
    return None


def detect(override: str | None = None, torch_module: ModuleType | None = None) -> Detected:
    """The runner class: explicit override, else torch's device 0, else vendor tools, else cpu."""
    choice = override or os.environ.get("SERVEGATE_RUNNER") or None
    if choice:
        if choice not in runner_classes.REGISTRY:
            raise RunnerError(f"--runner {choice!r}: expected one of "
                              f"{', '.join(runner_classes.names())}")
        return Detected(choice, "override")
    torch = torch_module if torch_module is not None else _import_torch()
    found = _from_torch(torch) if torch is not None else _from_tools()
    return found or Detected("cpu", "torch" if torch is not None else "none")


def _driver() -> str:
    out = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    if out.strip():
        return out.splitlines()[0].strip()
    amdgpu = Path("/sys/module/amdgpu/version")
    if amdgpu.is_file():
        return f"amdgpu {amdgpu.read_text().strip()}"
    out = _run(["amd-smi", "version"])
    return out.strip().splitlines()[0] if out.strip() else ""


def _sglang_commit() -> str:
    """The git commit of the installed sglang, when pip recorded it (VCS install) or env has it."""
    return os.environ.get("SGLANG_COMMIT") or kernel_stack.vcs_commit(
        kernel_stack.installed_direct_url("sglang"))


_version = kernel_stack.installed_version


def _cpu_model(cpuinfo: Path = CPUINFO) -> str:
    """The CPU's marketing name (Linux ``model name``), else what ``platform`` says, else ""."""
    text = kernel_stack.read_text(cpuinfo)
    found = re.search(r"^(?:model name|Hardware|cpu model)\s*:\s*(.+?)\s*$", text, flags=re.M)
    return found.group(1) if found else platform.processor()


def cpu_hardware(cpuinfo: str, meminfo: str) -> dict[str, Any]:
    """The first processor's identity (:data:`CPU_FIELDS`), the ISA features of
    :data:`servegate.core.hardware.ISA_FEATURES` it lists, and MemTotal in GiB."""
    first = dict(re.findall(r"^([^\t:\n]+?)\s*:[ \t]*(.*?)\s*$", cpuinfo.split("\n\n")[0],
                            flags=re.M))
    out: dict[str, Any] = {key: value for key, names in CPU_FIELDS.items()
                           if (value := next((first[n] for n in names if first.get(n)), None))}
    if "cpu_isa" in out:
        out["cpu_isa"] = [flag for flag in hardware.ISA_FEATURES if flag in out["cpu_isa"].split()]
    memory = re.search(r"^MemTotal:\s*(\d+)\s*kB", meminfo, flags=re.M)
    if memory:
        out["memory_gib"] = round(int(memory.group(1)) / 2**20)
    return out


def _given(**fields: Any) -> dict[str, Any]:
    """The fields that have a value: a fingerprint records what it found, nothing empty."""
    return {key: value for key, value in fields.items() if value}


def fingerprint(detected: Detected, model: str, model_revision: str | None = None,
                torch_module: ModuleType | None = None,
                server_env: Mapping[str, str] | None = None,
                probe: kernel_stack.Probe | None = None) -> Fingerprint:
    """Provenance for every result. Contains no environment secrets (only named, known fields).

    ``server_env`` is what the profile sets for the server over this environment (a tuned GEMM
    config it names is the one in use); ``probe`` reads the kernel stack (tests: recorded
    outputs)."""
    torch: Any = torch_module if torch_module is not None else _import_torch()
    fp: Fingerprint = {
        "runner_class": detected.runner_class,
        "gpu_count": detected.gpu_count,
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "model": model,
    }
    # the host CPU: it runs the scheduler and the client on every runner, and the model on cpu
    fp.update(_given(cpu_model=_cpu_model(), cpu_count=os.cpu_count()))  # type: ignore[typeddict-item]
    fp.update(cpu_hardware(kernel_stack.read_text(CPUINFO),  # type: ignore[typeddict-item]
                           kernel_stack.read_text(MEMINFO)))
    fp.update(_given(model_revision=model_revision, gpu_name=detected.gpu_name,  # type: ignore[typeddict-item]
                     gpu_arch=detected.gpu_arch))
    if torch is not None:
        version = getattr(torch, "version", None)
        fp["torch"] = str(getattr(torch, "__version__", ""))
        fp.update(_given(rocm=str(getattr(version, "hip", None) or ""),  # type: ignore[typeddict-item]
                         cuda=str(getattr(version, "cuda", None) or "")))
    cls = runner_classes.REGISTRY.get(detected.runner_class)
    on_cpu = cls is not None and (cls.arch == "cpu" or cls.emulated)
    if not on_cpu:
        fp.update(_given(driver=_driver()))  # type: ignore[typeddict-item]
    else:
        fp["gpu_name"] = fp.get("gpu_name") or f"none (CPU: {platform.processor() or 'cpu'}, " \
                                                f"{os.cpu_count()} cores)"
    if cls is not None and cls.emulated:
        # Declared here; each server's read-back is the point's device_double (measure/exactfill).
        fp["device_double"] = f"{cls.arch} emulated at sglang's device check (servegate hook, " \
                              f"SERVEGATE_EMULATE_ARCH={cls.device_arch})"
    image = next((os.environ[var] for var in IMAGE_ENV_VARS if os.environ.get(var)), None)
    fp.update(_given(sglang=_version("sglang"), sglang_commit=_sglang_commit(),  # type: ignore[typeddict-item]
                     image=image))
    if probe is None:
        probe = kernel_stack.Probe(run=_run, env={**os.environ, **(server_env or {})})
    stack = kernel_stack.collect(probe, image=fp.get("image"), on_gpu=not on_cpu)
    fp.update(stack)  # type: ignore[typeddict-item]
    fp["hardware"] = hardware.digest(fp)
    return fp
