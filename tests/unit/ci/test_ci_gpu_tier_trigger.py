"""ci/lib/gpu-tier-trigger.py: premerge's GPU tier (two 8-GPU runners for 3-4 hours) runs only
when the change can move it — a changed file on the exact-fill/serving path, the label, or a
forced call — and the reason it prints names what decided.

Why: the decision must be right without GitHub: a wrong skip lets a scheduler regression merge
unmeasured, a wrong run books GPUs for a docs change. The globs are checked against sglang's real
layout (a path under each pattern, and the unpacked 0.5.23 wheel when it is in the cache), and
the script end to end on real git trees made by ci/lib/sglang-trees.sh, renames included.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from repo_files import REPO_ROOT

SCRIPT = REPO_ROOT / "ci" / "lib" / "gpu-tier-trigger.py"


TREES_SCRIPT = REPO_ROOT / "ci" / "lib" / "sglang-trees.sh"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_tier_trigger", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


trigger = _load()


# --------------------------------------------------------------------------- the rule

def test_a_scheduler_change_runs_and_names_the_file_and_its_group() -> None:
    run, why = trigger.decide(["docs/x.md", "python/sglang/srt/managers/schedule_policy.py"], [])
    assert run is True
    assert why == "python/sglang/srt/managers/schedule_policy.py changed (scheduler and token budget)"


def test_a_docs_only_change_skips_naming_the_count_and_a_file() -> None:
    run, why = trigger.decide(["docs/advanced_features/server_arguments.md", "README.md",
                               "docs/index.rst"], [])
    assert run is False
    assert why == ("no file on the exact-fill/serving path changed: 3 files, "
                   "e.g. README.md")
    assert trigger.decide(["docs/a.md"], [])[1].endswith(": 1 file, e.g. docs/a.md")


def test_an_empty_diff_skips() -> None:
    assert trigger.decide([], []) == (False, "no file changed between base and head (0 files)")
    assert trigger.decide(["", ""], [])[0] is False


def test_the_label_forces_and_only_that_label() -> None:
    docs = ["docs/a.md"]
    assert trigger.decide(docs, ["documentation", "run-servegate-gpu"]) == (
        True, "the pull request carries the label run-servegate-gpu")
    assert trigger.decide(docs, ["run-ci", "run-servegate"])[0] is False
    assert trigger.decide(docs, ["gpu-please"], label="gpu-please")[0] is True


def test_force_runs_whatever_changed() -> None:
    assert trigger.decide([], [], force=True) == (True, "forced by the caller (force_gpu input)")


def test_the_highest_group_is_named_first_with_the_count_of_the_others() -> None:
    run, why = trigger.decide(["docker/rocm.Dockerfile", "python/sglang/srt/server_args.py",
                               "python/sglang/srt/managers/scheduler.py", "test/x.py"], [])
    assert run is True
    assert why.startswith("python/sglang/srt/managers/scheduler.py changed "
                          "(scheduler and token budget)")
    assert why.endswith("(and 2 more watched files)")


# One real path of sglang (0.5.23; upstream repository layout) under every pattern, and paths
# beside them that must not trigger.
WATCHED_PATHS = {
    "python/sglang/srt/managers/**": "python/sglang/srt/managers/scheduler_components/"
                                     "dynamic_chunk_sizer.py",
    "python/sglang/srt/mem_cache/**": "python/sglang/srt/mem_cache/prefill_budget.py",
    "python/sglang/srt/environ.py": "python/sglang/srt/environ.py",
    "python/sglang/srt/model_executor/**": "python/sglang/srt/model_executor/model_runner.py",
    "python/sglang/srt/layers/attention/**": "python/sglang/srt/layers/attention/dsa/"
                                             "dsa_indexer.py",
    "python/sglang/srt/layers/moe/**": "python/sglang/srt/layers/moe/fused_moe_triton/layer.py",
    "python/sglang/srt/layers/quantization/**": "python/sglang/srt/layers/quantization/mxfp4.py",
    "python/sglang/srt/layers/linear.py": "python/sglang/srt/layers/linear.py",
    "python/sglang/kernels/**": "python/sglang/kernels/ops/moe/__init__.py",
    "sgl-kernel/**": "sgl-kernel/csrc/moe/moe_align_kernel.cu",
    "python/sglang/srt/models/glm*.py": "python/sglang/srt/models/glm4_moe.py",
    "python/sglang/srt/models/deepseek*.py": "python/sglang/srt/models/deepseek_v2.py",
    "python/sglang/srt/models/deepseek_common/**": "python/sglang/srt/models/deepseek_common/"
                                                   "utils.py",
    "python/sglang/srt/configs/model_config.py": "python/sglang/srt/configs/model_config.py",
    "python/sglang/srt/server_args.py": "python/sglang/srt/server_args.py",
    "python/sglang/srt/arg_groups/**": "python/sglang/srt/arg_groups/moe_hook.py",
    "docker/*rocm*": "docker/rocm.Dockerfile",
    "docker/**/*rocm*": "docker/amd/Dockerfile.rocm",
}


NOT_WATCHED = [
    "docs/backend/server_arguments.md",
    "README.md",
    "test/srt/test_schedule_policy.py",            # tests move nothing that is served
    "python/sglang/srt/models/llama.py",           # a model this suite does not serve
    "python/sglang/srt/models/chatglm.py",         # glm* is the file name's start
    "python/sglang/srt/layers/linear_utils.py",
    "python/sglang/srt/entrypoints/openai/serving_chat.py",
    "python/sglang/lang/interpreter.py",
    "docker/Dockerfile",                           # the CUDA image
    "sgl-router/src/lib.rs",
    ".github/workflows/pr-test-amd.yml",
]


def test_every_pattern_has_a_real_path_and_the_paths_beside_them_do_not_trigger() -> None:
    patterns = [p for _name, _why, group in trigger.WATCHED for p in group]
    assert sorted(patterns) == sorted(WATCHED_PATHS)
    for pattern, path in WATCHED_PATHS.items():
        assert trigger.glob_regex(pattern).match(path), (pattern, path)
        assert trigger.watched_group(path) is not None, path
    for path in NOT_WATCHED:
        assert trigger.watched_group(path) is None, path


def test_every_group_says_why_it_can_move_the_measurement() -> None:
    names = [name for name, _why, _patterns in trigger.WATCHED]
    assert len(names) == len(set(names))
    for name, why, patterns in trigger.WATCHED:
        assert patterns and len(why) > 40, name


def test_glob_semantics() -> None:
    deep = trigger.glob_regex("a/**/b*")
    assert deep.match("a/b1") and deep.match("a/x/y/b2")
    assert not deep.match("a/x/c/b/z")                  # * stays in one segment
    assert trigger.glob_regex("a/**").match("a/x/y.py")
    assert not trigger.glob_regex("a/*.py").match("a/x/y.py")
    assert not trigger.glob_regex("a/b.py").match("a/bxpy")   # the dot is literal
    assert not trigger.glob_regex("a/b.py").match("a/b.py.orig")


def _release_tree() -> Path:
    from servegate.serve import envbuild

    tree = envbuild.cache_root() / "trees" / "sglang-0.5.23"
    if not (tree / "sglang" / "srt" / "managers" / "schedule_policy.py").is_file():
        pytest.skip(f"{tree}: the unpacked sglang 0.5.23 wheel is not in the cache")
    return tree


def test_the_python_patterns_match_files_of_the_released_package() -> None:
    """The wheel holds python/sglang/ as sglang/ (docker/ and sgl-kernel/ are the repository's
    top level, not in it): each python/ pattern matches some file of 0.5.23, and the files
    that carry exact fill (schedule_policy.py, environ.py) are watched."""
    tree = _release_tree()
    files = ["python/" + str(p.relative_to(tree)) for p in (tree / "sglang").rglob("*")
             if p.is_file() and "__pycache__" not in p.parts]
    for _name, _why, patterns in trigger.WATCHED:
        for pattern in patterns:
            if pattern.startswith("python/"):
                regex = trigger.glob_regex(pattern)
                assert any(regex.match(f) for f in files), f"{pattern}: no file in 0.5.23"
    exact_fill = [f for f in files if f.endswith(".py") and
                  "EXACT_CHUNK_FILL" in (tree / f.removeprefix("python/")).read_text(
                      errors="replace")]
    assert exact_fill
    for path in exact_fill:
        assert trigger.watched_group(path), path


# --------------------------------------------------------------------------- the command

def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], input=stdin,
                          capture_output=True, text=True, timeout=60)


def outputs(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert all("=" in line for line in lines), lines       # $GITHUB_OUTPUT lines only
    return dict(line.split("=", 1) for line in lines)


def test_cli_prints_github_output_lines() -> None:
    out = outputs(cli("--changed-files", "-", stdin="docs/a.md\nREADME.md\n"))
    assert out == {"run": "false", "changed_files": "2",
                   "why": "no file on the exact-fill/serving path changed: 2 files, "
                          "e.g. README.md"}
    labels = '["documentation", "run-servegate-gpu"]'
    assert outputs(cli("--changed-files", "-", "--labels-json", labels, stdin="docs/a.md\n"))[
        "run"] == "true"
    # label objects (the event's pull_request.labels), null (no pull request), forced
    objects = '[{"name": "run-servegate-gpu", "color": "ededed"}]'
    assert outputs(cli("--changed-files", "-", "--labels-json", objects, stdin=""))[
        "run"] == "true"
    assert outputs(cli("--changed-files", "-", "--labels-json", "null", stdin=""))[
        "run"] == "false"
    assert outputs(cli("--changed-files", "-", "--force", "true", stdin=""))["run"] == "true"


def test_cli_bad_input_is_an_infra_error(tmp_path: Path) -> None:
    for args in (["--changed-files", str(tmp_path / "missing.txt")],
                 ["--changed-files", "-", "--force", "maybe"],
                 ["--changed-files", "-", "--labels-json", "{not json"],
                 ["--trees", str(tmp_path / "no-trees")]):
        proc = cli(*args, stdin="")
        assert proc.returncode == 2, args
        assert proc.stdout == "" and "[gpu-tier-trigger] error:" in proc.stderr, args


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


def write(repo: Path, rel: str, text: str) -> None:
    (repo / rel).parent.mkdir(parents=True, exist_ok=True)
    (repo / rel).write_text(text)


@pytest.fixture
def sglang_repo(tmp_path: Path) -> Path:
    """An sglang-shaped repository (its main; pr_trees forks the pull request from it)."""
    repo = tmp_path / "sglang"
    git("init", "--quiet", "-b", "main", str(repo), cwd=tmp_path)
    write(repo, "docs/index.md", "docs\n")
    write(repo, "python/sglang/srt/utils/budget_helpers.py", "def fill(): return 1\n")
    write(repo, "python/sglang/srt/managers/tp_worker.py", "worker = 1\n")
    git("add", ".", cwd=repo)
    git("commit", "--quiet", "-m", "base", cwd=repo)
    return repo


def pr_trees(repo: Path, dest: Path, *change: list[str]) -> Path:
    """Branch `pr` from main with CHANGE (git commands, after the files `write` staged), main
    then moves on (a scheduler edit the PR does not contain), trees by ci/lib/sglang-trees.sh."""
    git("checkout", "--quiet", "-B", "pr", "main", cwd=repo)
    for command in change:
        if command[0] == "write":
            write(repo, command[1], command[2])
            command = ["add", command[1]]
        git(*command, cwd=repo)
    git("commit", "--quiet", "--allow-empty", "-m", "pr", cwd=repo)
    git("checkout", "--quiet", "main", cwd=repo)
    write(repo, "python/sglang/srt/managers/schedule_policy.py", "main moved on\n")
    git("add", ".", cwd=repo)
    git("commit", "--quiet", "-m", "main later", cwd=repo)
    proc = subprocess.run(["bash", str(TREES_SCRIPT), str(repo), "pr", "", "main", str(dest)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return dest


def test_trees_a_rename_into_a_watched_folder_runs(sglang_repo: Path, tmp_path: Path) -> None:
    trees = pr_trees(sglang_repo, tmp_path / "trees",
                     ["mv", "python/sglang/srt/utils/budget_helpers.py",
                      "python/sglang/srt/managers/budget_helpers.py"])
    out = outputs(cli("--trees", str(trees)))
    assert out["run"] == "true"
    assert out["why"] == ("python/sglang/srt/managers/budget_helpers.py changed "
                          "(scheduler and token budget)")
    assert out["changed_files"] == "2"      # the rename as delete + add


def test_trees_a_rename_out_of_a_watched_folder_runs(sglang_repo: Path, tmp_path: Path) -> None:
    trees = pr_trees(sglang_repo, tmp_path / "trees",
                     ["mv", "python/sglang/srt/managers/tp_worker.py",
                      "python/sglang/srt/utils/tp_worker.py"])
    out = outputs(cli("--trees", str(trees)))
    assert out["run"] == "true" and "managers/tp_worker.py changed" in out["why"]


def test_trees_docs_only_skips_and_main_moving_on_is_not_the_change(
        sglang_repo: Path, tmp_path: Path) -> None:
    """Base is the merge base: main's later scheduler edit is not between the trees."""
    trees = pr_trees(sglang_repo, tmp_path / "trees", ["write", "docs/index.md", "better\n"])
    out = outputs(cli("--trees", str(trees)))
    assert out == {"run": "false", "changed_files": "1",
                   "why": "no file on the exact-fill/serving path changed: 1 file, "
                          "e.g. docs/index.md"}


def test_trees_an_empty_diff_skips(sglang_repo: Path, tmp_path: Path) -> None:
    trees = pr_trees(sglang_repo, tmp_path / "trees")
    out = outputs(cli("--trees", str(trees)))
    assert out == {"run": "false", "changed_files": "0",
                   "why": "no file changed between base and head (0 files)"}
