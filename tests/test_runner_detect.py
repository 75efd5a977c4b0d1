"""Runner detection from faked device properties (FakeTorch stands in for a GPU torch build)."""

from __future__ import annotations

import json
import types

import pytest

from servegate import runner


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


@pytest.mark.parametrize(("arch", "expected"), [
    ("gfx950:sramecc+:xnack-", "gfx95"),
    ("gfx950", "gfx95"),
    ("gfx942:sramecc+:xnack-", "gfx942"),
    ("gfx90a:sramecc+:xnack-", "rocm-other"),
    ("gfx1100", "rocm-other"),
])
def test_rocm_arch_classes(arch: str, expected: str) -> None:
    fake = FakeTorch(hip="6.4.1", arch=arch, name="AMD Instinct MI355X", count=8)
    found = runner.detect(torch_module=fake)
    assert found.runner_class == expected
    assert found.gpu_arch == arch.split(":")[0]
    assert found.gpu_count == 8 and found.how == "torch"


def test_nvidia_and_cpu() -> None:
    nvidia = runner.detect(torch_module=FakeTorch(cuda="12.8", name="NVIDIA H200", count=4))
    assert (nvidia.runner_class, nvidia.gpu_arch, nvidia.gpu_count) == ("nvidia", "sm_90", 4)
    assert runner.detect(torch_module=FakeTorch()).runner_class == "cpu"


def test_detect_imports_torch_when_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """Detection also works through ``import torch`` (a fake module in sys.modules)."""
    monkeypatch.setitem(__import__("sys").modules, "torch",
                        FakeTorch(hip="6.3", arch="gfx942:sramecc+:xnack-", count=8))
    assert runner.detect().runner_class == "gfx942"


def test_override_wins_and_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeTorch(hip="6.4", arch="gfx950", count=8)
    assert runner.detect("gfx942", torch_module=fake).runner_class == "gfx942"
    monkeypatch.setenv("SERVEGATE_RUNNER", "cpu")
    assert runner.detect(torch_module=fake).runner_class == "cpu"
    with pytest.raises(runner.RunnerError, match="--runner 'mi355'"):
        runner.detect("mi355", torch_module=fake)


def test_tools_used_only_without_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    outputs = {"rocminfo": "  Name:                    gfx942\n  Name:  gfx942\n"}
    monkeypatch.setattr(runner, "_run", lambda argv: outputs.get(argv[0], ""))
    monkeypatch.setattr(runner, "_import_torch", lambda: None)
    found = runner.detect()
    assert (found.runner_class, found.how, found.gpu_count) == ("gfx942", "rocminfo", 2)


def test_fingerprint_fields_and_no_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_supersecretvalue123")
    monkeypatch.setenv("SERVEGATE_IMAGE", "rocm/sgl-dev:v0.5.23-rocm700-mi35x")
    monkeypatch.setattr(runner, "_driver", lambda: "amdgpu 6.12.12")
    fake = FakeTorch(hip="7.0.0", arch="gfx950:sramecc+:xnack-", name="AMD Instinct MI355X",
                     count=8)
    detected = runner.detect(torch_module=fake)
    fp = runner.fingerprint(detected, "amd/GLM-5.2-MXFP4", "abc123", torch_module=fake)
    assert fp["runner_class"] == "gfx95"
    assert (fp["gpu_name"], fp["gpu_count"], fp["gpu_arch"]) == ("AMD Instinct MI355X", 8, "gfx950")
    assert fp["rocm"] == "7.0.0" and "cuda" not in fp
    assert fp["torch"] == "2.14.1+fake" and fp["driver"] == "amdgpu 6.12.12"
    assert (fp["model"], fp["model_revision"]) == ("amd/GLM-5.2-MXFP4", "abc123")
    assert fp["image"] == "rocm/sgl-dev:v0.5.23-rocm700-mi35x"
    assert fp["host"] and fp["python"]
    assert "hf_supersecretvalue123" not in json.dumps(fp)
