#!/usr/bin/env python3
"""Decide whether premerge's GPU tier runs for an sglang change: print `run=true|false` and
`why=...` (lines for $GITHUB_OUTPUT).

The GPU tier books two 8-GPU runners for 3-4 hours; it runs only when the change can move what
it measures (TTFT / TPOT of the served GLM model, or exact chunk fill), i.e. when

1. the caller forces it (`--force true`: premerge.yml's `force_gpu` input), or
2. the pull request carries the label (`--label`, default `run-servegate-gpu`), or
3. a file changed between the two trees measured matches a pattern of WATCHED below.

The changed files are the difference between the trees `servegate ab` measures: DEST/base and
DEST/head as ci/lib/sglang-trees.sh checked them out (`--trees DEST`), with renames split into
the deleted and the added path (a file moved into or out of a watched folder counts). For the
default base (the merge base) that is exactly `git diff BASE...HEAD`. `--changed-files FILE`
(one path a line, `-` for stdin) reads a list instead.

    ci/lib/gpu-tier-trigger.py (--trees DEST | --changed-files FILE)
        [--labels-json JSON] [--label NAME] [--force true|false]

Exit 0 with the decision on stdout; 2 when the changed files cannot be read (an infra error:
the job fails rather than guessing). Standard library only: it runs before anything is
installed.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

DEFAULT_LABEL = "run-servegate-gpu"

# Paths are relative to the root of the upstream sglang repository (github.com/sgl-project/sglang),
# where the package is python/sglang/ (the wheel's sglang/). `**` matches any number of folders
# (none included), `*` anything within one path segment. docker/ and sgl-kernel/ are top-level
# folders of the repository that the wheel does not contain. Globs checked against the sglang
# 0.5.23 layout (tests/unit/ci/test_ci_gpu_tier_trigger.py names a file under each).
# Each group: (name, why it can move TTFT / TPOT or exact fill, patterns).
WATCHED: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("scheduler and token budget",
     "the scheduler decides what each forward batch holds: schedule_policy.py's PrefillAdder is "
     "exact chunk fill itself, the batch, overlap, chunked-prefill and delayer code set TTFT, and "
     "the tokenizer/detokenizer managers sit on every request's path; the KV pool allocators "
     "and prefix caches set the token budget the PrefillAdder fills; environ.py holds "
     "SGLANG_EXACT_CHUNK_FILL and the other defaults these read",
     ("python/sglang/srt/managers/**",
      "python/sglang/srt/mem_cache/**",
      "python/sglang/srt/environ.py")),
    ("model runner",
     "runs every forward pass: forward-batch construction, HIP/CUDA graphs (decode step time is "
     "TPOT), padding of the batch the scheduler filled",
     ("python/sglang/srt/model_executor/**",)),
    ("attention, GEMM and MoE backends and kernels",
     "the time of each prefill chunk and decode step: the attention backends (aiter, the DSA / "
     "NSA indexer and tilelang backends the GLM profile pins), MoE, the MXFP4 / FP8 quantized "
     "GEMMs, the linear layers, and the kernels under them (exact fill exists to hand these "
     "GEMMs an aligned M)",
     ("python/sglang/srt/layers/attention/**",
      "python/sglang/srt/layers/moe/**",
      "python/sglang/srt/layers/quantization/**",
      "python/sglang/srt/layers/linear.py",
      "python/sglang/kernels/**",
      # top level of the repository, not in the wheel; a compiled package the runner image
      # provides: a change is measured only once it is in the image (see docs/ci.md)
      "sgl-kernel/**")),
    ("served models",
     "the model code this suite serves: GLM-5.2 is GlmMoeDsaForCausalLM (models/glm4_moe.py), "
     "a DeepseekV2ForCausalLM subclass, so the DeepSeek code and the model config that detects "
     "DSA are its forward pass too",
     ("python/sglang/srt/models/glm*.py",
      "python/sglang/srt/models/deepseek*.py",
      "python/sglang/srt/models/deepseek_common/**",
      "python/sglang/srt/configs/model_config.py")),
    ("server arguments",
     "defaults and per-model overrides (chunked prefill size, memory fraction, backends, CUDA "
     "graph batch sizes) decide the budget and the kernels the server runs with",
     ("python/sglang/srt/server_args.py",
      "python/sglang/srt/arg_groups/**")),
    ("ROCm runner image",
     "the ROCm image's aiter / triton / torch versions set every kernel's speed (top level of "
     "the repository, not in the wheel; the GPU tier runs a pinned image, so a change here is "
     "measured once the image is rebuilt from it)",
     ("docker/*rocm*",
      "docker/**/*rocm*")),
)


def glob_regex(pattern: str) -> re.Pattern[str]:
    """A path glob as a regex: `**/` any folders (none included), `**` anything, `*` and `?`
    within one path segment."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


