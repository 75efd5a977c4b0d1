"""servegate's device double (hooks/exactfill/servegate_device_double.py) on a stand-in torch and
stand-in sglang device checks: the gate sees the emulated device for its call only, any check
that reads the device through torch is answered, and no cached answer outlives the call. The
real sglang gate under the double: tests/real_sglang/scheduler/test_hooks.py and
tests/real_sglang/preflight/test_preflight_gate.py."""

from __future__ import annotations

import functools
import sys
import types

import pytest

from servegate.serve.gate import device_double

double = device_double()


def _torch() -> types.SimpleNamespace:
    """A CPU build: no HIP, no device (get_device_properties fails as torch does)."""
    def no_device(index: object = 0) -> object:
        raise AssertionError("Torch not compiled with a GPU device")
    return types.SimpleNamespace(version=types.SimpleNamespace(hip=None, cuda=None),
                                 cuda=types.SimpleNamespace(get_device_properties=no_device,
                                                            get_device_capability=no_device))


def _checks(torch: types.SimpleNamespace) -> types.ModuleType:
    """sglang's device checks as srt/utils/common.py writes them (lru-cached, reading torch)."""
    module = types.ModuleType("sglang.srt.utils.fake_common")

    @functools.lru_cache(maxsize=1)
    def is_gfx95_supported() -> bool:
        if torch.version.hip:
            return any(g in torch.cuda.get_device_properties(0).gcnArchName for g in ["gfx95"])
        return False

    @functools.lru_cache(maxsize=1)
    def is_gfx942_supported() -> bool:
        if torch.version.hip:
            return "gfx942" in torch.cuda.get_device_properties(0).gcnArchName
        return False

    module.is_gfx95_supported = is_gfx95_supported
    module.is_gfx942_supported = is_gfx942_supported
    return module


@pytest.fixture
def sglang(monkeypatch: pytest.MonkeyPatch) -> tuple[types.SimpleNamespace, types.ModuleType]:
    torch = _torch()
    checks = _checks(torch)
    monkeypatch.setitem(sys.modules, checks.__name__, checks)
    return torch, checks


@pytest.mark.parametrize(("device", "gfx95_only", "with_gfx942"), [
    ("gfx950:sramecc+:xnack-", True, True),
    ("gfx942:sramecc+:xnack-", False, True),
    ("gfx1250", False, False),
    ("sm_90", False, False),
    ("cpu", False, False)])
def test_the_gate_sees_the_emulated_device(sglang: tuple, device: str, gfx95_only: bool,
                                           with_gfx942: bool) -> None:
    torch, checks = sglang

    @functools.lru_cache(maxsize=1)
    def released_gate() -> bool:            # 0.5.23: gfx95 only
        return checks.is_gfx95_supported()

    @functools.lru_cache(maxsize=1)
    def gfx942_gate() -> bool:              # a tree that opens it on gfx942 too
        return checks.is_gfx95_supported() or checks.is_gfx942_supported()

    assert double.evaluate(released_gate, device, torch) is gfx95_only
    assert double.evaluate(gfx942_gate, device, torch) is with_gfx942
    # nothing outside the call keeps the emulated device: torch and the cached checks are the
    # CPU's again (a cached True would leak the device into the rest of sglang)
    assert torch.version.hip is None and torch.version.cuda is None
    assert checks.is_gfx95_supported() is False and checks.is_gfx942_supported() is False
    assert released_gate() is False


def test_torch_answers_as_the_device_inside_only(sglang: tuple) -> None:
    torch, _ = sglang
    with double.as_device(torch, "gfx942:sramecc+:xnack-"):
        props = torch.cuda.get_device_properties(0)
        assert (torch.version.hip is not None, props.gcnArchName) == (True, "gfx942:sramecc+:xnack-")
        assert torch.cuda.get_device_capability() == (9, 4)
    with double.as_device(torch, "sm_100"):
        assert torch.version.hip is None and torch.version.cuda is not None
        assert torch.cuda.get_device_capability() == (10, 0)
        assert not hasattr(torch.cuda.get_device_properties(0), "gcnArchName")
    with double.as_device(torch, "cpu"), pytest.raises(RuntimeError, match="no GPU"):
        torch.cuda.get_device_properties(0)
    assert torch.version.hip is None
    with pytest.raises(AssertionError):
        torch.cuda.get_device_properties(0)      # the real (CPU) answer again


def test_an_unknown_device_string_is_named() -> None:
    with pytest.raises(double.DeviceDoubleError, match="device 'tpu_v5': expected a ROCm"):
        double.evaluate(lambda: True, "tpu_v5", _torch())


def test_the_server_gate_is_cached_until_cleared(sglang: tuple, monkeypatch: pytest.MonkeyPatch
                                                 ) -> None:
    """EmulatedGate behaves like sglang's lru_cache'd gate: evaluated once (under the double),
    re-evaluated after cache_clear (the mode switch changes SGLANG_EXACT_CHUNK_FILL, then
    clears it)."""
    torch, checks = sglang
    calls: list[bool] = []
    env = {"on": True}

    def real() -> bool:
        calls.append(True)
        return env["on"] and checks.is_gfx95_supported()

    monkeypatch.setitem(sys.modules, "torch", torch)
    gate = double.EmulatedGate(real, double.GFX95_DEVICE)
    assert (gate(), gate(), len(calls)) == (True, True, 1)
    env["on"] = False
    assert gate() is True
    gate.cache_clear()
    assert (gate(), len(calls)) == (False, 2)


def test_the_env_names_the_device_and_the_old_flag_still_works() -> None:
    assert double.emulated_device({}) is None
    assert double.emulated_device({"SERVEGATE_EMULATE_GFX95": "1"}) == "gfx950:sramecc+:xnack-"
    assert double.emulated_device({"SERVEGATE_EMULATE_ARCH": "gfx942:sramecc+:xnack-",
                                   "SERVEGATE_EMULATE_GFX95": "1"}) == "gfx942:sramecc+:xnack-"
    assert [double.label(d) for d in ("gfx950:sramecc+:xnack-", "gfx942:x", "gfx1250")] == \
        ["gfx95", "gfx942", "gfx1250"]
