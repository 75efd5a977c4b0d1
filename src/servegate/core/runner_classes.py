"""The one registry of runner classes: a GPU *model* (what baselines and history are keyed by) with
its architecture, which picks the model-profile section and the device sglang's exact-fill gate
sees (docs/ci.md, Runner classes and labels; the emulated ``cpu-gfx95``: docs/serve.md). Adding a
class or an architecture: docs/architecture.md, Where a change goes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from servegate.core.errors import ServegateError

# Architecture -> the device string its devices report (``gcnArchName`` on ROCm, as
# torch.cuda.get_device_properties(0) gives it; ``sm_XY`` on CUDA; ``cpu``: no GPU): what the
# device double emulates when a tree's gate is evaluated for a class of the architecture.
DEVICE_ARCHES: dict[str, str] = {
    "cpu": "cpu",
    "gfx95": "gfx950:sramecc+:xnack-",      # MI350X / MI355X (CDNA4)
    "gfx942": "gfx942:sramecc+:xnack-",     # MI300X / MI325X (CDNA3)
    "gfx90a": "gfx90a:sramecc+:xnack-",     # MI210 / MI250X (CDNA2)
    "gfx1250": "gfx1250",                   # the gfx12.5 Instinct generation
    "nvidia": "sm_90",
}
ARCHES: tuple[str, ...] = tuple(DEVICE_ARCHES)


class UnknownRunner(ServegateError, ValueError):
    """A runner class (or GPU) servegate has no registry entry for."""


@dataclass(frozen=True)
class RunnerClass:
    name: str                       # e.g. "mi355x": baselines/<name>/..., run.json runner_class
    arch: str                       # one of ARCHES
    gated: bool                     # released sglang's gate is on here (gfx95 only); the
    #                                 tree under test decides where one is read (module doc)
    gpu_names: tuple[str, ...] = ()  # substrings of the device name that identify the model
    ci_labels: tuple[str, ...] = ()  # GitHub runner labels that provide this class
    image_var: str = ""             # repository variable naming the container image
    description: str = ""
    emulated: bool = False          # arch emulated on a CPU by servegate's device double
    # devices per runner: the smallest of its CI labels (preflight's assumption for a live
    # pair of head and base servers; bench counts the devices it sees)
    gpus: int = 0

    @property
    def device_arch(self) -> str:
        """The device string sglang's gate sees for this class (its architecture's)."""
        return DEVICE_ARCHES[self.arch]

    @property
    def gate_modes(self) -> tuple[str, ...]:
        """The modes a gating cell runs: the real gate off and on, paired in one run."""
        return ("off", "on") if self.arch != "cpu" else ("off", "on", "forced")

    @property
    def experiment_modes(self) -> tuple[str, ...] | None:
        """Where the gate is off, ``forced`` shows what exact fill would do (reported only)."""
        return ("off", "forced") if self.arch != "cpu" and not self.gated else None


# CI labels as upstream sglang's AMD CI uses them (sgl-project/sglang runner table in its AMD
# test docs; .github/workflows/nightly-test-amd.yml): `linux-mi35x-gpu-{1,8}` for MI35x (MI355X)
# and `linux-mi325-{1,2,4,8}gpu-sglang` for the MI30x pool; `linux-mi300-gpu-*` appears only in
# older pr-test-amd.yml revisions. The MI30x pool may hand out an MI300X: detection names the
# model from the device, so a run there is keyed (and judged) as mi300x, never as mi325x.
REGISTRY: dict[str, RunnerClass] = {c.name: c for c in (
    RunnerClass("cpu", "cpu", gated=False, description="no GPU: the CPU tier (real sglang on CPU)"),
    RunnerClass("mi355x", "gfx95", gated=True, gpu_names=("MI355X",),
                ci_labels=("linux-mi35x-gpu-8",), image_var="SERVEGATE_IMAGE_GFX95",
                description="AMD Instinct MI355X (gfx950)", gpus=8),
    RunnerClass("mi300x", "gfx942", gated=False, gpu_names=("MI300X",),
                image_var="SERVEGATE_IMAGE_GFX942",
                description="AMD Instinct MI300X (gfx942)", gpus=8),
    RunnerClass("mi325x", "gfx942", gated=False, gpu_names=("MI325X",),
                ci_labels=("linux-mi325-8gpu-sglang", "linux-mi325-4gpu-sglang"),
                image_var="SERVEGATE_IMAGE_GFX942", description="AMD Instinct MI325X (gfx942)",
                gpus=4),
    RunnerClass("h100", "nvidia", gated=False, gpu_names=("H100",),
                image_var="SERVEGATE_IMAGE_NVIDIA", description="NVIDIA H100 (sm_90)", gpus=8),
    RunnerClass("h200", "nvidia", gated=False, gpu_names=("H200",),
                image_var="SERVEGATE_IMAGE_NVIDIA", description="NVIDIA H200 (sm_90)", gpus=8),
    RunnerClass("b200", "nvidia", gated=False, gpu_names=("B200",),
                image_var="SERVEGATE_IMAGE_NVIDIA", description="NVIDIA B200 (sm_100)", gpus=8),
    RunnerClass("cpu-gfx95", "gfx95", gated=True, emulated=True,
                description="CPU server, gfx95 emulated at sglang's device check (servegate's "
                            "device double; --runner only)"),
)}


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def get(name: str) -> RunnerClass:
    """The registered class ``name`` (an error listing the known ones otherwise)."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownRunner(f"runner class {name!r}: expected one of {', '.join(REGISTRY)} "
                            f"(a new GPU model is one entry in servegate/core/runner_classes.py)") from None


