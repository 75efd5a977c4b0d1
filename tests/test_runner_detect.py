"""Runner detection from faked device properties (FakeTorch stands in for a GPU torch build)."""

from __future__ import annotations

import json
import re
import types

import pytest

from servegate import runner, runners


class FakeTorch(types.ModuleType):
    """A fake ``torch`` module: just the attributes runner detection reads."""

    def __init__(self, *, hip: str | None = None, cuda: str | None = None, arch: str = "",
                 name: str = "", count: int = 0, major: int = 9, minor: int = 0) -> None:
        super().__init__("torch")
        self.__version__ = "2.14.1+fake"
        self.version = types.SimpleNamespace(hip=hip, cuda=cuda)
        props = types.SimpleNamespace(gcnArchName=arch, name=name, major=major, minor=minor)
        self.cuda = types.SimpleNamespace(
            is_available=lambda: count > 0, device_count=lambda: count,
            get_device_properties=lambda index: props)


@pytest.fixture(autouse=True)
def _no_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVEGATE_RUNNER", raising=False)


@pytest.mark.parametrize(("arch", "name", "expected"), [
    ("gfx950:sramecc+:xnack-", "AMD Instinct MI355X", "mi355x"),
    ("gfx950", "", "mi355x"),                       # the only registered gfx95 model
    ("gfx942:sramecc+:xnack-", "AMD Instinct MI300X", "mi300x"),
    ("gfx942:sramecc+:xnack-", "AMD Instinct MI325X", "mi325x"),
])
def test_rocm_models(arch: str, name: str, expected: str) -> None:
    fake = FakeTorch(hip="6.4.1", arch=arch, name=name, count=8)
    found = runner.detect(torch_module=fake)
    assert found.runner_class == expected
    assert found.gpu_arch == arch.split(":")[0]
    assert found.gpu_count == 8 and found.how == "torch"


@pytest.mark.parametrize(("arch", "name", "needle"), [
    ("gfx942", "", "not one of the registered gfx942 models (mi300x, mi325x)"),
    ("gfx90a:sramecc+:xnack-", "AMD Instinct MI250X", "GPU architecture 'gfx90a"),
    ("gfx1100", "Radeon", "GPU architecture 'gfx1100'"),
])
def test_unknown_gpu_is_named_not_guessed(arch: str, name: str, needle: str) -> None:
    with pytest.raises(runners.UnknownRunner, match=re.escape(needle)):
        runner.detect(torch_module=FakeTorch(hip="6.4", arch=arch, name=name, count=8))


def test_nvidia_and_cpu() -> None:
    h200 = runner.detect(torch_module=FakeTorch(cuda="12.8", name="NVIDIA H200", count=4))
    assert (h200.runner_class, h200.gpu_arch, h200.gpu_count) == ("h200", "sm_90", 4)
    b200 = runner.detect(torch_module=FakeTorch(cuda="12.8", name="NVIDIA B200", major=10,
                                                  count=8))
    assert b200.runner_class == "b200"
    assert runner.detect(torch_module=FakeTorch()).runner_class == "cpu"


def test_detect_imports_torch_when_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """Detection also works through ``import torch`` (a fake module in sys.modules)."""
    monkeypatch.setitem(__import__("sys").modules, "torch",
                        FakeTorch(hip="6.3", arch="gfx942:sramecc+:xnack-",
                                  name="AMD Instinct MI325X", count=8))
    assert runner.detect().runner_class == "mi325x"


def test_override_wins_and_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeTorch(hip="6.4", arch="gfx950", count=8)
    assert runner.detect("mi300x", torch_module=fake).runner_class == "mi300x"
    monkeypatch.setenv("SERVEGATE_RUNNER", "cpu")
    assert runner.detect(torch_module=fake).runner_class == "cpu"
    with pytest.raises(runner.RunnerError, match="--runner 'gfx95': expected one of cpu, mi355x"):
        runner.detect("gfx95", torch_module=fake)


def test_tools_used_only_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    outputs = {"rocminfo": "  Name:                    gfx942\n  Marketing Name:  AMD Instinct "
                           "MI300X\n  Name:  gfx942\n  Marketing Name:  AMD Instinct MI300X\n"}
    monkeypatch.setattr(runner, "_run", lambda argv: outputs.get(argv[0], ""))
    monkeypatch.setattr(runner, "_import_torch", lambda: None)
    found = runner.detect()
    assert (found.runner_class, found.how, found.gpu_count) == ("mi300x", "rocminfo", 2)


