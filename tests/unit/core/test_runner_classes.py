"""servegate.core.runner_classes: the runner-class registry (lookup, architectures, GPU or not,
the emulated class, CI cells). Expected values are written out by hand."""

from __future__ import annotations

import re

import pytest
from fake_torch import FakeTorch

from servegate.config import load_suite, suite_path
from servegate.core import runner_classes
from servegate.serve import detect

# The runner-class registry (servegate.core.runner_classes).

def test_unknown_runner_class_lists_the_registered_ones() -> None:
    from servegate.core import runner_classes

    with pytest.raises(runner_classes.UnknownRunner) as info:
        runner_classes.get("mi999x")
    assert str(info.value) == (f"runner class 'mi999x': expected one of "
                               f"{', '.join(runner_classes.REGISTRY)} (a new GPU model is one entry "
                               f"in servegate/core/runner_classes.py)")
    assert "cpu, mi355x, mi300x, " in str(info.value)


def test_architecture_strings() -> None:
    from servegate.core import runner_classes

    assert runner_classes.arch_of(" GFX942:sramecc+:xnack- ") == "gfx942"
    assert runner_classes.arch_of("cuda") == "nvidia" and runner_classes.arch_of("sm_90") == "nvidia"
    assert runner_classes.arch_of("gfx950") == "gfx95"
    # every known AMD architecture, gfx1250 included; an unknown one is named
    assert [runner_classes.arch_of(a) for a in ("gfx90a:sramecc+:xnack-", "gfx942", "gfx950",
                                                 "gfx1250")] == ["gfx90a", "gfx942", "gfx95",
                                                                 "gfx1250"]
    for unknown in ("gfx1100", "cpu", "tpu_v5"):
        with pytest.raises(runner_classes.UnknownRunner) as info:
            runner_classes.arch_of(unknown)
        assert str(info.value) == (
            f"GPU architecture {unknown!r}: servegate knows gfx95, gfx942, gfx90a, gfx1250, "
            f"nvidia (a new one is a DEVICE_ARCHES entry in servegate/core/runner_classes.py)")


def test_each_entry_names_the_device_its_gate_is_evaluated_on() -> None:
    """Classes and architectures alike: the gcnArchName (or sm_XY, or cpu) the device double
    emulates when the tree's gate is read for them."""
    device = runner_classes.device_arch
    assert device("mi300x") == device("mi325x") == device("gfx942") == "gfx942:sramecc+:xnack-"
    assert device("mi355x") == device("cpu-gfx95") == "gfx950:sramecc+:xnack-"
    assert (device("gfx1250"), device("h100"), device("cpu")) == ("gfx1250", "sm_90", "cpu")
    for arch in runner_classes.ARCHES:      # every architecture's device is its own again
        if arch != "cpu":
            assert runner_classes.arch_of(device(arch)) == arch
    with pytest.raises(runner_classes.UnknownRunner, match="runner class 'gfx1100'"):
        device("gfx1100")


def test_a_cpu_class_of_another_name_needs_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from servegate.core import runner_classes

    monkeypatch.setitem(runner_classes.REGISTRY, "cpu-big",
                        runner_classes.RunnerClass("cpu-big", "cpu", gated=False))
    assert runner_classes.is_gpu("cpu-big") is False
    assert runner_classes.is_gpu("cpu-gfx95") is False and runner_classes.is_gpu("mi300x") is True
    assert runner_classes.is_gpu("gfx95") is True and runner_classes.is_gpu("cpu") is False


# Runner detection from faked device properties (tests/fake_torch.py stands in for a GPU torch build).


@pytest.fixture(autouse=True)
def _no_env_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERVEGATE_RUNNER", raising=False)


@pytest.mark.parametrize(("arch", "name", "needle"), [
    ("gfx942", "", "not one of the registered gfx942 models (mi300x, mi325x)"),
    ("gfx90a:sramecc+:xnack-", "AMD Instinct MI250X", "architecture gfx90a has no registered "
                                                      "runner class"),
    ("gfx1250", "", "architecture gfx1250 has no registered runner class"),
    ("gfx1100", "Radeon", "GPU architecture 'gfx1100'"),
])
def test_unknown_gpu_is_named_not_guessed(arch: str, name: str, needle: str) -> None:
    with pytest.raises(runner_classes.UnknownRunner, match=re.escape(needle)):
        detect.detect(torch_module=FakeTorch(hip="6.4", arch=arch, name=name, count=8))


