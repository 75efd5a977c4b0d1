"""The fingerprint's CPU fields (servegate.runner): what the verdict's reference line compares."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import pytest

from servegate import runner


def test_cpu_model_from_cpuinfo(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\n"
                    "model name\t: AMD EPYC 7763 64-Core Processor  \nprocessor\t: 1\n"
                    "model name\t: AMD EPYC 7763 64-Core Processor\n")
    assert runner._cpu_model(info) == "AMD EPYC 7763 64-Core Processor"
    info.write_text("processor\t: 0\nHardware\t: BCM2835\n")             # ARM boards
    assert runner._cpu_model(info) == "BCM2835"
    info.write_text("cpu model\t\t: Loongson-3A5000\n")
    assert runner._cpu_model(info) == "Loongson-3A5000"


def test_cpu_model_falls_back_to_platform(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(platform, "processor", lambda: "arm")
    assert runner._cpu_model(tmp_path / "missing") == "arm"
    nameless = tmp_path / "cpuinfo"
    nameless.write_text("processor\t: 0\nflags\t: fpu\nmodel\t: 1\n")
    assert runner._cpu_model(nameless) == "arm"
    monkeypatch.setattr(platform, "processor", lambda: "")
    assert runner._cpu_model(nameless) == ""


def test_fingerprint_records_the_cpu_model_and_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "_cpu_model", lambda: "Intel Xeon Gold 6338")
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    fp = runner.fingerprint(runner.Detected("cpu", "override"), "m", torch_module=None)
    assert (fp["cpu_model"], fp["cpu_count"]) == ("Intel Xeon Gold 6338", 64)  # type: ignore
    monkeypatch.setattr(runner, "_cpu_model", lambda: "")
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    fp = runner.fingerprint(runner.Detected("cpu", "override"), "m", torch_module=None)
    assert "cpu_model" not in fp and "cpu_count" not in fp


def test_the_real_machine_is_named() -> None:
    fp = runner.fingerprint(runner.Detected("cpu", "override"), "m", torch_module=None)
    assert fp.get("cpu_count") == os.cpu_count()
    assert fp.get("cpu_model") == (runner._cpu_model() or None)
