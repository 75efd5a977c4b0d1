"""Suites and model profiles: the shipped files load, and bad input names file and key."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from repo_files import REPO_ROOT

from servegate.config import ConfigError, Design, load_profile, load_suite, suite_path

ROOT = REPO_ROOT


MODELS = ROOT / "models"


# suites/cpu.toml before [design] (it still has [suite].repeats, read as [design] starts)
LEGACY_CPU = ROOT / "tests" / "data" / "suites" / "legacy" / "cpu.toml"


def test_shipped_suites_load() -> None:
    cpu = load_suite(suite_path("cpu"))
    assert cpu.model.name == "smollm2-135m"
    assert cpu.runners == ("cpu",)
    assert set(cpu.modes) == {"off", "on", "forced"}
    assert cpu.server_overrides["chunked_prefill_size"] % cpu.server_overrides["page_size"] == 0
    assert cpu.gsm8k_table is not None and set(cpu.gsm8k_table) == {
        "questions", "shots", "concurrency", "max_tokens", "source", "seed"}
    assert cpu.gsm8k is not None and (cpu.gsm8k.questions, cpu.gsm8k.source) == (4, "packaged")
    assert cpu.judge_table is not None and "floors" in cpu.judge_table
    assert cpu.judge.floor("mean_ttft_ms") == cpu.judge_table["floors"]["mean_ttft_ms"]
    assert str(cpu.source) in cpu.judge.source
    effective = cpu.server_for("cpu")
    assert (effective.chunked_prefill_size, effective.page_size) == (
        cpu.server_overrides["chunked_prefill_size"], cpu.server_overrides["page_size"])
    for name in ("premerge", "nightly"):
        suite = load_suite(suite_path(name))
        assert suite.model.path == "amd/GLM-5.2-MXFP4"
        # 8100 = not a page multiple (the exact-fill PR's example); 8192 would be blind
        assert suite.load.input_len == 8100 and suite.load.output_len == 1024
        assert suite.load.range_ratio == 1.0
        # shaped points (issue 29): c64 prefill-shaped for the claim, the rest decode
        assert suite.load.concurrency[-1] == 64 and suite.load.output_len_at(64) == 16
        assert suite.load.reshaped == suite.load.concurrency      # c64: 16, the rest 256
        assert {suite.load.output_len_at(c) for c in suite.load.concurrency[:-1]} == {256}
        assert suite.judge.aggregate_concurrency == {
            "median_tpot_ms": suite.load.concurrency[:-1]}
        assert len(suite.load.num_prompts) == len(suite.load.concurrency)
    # cpu, premerge and nightly run every mode inside each server start ([design]); nightly
    # replicates over server starts, premerge and cpu use one
    designs = {name: load_suite(suite_path(name))
               for name in ("cpu", "cpu-gfx95", "premerge", "nightly")}
    assert {name: (s.design, s.repeats, s.notes) for name, s in designs.items()} == {
        "cpu": (Design(starts=1, blocks=40, looks=(8, 12, 16, 20, 24, 28, 32, 36),
                       min_block_seconds=1.5, max_minutes=4.5, forced_blocks=4,
                       spending_power=1.25), 1, ()),
        "cpu-gfx95": (Design(starts=1, blocks=3), 1, ()),
        "premerge": (Design(starts=1, blocks=4, warmup_blocks=1), 1, ()),
        "nightly": (Design(starts=4, blocks=3, warmup_blocks=1, halves=True), 1, ())}
    assert all(s.effective_design is s.design and s.design.in_server for s in designs.values())
    assert designs["nightly"].effective_design.starts > 1
    # the judge's validation suite is on [design] too (issue 30): one start of one block
    gate = load_suite(suite_path("cpu-gate"))
    assert (gate.design, gate.repeats, gate.notes) == (Design(starts=1, blocks=1), 1, ())
    assert gate.design.in_server and gate.effective_design is gate.design
    assert gate.judge.run_to_run_cv == 0.08 and gate.judge_table is not None
    assert cpu.load.range_ratio == 1.0          # absent: the client's old fixed lengths


@pytest.mark.parametrize(("name", "repeats"), [("cpu", 1), ("premerge", 1), ("nightly", 3)])
def test_old_format_suites_load_through_the_upgrade(name: str, repeats: int) -> None:
    """The fixtures in tests/data/suites/legacy/ ([suite].repeats, no [design]): each repeat is
    read as a server start of one block of every mode, with a note saying so."""
    path = LEGACY_CPU.parent / f"{name}.toml"
    text = path.read_text()
    assert f"\nrepeats = {repeats}\n" in text and "\n[design]\n" not in text
    suite = load_suite(path)
    assert (suite.name, suite.design, suite.repeats) == (
        name, Design(starts=repeats, blocks=1, in_server=True), 1)
    assert len(suite.notes) == 1 and suite.notes[0].startswith(
        f"{path}: suite.repeats = {repeats} read as [design] starts = {repeats}, blocks = 1")


def test_shipped_profiles_cover_runner_classes() -> None:
    glm = load_profile(MODELS / "glm-5.2-mxfp4.toml")
    assert set(glm.runners) >= {"gfx95", "gfx942", "nvidia"}
    assert glm.for_runner("gfx95").launch_timeout_s == 3600
    assert glm.for_runner("gfx95").env == {"SGLANG_USE_AITER": "1"}
    for arch in ("gfx95", "gfx942", "nvidia"):   # what sglang forces for DSA models
        assert glm.for_runner(arch).page_size == 64
        assert glm.for_runner(arch).chunked_prefill_size == 16384
    small = load_profile(MODELS / "smollm2-135m.toml")
    assert small.for_runner("cpu").cpu_standin is True
    assert small.prepare is not None and small.prepare.package_file.endswith(".gguf")
    with pytest.raises(ConfigError, match=r"glm-5.2-mxfp4.toml: no \[runners.cpu\]"):
        glm.for_runner("cpu")


def _copy_models(tmp_path: Path) -> Path:
    models = tmp_path / "models"
    shutil.copytree(MODELS, models)
    return models


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"fixture text {old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(("old", "new", "message"), [
    ("launch_timeout_s = 300", "launch_timeout_s = \"300\"",
     r"smollm2-135m.toml: runners.cpu.launch_timeout_s: expected integer, got str"),
    ("launch_timeout_s = 300", "launch_timeout_s = 300\nlaunch_timeot = 3",
     r"smollm2-135m.toml: \[runners.cpu\]: unknown key 'launch_timeot'"),
    ("page_size = 64", "page_size = 100",
     r"chunked_prefill_size 256 must be a multiple of page_size 100"),
    ('name = "smollm2-135m"', 'name = "other"', r"model.name 'other' must match the file name"),
    ('"--device", "cpu",', '"--device", "cpu", "--port", "1",', r"--port is set by servegate"),
    ("cpu_standin = true", "cpu_standin = 1",
     r"runners.cpu.cpu_standin: expected boolean, got int"),
    ('SGLANG_USE_CPU_ENGINE = "1"', "SGLANG_USE_CPU_ENGINE = 1",
     r"runners.cpu.env\['SGLANG_USE_CPU_ENGINE'\]: expected string"),
    ("[runners.cpu]", "[runners.tpu]", r"\[runners.tpu\]: unknown runner class"),
])
def test_profile_errors_name_file_and_key(tmp_path: Path, old: str, new: str,
                                          message: str) -> None:
    models = _copy_models(tmp_path)
    _edit(models / "smollm2-135m.toml", old, new)
    with pytest.raises(ConfigError, match=message):
        load_profile(models / "smollm2-135m.toml")


def test_invalid_toml_is_reported(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[model\nname = 1")
    with pytest.raises(ConfigError, match=r"bad.toml: not valid TOML"):
        load_profile(bad)


@pytest.mark.parametrize(("old", "new", "message"), [
    ("blocks = 40", "blocks = 40\nblock = 2", r"cpu.toml: \[design\]: unknown key 'block'"),
    ('modes = ["off", "on", "forced"]', 'modes = ["off", "fast"]',
     r"cpu.toml: suite.modes: 'fast' is not one of"),
    ("concurrency = [2]", "concurrency = [2, 4]",
     r"cpu.toml: load.num_prompts must list one count per load.concurrency"),
    ("input_len = 300", "input_len = 300.5", r"cpu.toml: load.input_len: expected integer"),
    ("questions = 4", "questions = 4\nquestons = 3", r"\[gsm8k\]: unknown key 'questons'"),
    ("shots = 1", 'shots = "1"', r"cpu.toml: gsm8k.shots: expected integer, got str"),
    ('model = "smollm2-135m"', 'model = "nope"', r"nope.toml: not found"),
    ('runners = ["cpu"]', 'runners = ["cpu", "tpu"]',
     r"suite.runners: 'tpu' is not a runner class or architecture"),
    ("page_size = 64", "page_size = 48", r"chunk size 256 is not a multiple of page size 48"),
    ("page_size = 64", 'page_size = 64\ndtype = "fp32"',
     r"cpu.toml: server.dtype: expected one of auto, half, float16, bfloat16, float, float32"),
    ("page_size = 64", "page_size = 64\ndtype = 32", r"cpu.toml: server.dtype: expected str"),
    ("warmup_requests = 0", "warmup_requests = true",
     r"load.warmup_requests: expected integer, got bool"),
    ("input_len = 300", "input_len = 300\nrange_ratio = 1.5",
     r"cpu.toml: load.range_ratio: expected a number in \[0, 1\]"),
    ("input_len = 300", "input_len = 300\nrange_ratio = -0.1",
     r"cpu.toml: load.range_ratio: expected a number in \[0, 1\]"),
    ("input_len = 300", 'input_len = 300\nrange_ratio = "half"',
     r"cpu.toml: load.range_ratio: expected float, got str"),
])
def test_suite_errors_name_file_and_key(tmp_path: Path, old: str, new: str,
                                        message: str) -> None:
    models = _copy_models(tmp_path)
    suite = tmp_path / "cpu.toml"
    shutil.copy(ROOT / "suites" / "cpu.toml", suite)
    _edit(suite, old, new)
    with pytest.raises(ConfigError, match=message):
        load_suite(suite, models_dir=models)


@pytest.mark.parametrize(("old", "new", "message"), [
    ("repeats = 1", "repeats = 1\nrepeat = 2", r"cpu.toml: \[suite\]: unknown key 'repeat'"),
])
def test_legacy_suite_errors_name_file_and_key(tmp_path: Path, old: str, new: str,
                                               message: str) -> None:
    """The same, on a suite with [suite].repeats (the design before [design])."""
    models = _copy_models(tmp_path)
    suite = tmp_path / "cpu.toml"
    shutil.copy(LEGACY_CPU, suite)
    _edit(suite, old, new)
    with pytest.raises(ConfigError, match=message):
        load_suite(suite, models_dir=models)


def test_unknown_suite_name_is_clear() -> None:
    with pytest.raises(ConfigError, match=r"suites/no-such-suite.toml: not found"):
        load_suite(suite_path("no-such-suite"))


def test_suite_dtype_replaces_the_profiles_and_keeps_every_other_arg(tmp_path: Path) -> None:
    """A suite's [server] dtype is appended as --dtype, replacing one in the profile's args."""
    models = _copy_models(tmp_path)
    plain = load_suite(ROOT / "suites" / "cpu.toml", models_dir=models)
    assert "--dtype" not in plain.server_for("cpu").args
    _edit(models / "smollm2-135m.toml", '"--sleep-on-idle",', '"--sleep-on-idle", "--dtype=half",')
    suite = tmp_path / "cpu.toml"
    shutil.copy(ROOT / "suites" / "cpu.toml", suite)
    _edit(suite, "page_size = 64", 'page_size = 64\ndtype = "float32"')
    loaded = load_suite(suite, models_dir=models)
    args = loaded.server_for("cpu").args
    assert args == (*plain.server_for("cpu").args, "--dtype", "float32")
    assert loaded.server_for("cpu").chunked_prefill_size == 256
