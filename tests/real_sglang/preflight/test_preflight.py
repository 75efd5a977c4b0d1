"""servegate preflight against the real sglang: the launch argv through sglang's own parser, the
client's lengths from sglang's own sampler, closed-loop replays through the real PrefillAdder,
and per-cell status / exit codes (issue 10's acceptance)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from repo_files import REPO_ROOT, edited_suite

from servegate.config import load_suite, suite_path
from servegate.preflight import cli

pytestmark = pytest.mark.sglang

ROOT = REPO_ROOT

# Copies of the GPU suite and profile as they were before preflight (`git show
# 57e50a9:suites/premerge.toml`, `git show 57e50a9:models/glm-5.2-mxfp4.toml`): 8192-token
# prompts (range ratio 1: page multiples), chunk 32768, no --max-prefill-tokens, no page size.
# The suite's [judge] tables are left out (preflight does not read them; their lines are long).
TODAYS_PREMERGE = """\
# Pre-merge gate for the exact-fill PR: GLM-5.2-MXFP4 TP4, input 8192 / output 1024 (the PR's
# own setting). off and on on gfx95; on gfx942 / NVIDIA `on` must be a no-op and `forced`
# shows what exact fill would do there. One repeat per mode keeps it within a CI slot.

[suite]
name = "premerge"
description = "GLM-5.2-MXFP4 TP4, 8192/1024, concurrency 4-64, one repeat"
model = "glm-5.2-mxfp4"
runners = ["gfx95", "gfx942", "nvidia"]
modes = ["off", "on", "forced"]
repeats = 1
seed = 32888

[load]
input_len = 8192
output_len = 1024
concurrency = [4, 8, 16, 32, 64]
num_prompts = [16, 32, 64, 128, 256]    # four waves per concurrency
warmup_requests = 4
point_timeout_s = 5400

[gsm8k]
questions = 1319
shots = 5
concurrency = 64
max_tokens = 512
dataset = "test"
seed = 1234
"""

TODAYS_PROFILE = """\
# GLM-5.2 in MXFP4, served TP4 as in SGLang's own AMD CI and cookbook. These sections run
# unchanged in the runner image's preinstalled sglang (lmsysorg/sglang-rocm:*-mi35x-*,
# rocm/sgl-dev:*); per-image DSA/NSA backend flags go into `args`.

[model]
name = "glm-5.2-mxfp4"
path = "amd/GLM-5.2-MXFP4"
description = "GLM-5.2, MXFP4 weights (the model the exact-fill PR was measured on)"

[runners.gfx95]
description = "MI355X (gfx950), TP4, aiter; the exact-fill gate is on here"
launch_timeout_s = 3600
chunked_prefill_size = 32768
args = [
  "--trust-remote-code",
  "--tp", "4",
  "--kv-cache-dtype", "fp8_e4m3",
  "--mem-fraction-static", "0.85",
  "--max-running-requests", "80",
  "--watchdog-timeout", "1200",
]
env = { SGLANG_USE_AITER = "1" }

[runners.gfx942]
description = "MI300X / MI325X (gfx942), TP4, aiter; the real gate is off: use `forced`"
launch_timeout_s = 3600
chunked_prefill_size = 32768
args = [
  "--trust-remote-code",
  "--tp", "4",
  "--kv-cache-dtype", "fp8_e4m3",
  "--mem-fraction-static", "0.85",
  "--max-running-requests", "80",
  "--watchdog-timeout", "1200",
]
env = { SGLANG_USE_AITER = "1" }