def test_registry_is_consistent() -> None:
    """Every class has a known architecture; gated exactly where the architecture is gfx95
    (sglang's is_gfx95_supported), real or emulated; CI labels belong to one class each. An
    emulated class (servegate's device double on a CPU, e.g. cpu-gfx95) carries its emulated
    architecture but no GPU names and no CI labels, so it is chosen only by name: never by
    detection, never by a suite or profile naming the architecture."""
    labels = [label for c in runner_classes.REGISTRY.values() for label in c.ci_labels]
    assert len(labels) == len(set(labels))
    for cls in runner_classes.REGISTRY.values():
        assert cls.arch in runner_classes.ARCHES
        assert cls.gated == (cls.arch == "gfx95")
        assert (cls.experiment_modes is None) == (cls.gated or cls.arch == "cpu")
        if cls.emulated:
            assert cls.arch != "cpu" and not cls.gpu_names and not cls.ci_labels
            assert cls not in runner_classes.of_arch(cls.arch)
            assert not runner_classes.selects(cls.arch, cls.name)
    assert any(c.emulated for c in runner_classes.REGISTRY.values())      # cpu-gfx95


def test_a_new_runner_class_is_one_registry_entry(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path) -> None:
    """Registering a GPU model is enough for detection, its architecture's profile section,
    suites listing the architecture, the exact-fill expectation, the claims and the CI matrix."""
    from judge_runs import make_run

    from servegate.config import load_suite, suite_path
    from servegate.config.judge import JudgeConfig
    from servegate.core.results import load_run
    from servegate.judge.baselines import baseline_path
    from servegate.judge.block_checks import block_pendings
    from servegate.judge.evidence import evidence_from_run
    from servegate.measure.exactfill import expected_effective

    mi350x = runner_classes.RunnerClass("mi350x", "gfx95", gated=True, gpu_names=("MI350X",),
                                 ci_labels=("linux-mi350-gpu-8",),
                                 image_var="SERVEGATE_IMAGE_GFX95")
    monkeypatch.setitem(runner_classes.REGISTRY, "mi350x", mi350x)
    monkeypatch.setitem(runner_classes.REGISTRY, "mi355x", runner_classes.REGISTRY["mi355x"])
    fake = FakeTorch(hip="7.0", arch="gfx950:sramecc+", name="AMD Instinct MI350X", count=8)
    assert detect.detect(torch_module=fake).runner_class == "mi350x"
    premerge = load_suite(suite_path("premerge"))
    assert premerge.runs_on("mi350x") and "mi350x" in premerge.runner_classes()
    assert premerge.server_for("mi350x") == premerge.server_for("mi355x")   # gfx95 section
    assert expected_effective("on", "mi350x") is True
    run = load_run(make_run(tmp_path / "run", runner_class="mi350x", concurrencies=(64,)))
    claims = [p.evaluate(0.95).claim for p in block_pendings(run, evidence_from_run(run),
                                                             JudgeConfig())]
    assert "improvement" in claims and "noop" not in claims               # the gated claim
    assert baseline_path("mi350x", "glm-5.2-mxfp4", "premerge").parts[-3] == "mi350x"
    assert {"label": "linux-mi350-gpu-8", "gpu": "gfx95", "modes": "off,on", "role": "gate",
            "cell": "gfx95-mi350x-off-on", "image_var": "SERVEGATE_IMAGE_GFX95"} \
        in runner_classes.ci_cells("nightly")


