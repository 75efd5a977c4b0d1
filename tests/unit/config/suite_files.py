"""A small two-mode suite file written on the fly, for the config tests of designs and judges."""

from __future__ import annotations

from pathlib import Path

from servegate.config import load_suite
from servegate.config.suites import Suite
from servegate.core.paths import MODELS_DIR

HEAD = """[suite]
name = "s"
model = "smollm2-135m"
runners = ["cpu"]
modes = ["off", "on"]
seed = 7
{repeats}
[load]
input_len = 300
output_len = 16
concurrency = [2, 4]
num_prompts = [8, 12]
warmup_requests = 1
point_timeout_s = 600
"""


def write_suite(tmp_path: Path, *, repeats: str = "", tail: str = "") -> Path:
    path = tmp_path / "s.toml"
    path.write_text(HEAD.format(repeats=repeats) + tail)
    return path


def load(path: Path) -> Suite:
    return load_suite(path, models_dir=MODELS_DIR)