def of_arch(arch: str) -> tuple[RunnerClass, ...]:
    """The real classes of an architecture (emulated ones are only ever chosen by name)."""
    return tuple(c for c in REGISTRY.values() if c.arch == arch and not c.emulated)


def arch_of(device_arch: str) -> str:
    """A device's architecture string (``gfx950:sramecc+:xnack-``, ``sm_90``) -> one of ARCHES;
    an architecture servegate has no entry for is an error naming it."""
    base = device_arch.split(":", 1)[0].strip().lower()  # pragma: no mutate (maxsplit: same [0])
    if base.startswith("gfx95"):
        return "gfx95"
    if base.startswith("sm_") or base == "cuda":
        return "nvidia"
    if base in DEVICE_ARCHES and base != "cpu":
        return base
    raise UnknownRunner(f"GPU architecture {device_arch!r}: servegate knows "
                        f"{', '.join(a for a in ARCHES if a != 'cpu')} (a new one is a "
                        f"DEVICE_ARCHES entry in servegate/core/runner_classes.py)")


def device_arch(entry: str) -> str:
    """The device string a runner entry's gate is evaluated on: a class's, or an
    architecture's (``gfx942`` -> ``gfx942:sramecc+:xnack-``)."""
    return DEVICE_ARCHES[entry] if entry in DEVICE_ARCHES else get(entry).device_arch


def classify(device_arch: str, gpu_name: str) -> RunnerClass:
    """The runner class of a device: its architecture, then the model named in its name (a
    single registered model of that architecture is taken when the name says nothing)."""
    arch = arch_of(device_arch)
    candidates = of_arch(arch)
    if not candidates:
        raise UnknownRunner(
            f"GPU {gpu_name or '<no name>'!r} ({device_arch}): architecture {arch} has no "
            f"registered runner class; pass --runner or add a RunnerClass entry in "
            f"servegate/core/runner_classes.py")
    named = [c for c in candidates if any(n.lower() in gpu_name.lower() for n in c.gpu_names)]
    if len(named) == 1:
        return named[0]
    if len(candidates) == 1:
        return candidates[0]
    raise UnknownRunner(
        f"GPU {gpu_name or '<no name>'!r} ({device_arch}): not one of the registered "
        f"{arch} models ({', '.join(c.name for c in candidates)}); pass --runner or add a "
        f"RunnerClass entry in servegate/core/runner_classes.py")


# Schema-1 run/baseline files named the architecture; their device arch, when not recorded.
_V1_DEVICE_ARCH = {"gfx95": "gfx950", "gfx942": "gfx942", "nvidia": "cuda"}


def from_schema_1(runner_class: str, fingerprint: Mapping[str, Any]) -> RunnerClass:
    """The GPU model a schema-1 file (runner_class = an architecture) was measured on, from the
    device recorded in its fingerprint (UnknownRunner when that cannot tell)."""
    device_arch = fingerprint.get("gpu_arch") or _V1_DEVICE_ARCH.get(runner_class, "")
    return classify(str(device_arch), str(fingerprint.get("gpu_name", "")))


def selects(entry: str, runner: str) -> bool:
    """A suite's ``runners`` entry (a class name or an architecture) covers class ``runner``
    (an emulated class only by its own name)."""
    cls = get(runner)
    return entry == runner or (entry == cls.arch and not cls.emulated)


def is_gpu(entry: str) -> bool:
    """A suite ``runners`` entry that needs a real GPU (not ``cpu``, not an emulated class)."""
    if entry in ARCHES:
        return entry != "cpu"
    cls = get(entry)
    return cls.arch != "cpu" and not cls.emulated


def expand(entries: tuple[str, ...] | list[str]) -> tuple[RunnerClass, ...]:
    """The classes a suite's ``runners`` list covers (architectures expand to their models)."""
    out: dict[str, RunnerClass] = {}
    for entry in entries:
        for cls in (of_arch(entry) if entry in ARCHES else (get(entry),)):
            out[cls.name] = cls
    return tuple(out.values())


def ci_cells(workflow: str) -> list[dict[str, str]]:
    """The GPU job matrix of a workflow (``nightly``: gate cells plus the ``forced`` experiment
    where the gate is off; ``premerge``: gate cells), one cell per class with a CI label, on
    its first label. The workflow files hold exactly this list (a test compares them)."""
    if workflow not in ("nightly", "premerge"):
        raise ValueError(f"workflow {workflow!r}: expected nightly or premerge")
    cells: list[dict[str, str]] = []
    for cls in REGISTRY.values():
        if not cls.ci_labels:
            continue
        runs = [("gate", cls.gate_modes)]
        if workflow == "nightly" and cls.experiment_modes:
            runs.append(("experiment", cls.experiment_modes))
        for role, modes in runs:
            cells.append({"label": cls.ci_labels[0], "gpu": cls.arch, "modes": ",".join(modes),
                          "role": role, "cell": f"{cls.arch}-{cls.name}-{'-'.join(modes)}",
                          "image_var": cls.image_var})
    return cells
