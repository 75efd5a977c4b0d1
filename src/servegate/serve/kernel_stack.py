"""The kernel stack under sglang, read once at the start of a run for the fingerprint (why, and
where each field comes from: docs/serve.md, The fingerprint's kernel stack). Every source is a
named file, environment variable or argv list; a missing tool records nothing."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from servegate.core.stack import GEMM_CONFIGS, GPU_CLOCKS, uniform

VERSIONS_TXT = Path("/app/versions.txt")
# component -> its distribution names, the first installed wins
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "aiter": ("amd-aiter", "aiter"), "triton": ("triton", "pytorch-triton-rocm", "triton-rocm"),
    "tilelang": ("tilelang",)}
IMAGE_COMMIT_ENV = {"aiter": "AITER_COMMIT", "triton": "TRITON_COMMIT", "tilelang": "TILELANG_COMMIT"}
VERSIONS_TXT_KEYS = {"aiter": "AITER_BRANCH", "triton": "TRITON_BRANCH", "hipblaslt": "HIPBLASLT_BRANCH"}
GEMM_CONFIG_ENV_PREFIX = "AITER_CONFIG_GEMM_"
TUNING_FILE_ENVS = ("HIPBLASLT_TUNING_FILE",)
IMAGE_DIGEST_ENV = "SERVEGATE_IMAGE_DIGEST"
AMD_SMI_CLOCKS = ["amd-smi", "metric", "--clock", "--json"]
ROCM_SMI_CLOCKS = ["rocm-smi", "--showclocks", "--json"]
AMD_SMI_VBIOS = ["amd-smi", "static", "--vbios", "--json"]
NVIDIA_SMI_VBIOS = ["nvidia-smi", "--query-gpu=vbios_version", "--format=csv,noheader"]
NVIDIA_SMI_CLOCKS = ["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem",
                     "--format=csv,noheader,nounits"]
_HEX = re.compile(r"^[0-9a-f]{7,40}$")
_LOCAL_COMMIT = re.compile(r"^g(?:it)?([0-9a-f]{7,40})$")


def installed_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return ""


def installed_direct_url(name: str) -> str:
    try:
        return importlib.metadata.distribution(name).read_text("direct_url.json") or ""
    except importlib.metadata.PackageNotFoundError:
        return ""


@dataclass(frozen=True)
class Probe:
    """What the stack is read through: this machine by default; tests pass recorded outputs
    (the GPU boundary's test double, tests/data/kernel_stack)."""

    run: Callable[[list[str]], str]           # argv -> stdout, "" when absent or failed
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    version: Callable[[str], str] = installed_version          # distribution -> version
    direct_url: Callable[[str], str] = installed_direct_url    # -> direct_url.json text
    versions_txt: Path = VERSIONS_TXT

    def rocm_root(self) -> Path:
        return Path(self.env.get("ROCM_PATH") or self.env.get("ROCM_HOME") or "/opt/rocm")


def read_text(path: Path) -> str:
    """A file's text (a stray byte replaced); "" when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


# ---------------------------------------------------------------- parsers (pure)


def parse_versions_txt(text: str) -> dict[str, str]:
    """``KEY: value`` lines of vLLM's ROCm base image's ``/app/versions.txt``."""
    found = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and re.fullmatch(r"[A-Z][A-Z0-9_]*", key.strip()) and value.strip():
            found[key.strip()] = value.strip()
    return found


def parse_hipblaslt_header(text: str) -> tuple[str, str]:
    """(``major.minor.patch``, the TWEAK commit) of hipblaslt-version.h; "" for what is not
    there (a TWEAK of 0 or a non-hex word is no commit)."""
    parts = dict(re.findall(r"#define\s+HIPBLASLT_VERSION_(MAJOR|MINOR|PATCH|TWEAK)\s+(\S+)", text))
    if not all(part in parts for part in ("MAJOR", "MINOR", "PATCH")):
        return "", ""
    tweak = parts.get("TWEAK", "").lower()
    return (f"{parts['MAJOR']}.{parts['MINOR']}.{parts['PATCH']}",
            tweak if _HEX.match(tweak) else "")


def commit_from_version(version: str) -> str:
    """The git hash in a version's local part: ``0.1.7.dev3+gc16d44b93`` -> ``c16d44b93``,
    ``3.7.0+amd.rocm7.2.0.git89002410`` -> ``89002410``; "" when there is none."""
    _, plus, local = version.partition("+")
    for segment in local.split(".") if plus else ():
        found = _LOCAL_COMMIT.match(segment.lower())
        if found:
            return found.group(1)
    return ""


def vcs_commit(direct_url: str) -> str:
    """pip's ``direct_url.json`` ``vcs_info.commit_id`` (a ``pip install git+...``)."""
    try:
        data = json.loads(direct_url) if direct_url else {}
    except ValueError:
        return ""
    vcs = data.get("vcs_info") if isinstance(data, dict) else None
    commit = vcs.get("commit_id") if isinstance(vcs, dict) else None
    return commit if isinstance(commit, str) else ""


def _json(text: str) -> Any:
    """The JSON document of a tool's output, from the first line that opens one (the SMI tools
    may print warnings first); None when there is none."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.lstrip().startswith(("{", "[")):
            try:
                return json.loads("\n".join(lines[index:]))
            except ValueError:
                continue
    return None


def _mhz(value: Any) -> int | None:
    """``{"value": 2100, "unit": "MHz"}``, a bare number, or "N/A" (None)."""
    if isinstance(value, Mapping):
        value = value.get("value")
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return int(value)


def _first_domain(clock: Mapping[str, Any], prefix: str) -> Mapping[str, Any]:
    """The first ``<prefix>_<n>`` entry with a current clock (gfx_0 on every XCD-0 part)."""
    entries = sorted((str(k).lower(), v) for k, v in clock.items()
                     if str(k).lower().startswith(f"{prefix}_") and isinstance(v, Mapping))
    return next((v for _, v in entries if _mhz(v.get("clk")) is not None), {})


def _clocks(rows: list[dict[str, int | None]], tool: str) -> dict[str, Any] | None:
    """Per-GPU lists, a key only when every GPU reported it."""
    if not rows:
        return None
    out: dict[str, Any] = {"tool": tool}
    for key in ("sclk_mhz", "mclk_mhz", "sclk_max_mhz", "mclk_max_mhz"):
        values = [row.get(key) for row in rows]
        if all(v is not None for v in values):
            out[key] = values
    return out if len(out) > 1 else None


def parse_amd_smi_clocks(text: str) -> dict[str, Any] | None:
    """GPU clocks from ``amd-smi metric --clock --json`` (list or ``{"gpu_data": [...]}``)."""
    data = _json(text)
    gpus = data.get("gpu_data") if isinstance(data, dict) else data
    rows = []
    for gpu in gpus if isinstance(gpus, list) else ():
        clock = gpu.get("clock") if isinstance(gpu, Mapping) else None
        if not isinstance(clock, Mapping):
            continue
        gfx, mem = _first_domain(clock, "gfx"), _first_domain(clock, "mem")
        rows.append({"sclk_mhz": _mhz(gfx.get("clk")), "sclk_max_mhz": _mhz(gfx.get("max_clk")),
                     "mclk_mhz": _mhz(mem.get("clk")), "mclk_max_mhz": _mhz(mem.get("max_clk"))})
    return _clocks(rows, "amd-smi")


def parse_rocm_smi_clocks(text: str) -> dict[str, Any] | None:
    """Current clocks from ``rocm-smi --showclocks --json`` (it reports no caps); warnings
    printed before the JSON are skipped."""
    data = _json(text)
    if not isinstance(data, dict):
        return None

    def speed(card: Mapping[str, Any], name: str) -> int | None:
        found = re.search(r"(\d+)\s*mhz", str(card.get(f"{name} clock speed:", "")), re.I)
        return int(found.group(1)) if found else None

    cards = sorted((k for k in data if re.fullmatch(r"card\d+", k)), key=lambda k: int(k[4:]))
    rows = [{"sclk_mhz": speed(data[k], "sclk"), "mclk_mhz": speed(data[k], "mclk")}
            for k in cards if isinstance(data[k], Mapping)]
    return _clocks(rows, "rocm-smi")


def parse_nvidia_smi_clocks(text: str) -> dict[str, Any] | None:
    """``sm, mem, max sm, max mem`` per line (``--format=csv,noheader,nounits``)."""
    rows = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != 4:
            continue
        numbers = [int(c) if c.isdigit() else None for c in cells]
        rows.append(dict(zip(("sclk_mhz", "mclk_mhz", "sclk_max_mhz", "mclk_max_mhz"), numbers,
                             strict=True)))
    return _clocks(rows, "nvidia-smi")


def parse_amd_smi_vbios(text: str) -> str:
    """Each GPU's VBIOS ``version`` (else ``part_number``) from ``amd-smi static --vbios
    --json`` (a list, or ``{"gpu_data": [...]}``)."""
    data = _json(text)
    gpus = data.get("gpu_data") if isinstance(data, dict) else data
    found = []
    for gpu in gpus if isinstance(gpus, list) else ():
        vbios = gpu.get("vbios") if isinstance(gpu, Mapping) else None
        if isinstance(vbios, Mapping) and (vbios.get("version") or vbios.get("part_number")):
            found.append(str(vbios.get("version") or vbios["part_number"]))
    return uniform(found) or ""


def gpu_vbios(run: Callable[[list[str]], str]) -> str:
    """The GPUs' VBIOS from the first vendor tool that answers ("" when none does)."""
    return parse_amd_smi_vbios(run(AMD_SMI_VBIOS)) or uniform(
        [line.strip() for line in run(NVIDIA_SMI_VBIOS).splitlines() if line.strip()]) or ""


# ---------------------------------------------------------------- reading the machine


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def gemm_config_hashes(env: Mapping[str, str]) -> dict[str, str]:
    """``{variable: sha256}`` of the tuned GEMM config files the environment names (several
    paths joined by ``:``: the hash of their hashes, in order); ``"missing"`` for a path that is
    not a readable file (aiter then runs without it)."""
    names = sorted(var for var in env if var.startswith(GEMM_CONFIG_ENV_PREFIX))
    out = {}
    for var in [*names, *(v for v in TUNING_FILE_ENVS if v in env)]:
        paths = [Path(p) for p in env[var].split(os.pathsep) if p.strip()]
        if not paths:
            continue
        try:
            hashes = [file_sha256(path) for path in paths]
        except OSError:
            out[var] = "missing"
            continue
        out[var] = hashes[0] if len(hashes) == 1 else hashlib.sha256(
            "\n".join(hashes).encode()).hexdigest()
    return out


def image_digest(env: Mapping[str, str], image: str | None) -> str:
    """``sha256:...`` of the image: named outright, or pinned in its reference (``repo@sha256:``)."""
    if env.get(IMAGE_DIGEST_ENV):
        return env[IMAGE_DIGEST_ENV]
    _, at, digest = (image or "").partition("@")
    return digest if at and digest.startswith("sha256:") else ""


def _commit(component: str, probe: Probe, image_versions: Mapping[str, str],
            distribution: str, version: str) -> str:
    env_var = IMAGE_COMMIT_ENV.get(component)
    if env_var and probe.env.get(env_var):
        return probe.env[env_var]
    key = VERSIONS_TXT_KEYS.get(component)
    if key and image_versions.get(key):
        return image_versions[key]
    if distribution and (found := vcs_commit(probe.direct_url(distribution))):
        return found
    return commit_from_version(version)


def gpu_clocks(run: Callable[[list[str]], str]) -> dict[str, Any] | None:
    """The clocks at start from the first vendor tool that answers."""
    return (parse_amd_smi_clocks(run(AMD_SMI_CLOCKS)) or parse_rocm_smi_clocks(run(ROCM_SMI_CLOCKS))
            or parse_nvidia_smi_clocks(run(NVIDIA_SMI_CLOCKS)))


def collect(probe: Probe, *, image: str | None = None, on_gpu: bool = True) -> dict[str, Any]:
    """The fingerprint's kernel stack fields (only those found): aiter / triton / tilelang
    versions and commits, hipBLASLt's, the image digest, the GEMM config hashes and, on a GPU
    runner, the clocks at start and the VBIOS."""
    fp: dict[str, Any] = {}
    image_versions = parse_versions_txt(read_text(probe.versions_txt))
    for component, names in DISTRIBUTIONS.items():
        distribution, version = next(((n, v) for n in names if (v := probe.version(n))), ("", ""))
        if version:
            fp[component] = version
            if commit := _commit(component, probe, image_versions, distribution, version):
                fp[f"{component}_commit"] = commit
    header = read_text(probe.rocm_root() / "include" / "hipblaslt" / "hipblaslt-version.h")
    version, commit = parse_hipblaslt_header(header)
    if version:
        fp["hipblaslt"] = version
        if commit := commit or image_versions.get(VERSIONS_TXT_KEYS["hipblaslt"], ""):
            fp["hipblaslt_commit"] = commit
    found = {"image_digest": image_digest(probe.env, image),
             GEMM_CONFIGS: gemm_config_hashes(probe.env),
             GPU_CLOCKS: gpu_clocks(probe.run) if on_gpu else None,
             "gpu_vbios": gpu_vbios(probe.run) if on_gpu else ""}
    fp.update({key: value for key, value in found.items() if value})
    return fp