[runners.nvidia]
description = "H200 / B200, TP4; the real gate is off: use `forced`"
launch_timeout_s = 3600
chunked_prefill_size = 32768
args = [
  "--trust-remote-code",
  "--tp", "4",
  "--kv-cache-dtype", "fp8_e4m3",
  "--mem-fraction-static", "0.85",
  "--max-running-requests", "80",
  "--watchdog-timeout", "1200",
]
"""


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict]:
    code = cli.main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _todays(tmp_path: Path, page_size: int | None = None) -> tuple[Path, Path]:
    models = tmp_path / "models"
    models.mkdir()
    profile = TODAYS_PROFILE
    if page_size is not None:     # what sglang itself forces for this DSA model on ROCm/CUDA
        profile = profile.replace("chunked_prefill_size = 32768",
                                  f"chunked_prefill_size = 32768\npage_size = {page_size}")
    (models / "glm-5.2-mxfp4.toml").write_text(profile)
    suite = tmp_path / "premerge.toml"
    suite.write_text(TODAYS_PREMERGE)
    return suite, models


@pytest.mark.parametrize("page_size", [None, 64])
def test_todays_premerge_cannot_see_exact_fill(tmp_path: Path, page_size: int | None,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    suite, models = _todays(tmp_path, page_size)
    code, report = _run(["--suite", str(suite), "--models-dir", str(models)], capsys)
    assert code == 1
    assert report["sglang_version"].startswith("0.5.")
    assert [c["runner"] for c in report["cells"]] == ["gfx95", "gfx942", "nvidia"]
    for cell in report["cells"]:
        assert cell["status"] in ("blind", "capped") and cell["fails"]
        budget = cell["budget"]
        assert (budget["chunk_size"], budget["max_prefill_tokens"]) == (32768, 16384)
        assert budget["page_size"] == (page_size or 1) and budget["dp_size"] == 1
        assert any("max_prefill_tokens 16384 < chunk size 32768" in r for r in cell["reasons"])
        off, exact = cell["modes"]["off"], cell["modes"]["exact"]
        # the adder stops every saturated round at max_prefill_tokens, in both modes
        assert off["min_saturated_tokens"] == exact["min_saturated_tokens"] == 16384
        assert off["aligned_fraction"] == exact["aligned_fraction"] == 0.0
        assert exact["effective"] and not off["effective"]


def test_page_multiple_prompts_are_blind(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The fixed profile, but 8192-token prompts (128 pages): both modes admit the same."""
    suite = edited_suite(tmp_path, "premerge", "input_len = 8100", "input_len = 8192")
    code, report = _run(["--suite", str(suite), "--runner", "gfx95"], capsys)
    (cell,) = report["cells"]
    assert code == 1 and cell["status"] == "blind" and cell["fails"]
    assert "identical batches" in cell["reasons"][0] and "page size 64" in cell["reasons"][0]
    assert cell["modes"]["off"]["aligned_fraction"] == cell["modes"]["exact"]["aligned_fraction"] == 1.0


