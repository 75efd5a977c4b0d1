"""servegate.serve.kernel_stack: the kernel stack in a GPU run's fingerprint (issue 32 item 3).

The GPU boundary is replayed from outputs kept under tests/data/kernel_stack (its README says
what each stands for): amd-smi / rocm-smi / nvidia-smi answers, ``pip inspect`` of an sglang ROCm
image, that image's ENV, hipBLASLt's version header and vLLM's ``/app/versions.txt``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from fake_torch import FakeTorch
from repo_files import TEST_DATA

from servegate.serve import detect, kernel_stack
from servegate.serve.kernel_stack import Probe

DATA = TEST_DATA / "kernel_stack"
MI355X = detect.Detected("mi355x", "torch", "AMD Instinct MI355X", "gfx950", 8)
SECRET = "hf_secretsecretsecret"


def recorded_pip(name: str = "pip-inspect-sglang-rocm700-mi35x.json") -> tuple[Any, Any]:
    """``version`` / ``direct_url`` lookups answering from a recorded ``pip inspect``."""
    installed = {d["metadata"]["name"]: d for d in
                 json.loads((DATA / name).read_text())["installed"]}

    def version(dist: str) -> str:
        return installed[dist]["metadata"]["version"] if dist in installed else ""

    def direct_url(dist: str) -> str:
        found = installed.get(dist, {}).get("direct_url")
        return json.dumps(found) if found else ""

    return version, direct_url


def image_env() -> dict[str, str]:
    pairs = json.loads((DATA / "docker-inspect-env-sglang-rocm700-mi35x.json").read_text())
    return dict(pair.split("=", 1) for pair in pairs)


def replay(outputs: dict[str, str], calls: list[list[str]]) -> Any:
    """A vendor-tool runner answering each argv (by its first two words, else its first) from a
    recorded file."""
    def run(argv: list[str]) -> str:
        calls.append(argv)
        name = outputs.get(" ".join(argv[:2])) or outputs.get(argv[0])
        return (DATA / name).read_text() if name else ""
    return run


def rocm_root(tmp_path: Path) -> Path:
    include = tmp_path / "rocm" / "include" / "hipblaslt"
    include.mkdir(parents=True)
    (include / "hipblaslt-version.h").write_text((DATA / "hipblaslt-version.h").read_text())
    return tmp_path / "rocm"


def gfx950_probe(tmp_path: Path, calls: list[list[str]], **env: str) -> Probe:
    version, direct_url = recorded_pip()
    return Probe(run=replay({"amd-smi metric": "amd-smi-metric-clock-mi355x.json",
                             "amd-smi static": "amd-smi-static-vbios-mi355x.json"}, calls),
                 env={**image_env(), "ROCM_PATH": str(rocm_root(tmp_path)), **env},
                 version=version, direct_url=direct_url, versions_txt=tmp_path / "absent.txt")


def test_a_gpu_runs_fingerprint_carries_the_kernel_stack(monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path) -> None:
    configs = tmp_path / "configs"
    configs.mkdir()
    blockscale = configs / "a8w8_blockscale_tuned_gemm.csv"
    blockscale.write_text("cu_num,M,N,K,kernelId,splitK,us,kernelName\n256,16384,7168,2048,"
                          "12,0,155.8,a8w8_blockscale_1x128x128_256x128x128\n")
    tuning = configs / "hipblaslt_tuning.txt"
    tuning.write_text("HIPBLASLT_TUNING 1\n")
    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setenv("SERVEGATE_IMAGE", "rocm/sgl-dev:v0.5.23-rocm700-mi35x@sha256:" + "ab" * 32)
    calls: list[list[str]] = []
    probe = gfx950_probe(tmp_path, calls, HF_TOKEN=SECRET,
                         AITER_CONFIG_GEMM_A8W8_BLOCKSCALE=str(blockscale),
                         HIPBLASLT_TUNING_FILE=str(tuning))
    monkeypatch.setattr(detect, "_driver", lambda: "amdgpu 6.14.14")
    fp = detect.fingerprint(MI355X, "amd/GLM-5.2-MXFP4", torch_module=FakeTorch(hip="7.0.51831"),
                            probe=probe)
    # versions from pip's metadata; commits from the image's ENV, pip's VCS record, the version
    assert fp["aiter"] == "0.1.7.post2.dev52+gc16d44b93"
    assert fp["aiter_commit"] == "c16d44b93a528b2a4bfd6d8d3409116d465872a9"     # ENV AITER_COMMIT
    assert (fp["triton"], fp["triton_commit"]) == ("3.4.0+amd.rocm7.0.0.gitf9e5bf54", "f9e5bf54")
    assert (fp["tilelang"], fp["tilelang_commit"]) == (
        "0.1.6.post1", "a55a82302bf7f3c5af635b5c9146f728185cc900")
    assert (fp["hipblaslt"], fp["hipblaslt_commit"]) == ("1.0.0", "5a6f3b2e1c")
    assert fp["image_digest"] == "sha256:" + "ab" * 32
    assert fp["gemm_configs"] == {
        "AITER_CONFIG_GEMM_A8W8_BLOCKSCALE": hashlib.sha256(blockscale.read_bytes()).hexdigest(),
        "HIPBLASLT_TUNING_FILE": hashlib.sha256(tuning.read_bytes()).hexdigest()}
    assert fp["gpu_clocks"] == {"tool": "amd-smi",
                                "sclk_mhz": [132, 141, 132, 128, 135, 132, 139, 130],
                                "sclk_max_mhz": [2400] * 8, "mclk_mhz": [1600] * 8,
                                "mclk_max_mhz": [1600] * 8}
    # the existing fields are untouched, the tools were asked through argv lists, no secret kept
    assert (fp["rocm"], fp["driver"], fp["gpu_count"]) == ("7.0.51831", "amdgpu 6.14.14", 8)
    assert fp["gpu_vbios"] == "022.050.000.011.000001"          # one: every GPU agrees
    assert calls == [kernel_stack.AMD_SMI_CLOCKS, kernel_stack.AMD_SMI_VBIOS]
    assert SECRET not in json.dumps(fp) and str(configs) not in json.dumps(fp)


def test_a_cpu_run_asks_no_clock_tool_and_records_only_what_is_installed(
        tmp_path: Path) -> None:
    calls: list[list[str]] = []
    version, direct_url = recorded_pip()
    probe = Probe(run=replay({"amd-smi": "amd-smi-metric-clock-mi355x.json"}, calls), env={},
                  version=lambda d: version(d) if d == "triton" else "", direct_url=direct_url,
                  versions_txt=tmp_path / "absent.txt")
    fp = detect.fingerprint(detect.Detected("cpu", "override"), "m", torch_module=None,
                            probe=probe)
    assert calls == []
    assert "gpu_clocks" not in fp and "aiter" not in fp and "hipblaslt" not in fp
    assert fp["triton"] == "3.4.0+amd.rocm7.0.0.gitf9e5bf54"
    assert "image_digest" not in fp and "gemm_configs" not in fp


def test_the_profiles_server_env_names_the_gemm_config_in_use(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    config = tmp_path / "bf16_tuned_gemm.csv"
    config.write_text("M,N,K\n")
    monkeypatch.setattr(detect, "_run", lambda argv: "")
    monkeypatch.delenv("AITER_CONFIG_GEMM_BF16", raising=False)
    fp = detect.fingerprint(detect.Detected("cpu", "override"), "m", torch_module=None,
                            server_env={"AITER_CONFIG_GEMM_BF16": str(config)})
    assert fp["gemm_configs"] == {
        "AITER_CONFIG_GEMM_BF16": hashlib.sha256(config.read_bytes()).hexdigest()}


def test_the_vbios_is_each_gpus_when_they_differ_and_nvidia_smi_answers_without_amd_smi(
        ) -> None:
    text = (DATA / "amd-smi-static-vbios-mi355x.json").read_text()
    gpus = json.loads(text)
    gpus[3]["vbios"] = {"part_number": "113-M3550100-103"}          # no version: its part
    mixed = kernel_stack.parse_amd_smi_vbios(json.dumps({"gpu_data": gpus[2:5]}))
    assert mixed == "022.050.000.011.000001/113-M3550100-103/022.050.000.011.000001"
    assert kernel_stack.parse_amd_smi_vbios("WARNING: not root\n" + text) == \
        "022.050.000.011.000001"
    assert kernel_stack.parse_amd_smi_vbios('[{"gpu": 0, "vbios": {"name": "x"}}]') == ""
    calls: list[list[str]] = []
    nvidia = {"nvidia-smi": "96.00.74.00.1C\n96.00.74.00.1C\n"}
    assert kernel_stack.gpu_vbios(lambda argv: calls.append(argv) or nvidia.get(argv[0], "")
                                  ) == "96.00.74.00.1C"
    assert calls == [kernel_stack.AMD_SMI_VBIOS, kernel_stack.NVIDIA_SMI_VBIOS]


# ---------------------------------------------------------------- clocks


def test_clocks_come_from_the_first_tool_that_answers() -> None:
    calls: list[list[str]] = []
    rocm = kernel_stack.gpu_clocks(replay({"rocm-smi": "rocm-smi-showclocks.txt"}, calls))
    assert rocm == {"tool": "rocm-smi", "sclk_mhz": [132, 133], "mclk_mhz": [1300, 1300]}
    assert calls == [kernel_stack.AMD_SMI_CLOCKS, kernel_stack.ROCM_SMI_CLOCKS]
    nvidia = kernel_stack.gpu_clocks(replay({"nvidia-smi": "nvidia-smi-clocks.csv"}, []))
    assert nvidia == {"tool": "nvidia-smi", "sclk_mhz": [345, 345], "mclk_mhz": [3201, 3201],
                      "sclk_max_mhz": [1980, 1980], "mclk_max_mhz": [3201, 3201]}
    assert kernel_stack.gpu_clocks(replay({}, [])) is None


def test_rocm6_amd_smi_list_with_upper_case_engines_and_bare_numbers() -> None:
    text = (DATA / "amd-smi-metric-clock-mi300x-rocm6.json").read_text()
    assert kernel_stack.parse_amd_smi_clocks(text) == {
        "tool": "amd-smi", "sclk_mhz": [113, 114], "sclk_max_mhz": [2100, 2100],
        "mclk_mhz": [900, 900], "mclk_max_mhz": [1300, 1300]}


def test_a_clock_one_gpu_does_not_report_is_left_out_for_all() -> None:
    gpus = [{"gpu": 0, "clock": {"gfx_0": {"clk": {"value": 140, "unit": "MHz"},
                                           "max_clk": {"value": 2400, "unit": "MHz"}},
                                 "mem_0": {"clk": "N/A", "max_clk": "N/A"}}},
            {"gpu": 1, "clock": {"gfx_0": {"clk": "N/A"},          # XCD 0 idle-gated: gfx_1
                                 "gfx_1": {"clk": {"value": 150, "unit": "MHz"}, "max_clk": 0},
                                 "mem_0": {"clk": 1600, "max_clk": 1600}}}]
    assert kernel_stack.parse_amd_smi_clocks("WARNING: x\n" + json.dumps({"gpu_data": gpus})) \
        == {"tool": "amd-smi", "sclk_mhz": [140, 150]}
    for broken in ("", "not json", "{\"gpu_data\": 3}", "[{\"gpu\": 0}]", "[]"):
        assert kernel_stack.parse_amd_smi_clocks(broken) is None
    assert kernel_stack.parse_rocm_smi_clocks('{"system": {"Driver version": "6.14"}}') is None
    assert kernel_stack.parse_nvidia_smi_clocks("[N/A], [N/A], [N/A], [N/A]\n") is None


# ---------------------------------------------------------------- versions and commits


def test_a_commit_comes_from_env_then_versions_txt_then_pip_then_the_version(
        tmp_path: Path) -> None:
    versions_txt = tmp_path / "versions.txt"
    versions_txt.write_text((DATA / "vllm-rocm-base-versions.txt").read_text())

    def stack(env: dict[str, str], txt: Path, direct: str = "") -> dict[str, Any]:
        probe = Probe(run=lambda argv: "", env=env, versions_txt=txt,
                      version=lambda d: "0.1.10+g1234abcd" if d == "aiter" else "",
                      direct_url=lambda d: direct)
        return kernel_stack.collect(probe, on_gpu=False)

    vcs = json.dumps({"url": "https://github.com/ROCm/aiter", "vcs_info": {"commit_id": "f" * 40}})
    assert stack({"AITER_COMMIT": "v0.1.7"}, versions_txt, vcs)["aiter_commit"] == "v0.1.7"
    assert stack({}, versions_txt, vcs)["aiter_commit"] == "v0.1.10.post3"
    assert stack({}, tmp_path / "none", vcs)["aiter_commit"] == "f" * 40
    assert stack({}, tmp_path / "none")["aiter_commit"] == "1234abcd"
    assert stack({"AITER_COMMIT": ""}, tmp_path / "none", "{bad")["aiter_commit"] == "1234abcd"


def test_commits_in_version_strings() -> None:
    assert kernel_stack.commit_from_version("0.1.7.post2.dev52+gc16d44b93") == "c16d44b93"
    assert kernel_stack.commit_from_version("3.7.0+amd.rocm7.2.0.git89002410") == "89002410"
    for plain in ("2.8.0+rocm7.0", "0.1.6.post1", "1.0+gfx950", "1.0+gZZZZZZZ", ""):
        assert kernel_stack.commit_from_version(plain) == ""


def test_hipblaslt_header_and_a_tweak_that_is_no_commit() -> None:
    header = (DATA / "hipblaslt-version.h").read_text()
    assert kernel_stack.parse_hipblaslt_header(header) == ("1.0.0", "5a6f3b2e1c")
    assert kernel_stack.parse_hipblaslt_header(header.replace("5a6f3b2e1c", "0")) == ("1.0.0", "")
    assert kernel_stack.parse_hipblaslt_header("#define HIPBLASLT_VERSION_MAJOR 1\n") == ("", "")


def test_versions_txt_keys_and_values() -> None:
    found = kernel_stack.parse_versions_txt(
        (DATA / "vllm-rocm-base-versions.txt").read_text() + "PATCH(baked): x.py\nnot a line\n")
    assert found["AITER_BRANCH"] == "v0.1.10.post3" and found["TRITON_BRANCH"] == "ba5c1517"
    assert found["BASE_IMAGE"] == "rocm/dev-ubuntu-22.04:7.2.1-complete"
    assert "PATCH(baked)" not in found and len(found) == 15


# ---------------------------------------------------------------- configs and the image


def test_gemm_config_hashes_follow_the_files_and_name_a_missing_one(tmp_path: Path) -> None:
    first, second = tmp_path / "a.csv", tmp_path / "b.csv"
    first.write_text("M,N,K\n1,2,3\n")
    second.write_text("M,N,K\n4,5,6\n")
    env = {"AITER_CONFIG_GEMM_A4W4": f"{first}:{second}",
           "AITER_CONFIG_GEMM_BF16": str(tmp_path / "gone.csv"),
           "AITER_CONFIG_FMOE": str(first), "HF_TOKEN": SECRET, "AITER_CONFIG_GEMM_A8W8": ""}
    hashes = kernel_stack.gemm_config_hashes(env)
    joined = "\n".join(hashlib.sha256(p.read_bytes()).hexdigest() for p in (first, second))
    assert hashes == {"AITER_CONFIG_GEMM_A4W4": hashlib.sha256(joined.encode()).hexdigest(),
                      "AITER_CONFIG_GEMM_BF16": "missing"}
    second.write_text("M,N,K\n4,5,7\n")             # a retuned file is another config
    assert kernel_stack.gemm_config_hashes(env)["AITER_CONFIG_GEMM_A4W4"] != \
        hashes["AITER_CONFIG_GEMM_A4W4"]


def test_the_image_digest_is_named_or_pinned_in_the_reference() -> None:
    digest = "sha256:" + "0" * 64
    assert kernel_stack.image_digest({"SERVEGATE_IMAGE_DIGEST": digest}, "repo:tag") == digest
    assert kernel_stack.image_digest({}, f"rocm/sgl-dev@{digest}") == digest
    assert kernel_stack.image_digest({}, "rocm/sgl-dev:v0.5.23") == ""
    assert kernel_stack.image_digest({}, None) == ""
