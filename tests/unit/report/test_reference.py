"""What the reference is (servegate.report.reference): the baseline's fingerprint against the
run's, named once in the verdict block."""

from __future__ import annotations

import json
from pathlib import Path

from repo_files import REPO_ROOT
from report_builders import BASE_FP, RUN_FP, check, judgement, ratio

from servegate.report import headline as hl
from servegate.report import reference
from servegate.report import summary as summary_md

REPO = REPO_ROOT


def test_the_diff_names_exactly_the_differing_fields() -> None:
    diff = reference.fingerprint_diff(BASE_FP, RUN_FP)
    # python differs too, but is not a compared field; torch and gpu_name are equal
    assert diff == [("host", "vm", "ci-7"), ("cpu_model", "AMD EPYC", "Intel Xeon Gold 6338"),
                    ("sglang", "0.5.23", "0.5.24")]
    assert reference.fingerprint_diff(RUN_FP, RUN_FP) == []


def test_every_compared_field_is_found_and_nothing_else() -> None:
    base = {key: f"old {key}" for key, _ in reference.FIELDS}
    for key, _ in reference.FIELDS:
        run = {**base, key: "new", "python": "3.12", "model_revision": "other"}
        assert reference.fingerprint_diff(base, run) == [(key, f"old {key}", "new")]


def test_a_field_missing_on_either_side_is_not_a_difference() -> None:
    old = {"host": "vm", "sglang": "0.5.23"}                 # recorded before cpu_model existed
    new = {"host": "vm", "sglang": "0.5.23", "cpu_model": "AMD EPYC", "cpu_count": 2,
           "sglang_commit": ""}
    assert reference.fingerprint_diff(old, new) == []
    assert reference.fingerprint_diff(None, new) == []
    assert reference.fingerprint_diff({"cpu_count": 2}, {"cpu_count": 4}) == [
        ("cpu_count", 2, 4)]


def test_the_phrase_says_machine_or_software() -> None:
    assert reference.describe_diff([]) is None
    machine = reference.describe_diff([("host", "a", "b"), ("cpu_model", "X Y", "Z"),
                                       ("cpu_count", 2, 4), ("sglang", "0.5.23", "0.5.24")])
    assert machine == ('baseline from another machine: host a -> b, cpu "X Y" -> Z, '
                       'cores 2 -> 4, sglang 0.5.23 -> 0.5.24')
    software = reference.describe_diff([("sglang_commit", "abc", "def"), ("rocm", "6.4", "7.0")])
    assert software == ("baseline from the same machine, other software: sglang commit abc -> "
                        "def, rocm 6.4 -> 7.0")


def test_reference_text_reads_provenance_and_the_runs_fingerprint() -> None:
    baseline = {"provenance": {"fingerprint": BASE_FP, "sglang": "0.5.23"}}
    assert reference.reference_text(baseline, {"fingerprint": RUN_FP}).startswith(
        "baseline from another machine: host vm -> ci-7, ")
    # a rolling history:N baseline records no fingerprint; a run without one says nothing
    assert reference.reference_text({"provenance": {"source_run": "history:5"}},
                                    {"fingerprint": RUN_FP}) is None
    assert reference.reference_text(baseline, {}) is None
    assert reference.reference_text(None, {"fingerprint": RUN_FP}) is None
    assert reference.reference_text(baseline, {"fingerprint": BASE_FP}) is None


def test_the_committed_cpu_baseline_against_another_host() -> None:
    stored = json.loads((REPO / "baselines/cpu/smollm2-135m/cpu.json").read_text())
    fp = stored["provenance"]["fingerprint"]
    run = {"fingerprint": {**fp, "host": "laptop", "cpu_model": "AMD EPYC", "cpu_count": 2}}
    assert reference.reference_text(stored, run) == (
        f"baseline from another machine: host {fp['host']} -> laptop")