@pytest.mark.parametrize("name", ["premerge", "nightly"])
def test_fixed_suites_pass(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = _run(["--suite", name], capsys)
    assert code == 0
    cells = {c["runner"]: c for c in report["cells"]}
    assert set(cells) == {"gfx95", "gfx942", "nvidia"}
    for cell in cells.values():
        assert cell["status"] == "ok" and cell["gating"] and not cell["fails"]
        budget = cell["budget"]
        assert budget["max_prefill_tokens"] >= budget["chunk_size"] == 16384
        assert budget["page_size"] == 64
        off, exact = cell["modes"]["off"], cell["modes"]["exact"]
        assert off["saturated_batches"] > 0
        assert off["aligned_fraction"] < 1.0 and exact["aligned_fraction"] == 1.0
        # PR #32888's own ledger: 8100-token prompts, page 64 -> off runs 16328, exact 16384
        assert off["min_saturated_tokens"] == 16328 and exact["min_saturated_tokens"] == 16384
        # the prefill-shaped claim point (16 output tokens) admits the full 1024-token load's
        # rounds, round by round, in off and exact fill: 2 waves of 64 x 8100 tokens
        proofs = {p["concurrency"]: p for p in cell["reshaped"]}
        assert set(proofs) == set(load_suite(suite_path(name)).load.concurrency)
        assert all(p["holds"] for p in proofs.values())
        proof = proofs[64]
        assert (proof["output_len"], proof["full_output_len"]) == (16, 1024)
        for mode in ("off", "exact"):
            rounds = proof["modes"][mode]
            assert rounds["holds"] and rounds["first_difference"] is None
            assert rounds["rounds"] == rounds["full_rounds"] >= 2 * 31
            assert rounds["saturated"] >= 2 * 30
    points = cells["gfx95"]["modes"]["off"]["points"]
    suite = load_suite(suite_path(name))
    assert len(points) == suite.repeats * len(suite.load.concurrency)
    assert [p["requests"] for p in points] == list(suite.load.num_prompts)


def test_the_one_gpu_smoke_sees_exact_fill_on_every_architecture(
        capsys: pytest.CaptureFixture[str]) -> None:
    """suites/smoke.toml (Qwen2.5-0.5B TP1, chunk 2048, page 64, 1000-token prompts): its argv
    passes sglang's parser on every class and off's saturated rounds are page-ceiled (2000)
    where exact fill's are the chunk."""
    code, report = _run(["--suite", "smoke"], capsys)
    assert code == 0
    for cell in report["cells"]:
        assert cell["status"] == "ok" and cell["gating"], cell["reasons"]
        assert "--attention-backend" in cell["argv"] and "triton" in cell["argv"]
        off, exact = cell["modes"]["off"], cell["modes"]["exact"]
        assert (off["min_saturated_tokens"], exact["min_saturated_tokens"]) == (2000, 2048)
        assert exact["aligned_fraction"] == 1.0 and off["aligned_fraction"] == 0.0


def test_a_shaped_point_with_spread_lengths_is_misshaped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Outputs spread by range_ratio < 1 finish (and the next requests arrive) at other times
    with 16 tokens than with 1024: the shaped c64 point would time another prefill schedule,
    and preflight fails the cell naming the point, whatever the runner gates."""
    suite = edited_suite(tmp_path, "premerge", "range_ratio = 1.0 ", "range_ratio = 0.5 ")
    code, report = _run(["--suite", str(suite), "--runner", "gfx942"], capsys)
    (cell,) = report["cells"]
    assert code == 1 and cell["status"] == "misshaped" and cell["fails"]
    [proof] = [p for p in cell["reshaped"] if not p["holds"]]
    assert proof["concurrency"] == 64
    assert cell["reasons"][0].startswith("shaped point c64 (16 output tokens) does not admit "
                                         "the full load's (1024) prefill rounds")


@pytest.mark.parametrize(("old", "new", "flag"), [
    ('"--dsa-prefill-backend", "tilelang",', '"--dsa-prefil-backend", "tilelang",',
     "--dsa-prefil-backend"),
    # upstream's MI35x test still spells the pre-0.5.23 name
    ('"--dsa-prefill-backend", "tilelang",', '"--nsa-prefill-backend", "tilelang",',
     "--nsa-prefill-backend"),
])
def test_misspelled_flag_is_invalid_naming_the_key(tmp_path: Path, old: str, new: str, flag: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    models = tmp_path / "models"
    shutil.copytree(ROOT / "models", models)
    profile = models / "glm-5.2-mxfp4.toml"
    text = profile.read_text()
    gfx942 = text.index("[runners.gfx942]")
    profile.write_text(text[:gfx942] + text[gfx942:].replace(old, new, 1))
    code, report = _run(["--suite", "premerge", "--models-dir", str(models)], capsys)
    assert code == 1
    cells = {c["runner"]: c for c in report["cells"]}
    bad = cells["gfx942"]
    assert bad["status"] == "invalid" and bad["fails"] and bad["modes"] == {}
    assert f"{profile}: runners.gfx942.args ({flag})" in bad["reasons"][0]
    assert "unrecognized arguments" in bad["reasons"][0]
    assert cells["gfx95"]["status"] == cells["nvidia"]["status"] == "ok"


def test_invalid_choice_names_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    models = tmp_path / "models"
    shutil.copytree(ROOT / "models", models)
    profile = models / "glm-5.2-mxfp4.toml"
    profile.write_text(profile.read_text().replace('"--dsa-decode-backend", "tilelang"',
                                                   '"--dsa-decode-backend", "tilelang2"', 1))
    code, report = _run(["--suite", "premerge", "--runner", "gfx95", "--models-dir",
                         str(models)], capsys)
    (cell,) = report["cells"]
    assert code == 1 and cell["status"] == "invalid"
    assert f"{profile}: runners.gfx95.args (--dsa-decode-backend)" in cell["reasons"][0]
    assert "invalid choice: 'tilelang2'" in cell["reasons"][0]


def test_lengths_are_the_clients() -> None:
    """draw_lengths == what sglang's RandomDataset (dataset random-ids, --tokenize-prompt) sends
    after the client seeds numpy the way sglang.benchmark.serving does."""
    import numpy as np
    from sglang.benchmark.datasets.random import sample_random_requests

    from servegate.preflight.lengths import draw_lengths

    np.random.seed(4321)
    rows = sample_random_requests(input_len=8192, output_len=1024, num_prompts=40,
                                  range_ratio=0.25, tokenizer=SimpleNamespace(vocab_size=1000),
                                  dataset_path="", random_sample=False, return_text=False)
    drawn = draw_lengths(4321, 8192, 1024, 0.25, 40)
    assert list(drawn.inputs) == [r.prompt_len for r in rows]
    assert list(drawn.outputs) == [r.output_len for r in rows]
    assert min(drawn.inputs) >= 2048 and len(set(drawn.inputs)) > 30
    assert draw_lengths(1, 8100, 1024, 1.0, 5).inputs == (8100,) * 5


def test_closed_loop_arrivals() -> None:
    """Concurrency 2: requests 0 and 1 arrive together; 0 finishes first (output 3: 2 decode
    steps after its prefill) and 2 takes its slot; 2 (output 2) finishes before 1 and 3 takes
    its slot. Each burst is replayed through the real adder on its own."""
    from servegate.admission.replay import load_sglang
    from servegate.preflight.arrivals import replay_point
    from servegate.preflight.budget import Budget

    budget = Budget(chunk_size=256, max_prefill_tokens=16384, page_size=64, dp_size=1,
                    dp_attention=False, radix=True, configured_chunk_size=256)
    sg = load_sglang()
    point = replay_point(sg, budget, [100, 100, 100, 100], [3, 5, 2, 9], 2, "off")
    assert point.batches == (200, 100, 100)
    assert point.saturated == (False, False, False)
    wave = replay_point(sg, budget, [150, 150, 150], [4, 4, 4], 3, "exact")
    assert wave.effective and wave.batches == (256, 194)        # one burst, chunked at 256
    assert wave.saturated == (True, False)


def test_dp_attention_divides_the_chunk(tmp_path: Path) -> None:
    from servegate.preflight.argv import launch_for, parse_server_args
    from servegate.preflight.budget import resolve_budget

    models = tmp_path / "models"
    shutil.copytree(ROOT / "models", models)
    profile = models / "glm-5.2-mxfp4.toml"
    profile.write_text(profile.read_text().replace(
        '"--tp", "4",', '"--tp", "4", "--dp-size", "2", "--enable-dp-attention",', 1))
    suite = load_suite(suite_path("premerge"), models)
    launch = launch_for(suite, "gfx95")
    budget = resolve_budget(parse_server_args(suite, launch))
    assert (budget.chunk_size, budget.dp_size, budget.dp_attention) == (8192, 2, True)
    assert budget.configured_chunk_size == 16384


def test_cpu_suite_prediction_matches_the_measured_server(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The `cpu` suite's real CPU server run (docs/measurements.md, results/cpu-cpu-20261201T123945Z: one
    server, 8 blocks of 2 prompts at c=2 per mode) read back from the server log per block: off
    (and on) 50 % of 2 saturated prefill batches at 256, smallest 236; forced 100 % of 2, in
    every block. The closed-loop replay of one block predicts it."""
    code, report = _run(["--suite", "cpu"], capsys)
    (cell,) = report["cells"]
    assert code == 0 and cell["status"] == "ok" and cell["budget"]["page_size"] == 64
    seen = {mode: [(p["concurrency"], p["saturated_batches"], p["aligned_fraction"],
                    p["min_saturated_tokens"]) for p in cell["modes"][mode]["points"]]
            for mode in ("off", "exact")}
    assert seen == {"off": [(2, 2, 0.5, 236)], "exact": [(2, 2, 1.0, 256)]}
