"""servegate preflight without sglang: suite discovery, bad input (exit 2, naming file and key),
and the client's --random-range-ratio from the suite's [load].range_ratio."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from repo_files import REPO_ROOT
from servegate_cli import run_servegate

from servegate.preflight import cli

ROOT = REPO_ROOT


def test_gpu_suites_are_the_serving_suites_with_gpu_runners() -> None:
    names = [p.stem for p in cli.gpu_suites()]
    assert "premerge" in names and "nightly" in names
    assert "cpu" not in names and "cpu-gate" not in names      # cpu-only
    assert "admission" not in names                            # not a serving suite


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(argv)
    return code, capsys.readouterr().err


def test_unknown_suite_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _main(["--suite", "no-such-suite", "--json"], capsys)
    assert code == 2 and "suites/no-such-suite.toml: not found" in err


def test_unknown_runner_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _main(["--suite", "premerge", "--runner", "tpu", "--json"], capsys)
    assert code == 2 and "--runner 'tpu'" in err and "gfx95" in err


def test_runner_the_suite_does_not_cover_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _main(["--suite", "cpu", "--runner", "gfx95", "--json"], capsys)
    assert code == 2
    assert "suites/cpu.toml: suite.runners ['cpu'] does not cover --runner 'gfx95'" in err


def test_malformed_suite_exits_2_naming_file_and_key(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    suite = tmp_path / "premerge.toml"
    shutil.copy(ROOT / "suites" / "premerge.toml", suite)
    suite.write_text(suite.read_text().replace("range_ratio = 1.0", "range_ratio = 2.0"))
    code, err = _main(["--suite", str(suite), "--json"], capsys)
    assert code == 2
    assert f"{suite}: load.range_ratio: expected a number in [0, 1]" in err


def test_malformed_profile_exits_2_naming_file_and_key(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    models = tmp_path / "models"
    shutil.copytree(ROOT / "models", models)
    profile = models / "glm-5.2-mxfp4.toml"
    profile.write_text(profile.read_text().replace("launch_timeout_s = 3600",
                                                   'launch_timeout_s = "1h"', 1))
    code, err = _main(["--suite", "premerge", "--models-dir", str(models), "--json"], capsys)
    assert code == 2
    assert f"{profile}: runners.gfx95.launch_timeout_s: expected integer" in err


def test_bad_option_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["--suite", "premerge", "--jsn"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --jsn" in capsys.readouterr().err


# `servegate preflight --sglang-src TREE`: the GPU suites checked against a given sglang tree.




def test_a_folder_without_sglang_is_refused(tmp_path: Path) -> None:
    proc = run_servegate("preflight", "--suite", "premerge", "--sglang-src", tmp_path,
                         timeout=120)
    assert proc.returncode == 2
    assert f"--sglang-src {tmp_path}: not an sglang tree" in proc.stderr
