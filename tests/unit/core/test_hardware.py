"""servegate.core.hardware: which references are of the run's hardware (issue 39 item 1)."""

from __future__ import annotations

from servegate.core import hardware

# this VM's CPU as the fingerprint records it, and the committed CPU baseline's fingerprint
# (recorded on another, slower VM before the hardware fields existed: it says as much as this)
HERE = {"cpu_vendor": "AuthenticAMD", "cpu_family": "25", "cpu_model_number": "17",
        "cpu_stepping": "1", "cpu_model": "AMD EPYC", "cpu_count": 2, "memory_gib": 24,
        "cpu_isa": ["avx2", "avx512f", "avx512_bf16"], "gpu_count": 0,
        "gpu_name": "none (CPU: cpu, 2 cores)", "host": "vm"}
HERE["hardware"] = hardware.digest(HERE)
COMMITTED = {"cpu_model": "AMD EPYC", "cpu_count": 2, "gpu_count": 0, "host": "vm",
             "gpu_name": "none (CPU: x86_64, 2 cores)", "sglang": "0.5.23"}


def test_same_hardware_is_the_same_digest_whatever_the_host_or_cpu_stand_in_name() -> None:
    renamed = {**HERE, "host": "node-7", "gpu_name": "none (CPU: x86_64, 2 cores)"}
    assert hardware.digest(renamed) == HERE["hardware"]
    assert hardware.compare(renamed, HERE)[0] == "same"


def test_other_hardware_names_every_differing_field_and_what_one_side_did_not_record() -> None:
    zen2 = {**HERE, "cpu_model_number": "49", "cpu_isa": ["avx2"], "memory_gib": None}
    zen2["hardware"] = hardware.digest(zen2)
    assert hardware.compare(zen2, HERE) == (
        "other", 'other hardware: cpu model 49 -> 17, isa avx2 -> "avx2 avx512f avx512_bf16", '
                 "memory GiB ? -> 24")


def test_an_old_reference_is_unknown_unless_a_field_both_recorded_differs() -> None:
    status, text = hardware.compare(COMMITTED, HERE)
    assert status == "unknown"
    assert text == ('hardware unknown (recorded before servegate recorded it; it records cpu '
                    '"AMD EPYC", cores 2, gpus 0)')
    assert hardware.compare(HERE, COMMITTED)[0] == "unknown"        # either side
    assert hardware.compare({**COMMITTED, "cpu_count": 64}, HERE) == (
        "other", "other hardware: cores 64 -> 2")
    assert hardware.of(COMMITTED) is None and hardware.of(HERE) == HERE["hardware"]