# Runner class ``cpu-gfx95``: a CPU server whose exact-fill device check sees gfx95.
#
# The one double is servegate's, at sglang's device check (``SERVEGATE_EMULATE_GFX95``, in the
# exact-fill hook); these tests pin what surrounds it: chosen only by name, the profile section
# that sets it, an inherited value never reaching another class's server, the read-back that ties
# every gate report to the double (and forbids the double on real devices), and bench judging the
# suite's in-run claims without a stored baseline. The real-server path is
# ``tests/test_bench_e2e.py::test_cpu_gfx95_suite_end_to_end``; the hook in a real sglang process
# is in ``tests/real_sglang/scheduler/test_hooks.py``.


def test_emulated_class_is_gated_but_never_detected_or_covered_by_its_arch() -> None:
    cls = runner_classes.get("cpu-gfx95")
    assert (cls.arch, cls.gated, cls.emulated) == ("gfx95", True, True)
    assert cls.gate_modes == ("off", "on") and cls.ci_labels == ()
    assert cls not in runner_classes.of_arch("gfx95")
    assert runner_classes.classify("gfx950", "").name == "mi355x"         # still the only real gfx95
    assert not runner_classes.selects("gfx95", "cpu-gfx95")
    assert runner_classes.selects("cpu-gfx95", "cpu-gfx95")
    assert "cpu-gfx95" not in {c.name for c in runner_classes.expand(["gfx95", "cpu"])}
    assert not runner_classes.is_gpu("cpu-gfx95")
    assert runner_classes.is_gpu("gfx95") and runner_classes.is_gpu("mi355x")
    assert not load_suite(suite_path("premerge")).runs_on("cpu-gfx95")
    assert runner_classes.ci_cells("nightly") == [c for c in runner_classes.ci_cells("nightly")
                                           if "cpu-gfx95" not in c["cell"]]


@pytest.mark.parametrize("cousin", ["gfx940", "gfx941", "gfx9", "gfx90", "gfx908", "gfx90c",
                                    "gfx9420", "gfx94", "gfx12", "gfx125", "gfx1251", "gfx12500",
                                    "gfx1200", "sm90", "", "  ", "mi355x", "gfx_950"])
def test_an_unregistered_architecture_is_refused_close_cousins_included(cousin: str) -> None:
    """A device string one digit off a registered architecture is not taken for it: the class
    (and with it the exact-fill gate and the baselines) would be wrong."""
    from servegate.core import runner_classes

    with pytest.raises(runner_classes.UnknownRunner, match="servegate knows"):
        runner_classes.arch_of(cousin)


@pytest.mark.parametrize("device", ["gfx950", "gfx950:sramecc+:xnack-", "GFX950", "gfx951",
                                    "gfx942", "gfx90a", "gfx1250", "sm_90", "sm_100"])
def test_gfx95_is_what_sglangs_gate_calls_gfx95(device: str) -> None:
    """servegate's gfx95 is sglang's is_gfx95_supported (``"gfx95" in gcnArchName``), read on the
    device string as the GPU reports it."""
    from servegate.core import runner_classes

    assert (runner_classes.arch_of(device) == "gfx95") is ("gfx95" in device.lower())


@pytest.mark.parametrize("device", ["gfx90a:sramecc+:xnack-", "gfx942"])
def test_a_gpu_reporting_no_name_is_called_so_in_the_error(device: str) -> None:
    """An architecture without a class (gfx90a) and one with several (gfx942): the error names
    the device and says the GPU reported no name, rather than printing an empty one."""
    with pytest.raises(runner_classes.UnknownRunner) as info:
        runner_classes.classify(device, "")
    assert str(info.value).startswith(f"GPU '<no name>' ({device}): ")


def test_a_schema_1_file_recording_no_device_names_no_architecture() -> None:
    """A schema-1 file whose runner_class is no architecture and whose fingerprint has no
    gpu_arch: the error shows the empty architecture it was left with, not a placeholder."""
    with pytest.raises(runner_classes.UnknownRunner) as info:
        runner_classes.from_schema_1("rocm-other", {"gpu_name": "AMD Instinct MI355X"})
    assert str(info.value).startswith("GPU architecture '': servegate knows gfx95, gfx942, ")


def test_an_unknown_workflow_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"^workflow 'weekly': expected nightly or premerge$"):
        runner_classes.ci_cells("weekly")