_COMPILED = [(rank, name, glob_regex(pattern))
             for rank, (name, _why, patterns) in enumerate(WATCHED) for pattern in patterns]


def watched_group(path: str) -> tuple[int, str] | None:
    """(rank in WATCHED, name) of the first group whose pattern matches PATH, else None."""
    for rank, name, regex in _COMPILED:
        if regex.match(path):
            return rank, name
    return None


def decide(changed: list[str], labels: list[str], label: str = DEFAULT_LABEL,
           force: bool = False) -> tuple[bool, str]:
    """(run, why): why is one line naming the reason (the force, the label, the first watched
    file with its group, or how many files changed instead and one of them)."""
    if force:
        return True, "forced by the caller (force_gpu input)"
    if label in labels:
        return True, f"the pull request carries the label {label}"
    files = sorted(dict.fromkeys(p for p in changed if p))
    # the file named is the first of the highest group in WATCHED (a scheduler change before a
    # Dockerfile), then by path
    hits = sorted((group, path) for path in files if (group := watched_group(path)) is not None)
    if hits:
        (_rank, group), path = hits[0]
        more = f" (and {len(hits) - 1} more watched file{'s' if len(hits) > 2 else ''})" \
            if len(hits) > 1 else ""
        return True, f"{path} changed ({group}){more}"
    if not files:
        return False, "no file changed between base and head (0 files)"
    return False, (f"no file on the exact-fill/serving path changed: {len(files)} "
                   f"file{'s' if len(files) != 1 else ''}, e.g. {files[0]}")


def changed_in_trees(trees: Path) -> list[str]:
    """Paths that differ between TREES/base and TREES/head (renames as delete + add)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(trees / "head"), *args], check=True,
                              capture_output=True, text=True).stdout

    base = subprocess.run(["git", "-C", str(trees / "base"), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    out = git("diff", "--name-only", "--no-renames", "-z", base, "HEAD")
    return [p for p in out.split("\0") if p]


def parse_labels(text: str) -> list[str]:
    """Label names from JSON: a list of names (`toJSON(github.event.pull_request.labels.*.name)`)
    or of label objects ({"name": ...}); null or empty means none."""
    if not text.strip():
        return []
    data = json.loads(text)
    if data is None:
        return []
    if not isinstance(data, list):
        raise ValueError(f"labels: expected a JSON list, got {type(data).__name__}")
    return [str(item.get("name", "") if isinstance(item, dict) else item) for item in data]


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no", ""):
        return False
    raise ValueError(f"--force: expected true or false, got {text!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="ci/lib/gpu-tier-trigger.py",
                                     description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--trees", type=Path, help="DEST of ci/lib/sglang-trees.sh (base/, head/)")
    source.add_argument("--changed-files", help="a file of changed paths, one a line (- = stdin)")
    parser.add_argument("--labels-json", default="", help="the pull request's labels as JSON")
    parser.add_argument("--label", default=DEFAULT_LABEL, help="the label that forces the tier")
    parser.add_argument("--force", default="false", help="true: run whatever changed")
    args = parser.parse_args(argv)
    try:
        force = parse_bool(args.force)
        labels = parse_labels(args.labels_json)
        if args.trees is not None:
            changed = changed_in_trees(args.trees)
        elif args.changed_files == "-":
            changed = sys.stdin.read().splitlines()
        else:
            changed = Path(args.changed_files).read_text().splitlines()
    except subprocess.CalledProcessError as exc:
        detail = (exc.stderr or "").strip().splitlines()
        print(f"[gpu-tier-trigger] error: {' '.join(exc.cmd)}: "
              f"{detail[-1] if detail else f'exit {exc.returncode}'}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as exc:
        print(f"[gpu-tier-trigger] error: {exc}", file=sys.stderr)
        return 2
    run, why = decide(changed, labels, label=args.label, force=force)
    why = " ".join(why.split())   # one line: $GITHUB_OUTPUT takes key=value lines
    print(f"run={'true' if run else 'false'}")
    print(f"why={why}")
    print(f"changed_files={len({p for p in changed if p})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