def test_registry_is_consistent() -> None:
    """Every class has a known architecture; gated exactly where the architecture is gfx95
    (sglang's is_gfx95_supported), real or emulated; CI labels belong to one class each. An
    emulated class (servegate's device double on a CPU, e.g. cpu-gfx95) carries its emulated
    architecture but no GPU names and no CI labels, so it is chosen only by name: never by
    detection, never by a suite or profile naming the architecture."""
    labels = [label for c in runners.REGISTRY.values() for label in c.ci_labels]
    assert len(labels) == len(set(labels))
    for cls in runners.REGISTRY.values():
        assert cls.arch in runners.ARCHES
        assert cls.gated == (cls.arch == "gfx95")
        assert (cls.experiment_modes is None) == (cls.gated or cls.arch == "cpu")
        if cls.emulated:
            assert cls.arch != "cpu" and not cls.gpu_names and not cls.ci_labels
            assert cls not in runners.of_arch(cls.arch)
            assert not runners.selects(cls.arch, cls.name)
    assert any(c.emulated for c in runners.REGISTRY.values())      # cpu-gfx95


def test_fingerprint_fields_and_no_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_supersecretvalue123")
    monkeypatch.setenv("SERVEGATE_IMAGE", "rocm/sgl-dev:v0.5.23-rocm700-mi35x")
    monkeypatch.setattr(runner, "_driver", lambda: "amdgpu 6.12.12")
    fake = FakeTorch(hip="7.0.0", arch="gfx950:sramecc+:xnack-", name="AMD Instinct MI355X",
                     count=8)
    detected = runner.detect(torch_module=fake)
    fp = runner.fingerprint(detected, "amd/GLM-5.2-MXFP4", "abc123", torch_module=fake)
    assert fp["runner_class"] == "mi355x"
    assert (fp["gpu_name"], fp["gpu_count"], fp["gpu_arch"]) == ("AMD Instinct MI355X", 8, "gfx950")
    assert fp["rocm"] == "7.0.0" and "cuda" not in fp
    assert fp["torch"] == "2.14.1+fake" and fp["driver"] == "amdgpu 6.12.12"
    assert (fp["model"], fp["model_revision"]) == ("amd/GLM-5.2-MXFP4", "abc123")
    assert fp["image"] == "rocm/sgl-dev:v0.5.23-rocm700-mi35x"
    assert fp["host"] and fp["python"]
    assert "hf_supersecretvalue123" not in json.dumps(fp)


def test_a_new_runner_class_is_one_registry_entry(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path) -> None:
    """Registering a GPU model is enough for detection, its architecture's profile section,
    suites listing the architecture, the exact-fill expectation, the claims and the CI matrix."""
    from judge_runs import make_run

    from servegate.config import load_suite, suite_path
    from servegate.config.judge import JudgeConfig
    from servegate.judge.baselines import baseline_path
    from servegate.judge.claims import claim_pendings
    from servegate.measure.exactfill import expected_effective
    from servegate.results import load_run

    mi350x = runners.RunnerClass("mi350x", "gfx95", gated=True, gpu_names=("MI350X",),
                                 ci_labels=("linux-mi350-gpu-8",),
                                 image_var="SERVEGATE_IMAGE_GFX95")
    monkeypatch.setitem(runners.REGISTRY, "mi350x", mi350x)
    monkeypatch.setitem(runners.REGISTRY, "mi355x", runners.REGISTRY["mi355x"])
    fake = FakeTorch(hip="7.0", arch="gfx950:sramecc+", name="AMD Instinct MI350X", count=8)
    assert runner.detect(torch_module=fake).runner_class == "mi350x"
    premerge = load_suite(suite_path("premerge"))
    assert premerge.runs_on("mi350x") and "mi350x" in premerge.runner_classes()
    assert premerge.server_for("mi350x") == premerge.server_for("mi355x")   # gfx95 section
    assert expected_effective("on", "mi350x") is True
    run = load_run(make_run(tmp_path / "run", runner_class="mi350x", concurrencies=(64,)))
    names = [p.name for p in claim_pendings(run, JudgeConfig())]
    assert any(name.startswith("claim: on vs off") for name in names)       # the gated claim
    assert baseline_path("mi350x", "glm-5.2-mxfp4", "premerge").parts[-3] == "mi350x"
    assert {"label": "linux-mi350-gpu-8", "gpu": "gfx95", "modes": "off,on", "role": "gate",
            "cell": "gfx95-mi350x-off-on", "image_var": "SERVEGATE_IMAGE_GFX95"} \
        in runners.ci_cells("nightly")