def test_named_once_in_the_block_and_in_summary(tmp_path: Path) -> None:
    j = judgement(tmp_path, [check("p", "pass", interval=ratio(1.0, 0.98, 1.02))],
                  run={"fingerprint": RUN_FP},
                  baseline={"provenance": {"fingerprint": BASE_FP}})
    block = hl.verdict_block(j)
    refs = [line for line in block if "reference:" in line]
    assert refs == [block[1]] and block[1].startswith("  reference: baseline from another ")
    text = summary_md.render(j)
    assert text.count("baseline from another machine") == 1
    same = judgement(tmp_path, j.checks, run={"fingerprint": RUN_FP},
                     baseline={"provenance": {"fingerprint": RUN_FP}})
    assert not [line for line in hl.verdict_block(same) if "reference:" in line]


# ---------------------------------------------------------------- the kernel stack (issue 32)

GPU_FP = {"runner_class": "mi355x", "host": "mi355x-03", "gpu_name": "AMD Instinct MI355X",
          "sglang": "0.5.23", "sglang_commit": "abc1234", "rocm": "7.0.51831", "torch": "2.8.0",
          "aiter": "0.1.7.post2.dev52+gc16d44b93", "aiter_commit": "c16d44b9",
          "hipblaslt": "1.0.0", "triton": "3.4.0", "image_digest": "sha256:" + "ab" * 32,
          "gemm_configs": {"AITER_CONFIG_GEMM_A8W8_BLOCKSCALE": "cd" * 32},
          "gpu_clocks": {"tool": "amd-smi", "sclk_mhz": [132] * 8, "sclk_max_mhz": [2400] * 8}}


def test_a_baseline_that_differs_in_aiter_is_named() -> None:
    run = {**GPU_FP, "aiter": "0.1.8.dev3+g4453aaaa", "aiter_commit": "4453aaaa"}
    baseline = {"provenance": {"fingerprint": GPU_FP}}
    assert reference.reference_text(baseline, {"fingerprint": run}) == (
        "baseline from the same machine, other software: aiter 0.1.7.post2.dev52+gc16d44b93 -> "
        "0.1.8.dev3+g4453aaaa, aiter commit c16d44b9 -> 4453aaaa")


def test_a_retuned_gemm_config_a_clock_cap_and_the_image_digest_are_named() -> None:
    run = {**GPU_FP, "image_digest": "sha256:" + "ef" * 32,
           "gemm_configs": {"AITER_CONFIG_GEMM_A8W8_BLOCKSCALE": "01" * 32},
           "gpu_clocks": {"tool": "amd-smi", "sclk_mhz": [2100] * 8, "sclk_max_mhz": [1900] * 8}}
    assert reference.fingerprint_diff(GPU_FP, run) == [
        ("image_digest", "sha256:" + "ab" * 32, "sha256:" + "ef" * 32),
        ("gemm_config:AITER_CONFIG_GEMM_A8W8_BLOCKSCALE", "sha256:" + "cd" * 6,
         "sha256:" + "01" * 6),
        ("gpu_clock_limits", "sclk max 2400 MHz", "sclk max 1900 MHz")]
    text = reference.describe_diff(reference.fingerprint_diff(GPU_FP, run))
    assert text is not None and "gemm config AITER_CONFIG_GEMM_A8W8_BLOCKSCALE sha256:cdcdcd" \
        in text and "gpu clock limits \"sclk max 2400 MHz\" -> \"sclk max 1900 MHz\"" in text


def test_clocks_at_start_alone_and_an_older_baseline_without_the_stack_say_nothing() -> None:
    warmer = {**GPU_FP, "gpu_clocks": {**GPU_FP["gpu_clocks"], "sclk_mhz": [2100] * 8}}
    assert reference.fingerprint_diff(GPU_FP, warmer) == []
    older = {k: v for k, v in GPU_FP.items()
             if k not in ("aiter", "aiter_commit", "hipblaslt", "triton", "image_digest",
                          "gemm_configs", "gpu_clocks")}
    assert reference.fingerprint_diff(older, GPU_FP) == []
