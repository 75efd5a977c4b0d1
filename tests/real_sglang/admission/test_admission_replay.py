"""Real sglang admission replays: modes, paths, pools, dLLM, the gfx95 gate, golden traces."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from repo_files import REPO_ROOT

pytestmark = pytest.mark.sglang

REPO = REPO_ROOT


@pytest.fixture(scope="module")
def sg():
    from servegate.admission.replay import load_sglang

    return load_sglang()


def _scenario(**kw):
    from servegate.admission.scenario import Prompt, Scenario

    lens = kw.pop("lens", (3000, 5000, 7000, 9000))
    return Scenario(page_size=kw.pop("page", 64), chunk_size=kw.pop("chunk", 16384),
                    prompts=tuple(Prompt(n) for n in lens), **kw)


def test_issue_example_off_vs_forced(sg) -> None:
    from servegate.admission.replay import replay

    off, forced = replay(_scenario(), "off", sg), replay(_scenario(), "forced", sg)
    assert off.rounds[0].extend_lens == [3000, 5000, 7000, 1280]
    assert forced.rounds[0].extend_lens == [3000, 5000, 7000, 1384]
    assert (off.effective, forced.effective) == (False, True)
    for trace in (off, forced):
        assert trace.free_after + trace.evictable_after == trace.pool_tokens
        assert trace.rows_free_after == trace.rows_total


@pytest.mark.parametrize("path", ["radix", "no-radix", "no-radix-ignore-eos"])
def test_every_path_fills_exactly_when_forced(sg, path: str) -> None:
    from servegate.admission import checks
    from servegate.admission.replay import replay
    from servegate.admission.scenario import mix_scenario

    scenario = mix_scenario("many-medium", 64, 2048, path)
    forced = replay(scenario, "forced", sg)
    off = replay(scenario, "off", sg)
    assert checks.check_trace(forced).failures == []
    saturated = [r.batch_tokens for r in forced.rounds if r.saturated]
    assert saturated and all(n == 2048 for n in saturated)
    assert any(r.batch_tokens < 2048 for r in off.rounds if r.saturated)


def test_cached_prefixes_are_really_matched(sg) -> None:
    from servegate.admission.replay import replay
    from servegate.admission.scenario import mix_scenario

    trace = replay(mix_scenario("shared-prefixes", 64, 2048, "radix"), "forced", sg)
    prefixes = [a.prefix_len for r in trace.rounds for a in r.admissions]
    assert trace.warm_rounds >= 1 and max(prefixes) > 0


def test_real_gate_opens_on_a_faked_gfx95(sg, monkeypatch: pytest.MonkeyPatch) -> None:
    """GPU-boundary double: is_gfx95_supported reports gfx95; `on` must then equal forced."""
    from servegate.admission.replay import replay

    monkeypatch.setattr(sg.policy, "is_gfx95_supported", lambda: True)
    on, forced = replay(_scenario(), "on", sg), replay(_scenario(), "forced", sg)
    assert on.effective is True
    assert [r.extend_lens for r in on.rounds] == [r.extend_lens for r in forced.rounds]
    monkeypatch.undo()
    sg.policy._use_exact_chunk_fill.cache_clear()
    assert replay(_scenario(), "on", sg).effective is False


def test_dllm_config_disables_exact_fill(sg) -> None:
    from servegate.admission.replay import dllm_disables_exact_fill

    assert dllm_disables_exact_fill() is True


def test_truncation_align_caps_forced_fill(sg) -> None:
    from servegate.admission import checks
    from servegate.admission.replay import replay

    trace = replay(_scenario(page=8, chunk=2048, lens=(1000, 1500, 900),
                             truncation_align_size=96), "forced", sg)
    result = checks.check_trace(trace)
    assert result.failures == []
    assert any("truncation_align_size 96 capped" in f for f in result.findings)


def test_suite_matches_golden_and_reports_a_changed_trace(tmp_path: Path, sg) -> None:
    from servegate.admission.cli import suite_main

    golden = tmp_path / "golden"
    shutil.copytree(REPO / "baselines" / "admission", golden)
    results = tmp_path / "results"
    assert suite_main(["--golden", str(golden), "--results-dir", str(results)]) == 0
    report = next(results.glob("admission-*/report.md")).read_text()
    assert "saturated at chunk forced" in report and "p64-c16384-one-long-radix" in report

    path = golden / "one-long.json"
    data = json.loads(path.read_text())
    rounds = data["scenarios"]["p64-c16384-one-long-radix"]["forced"]["rounds"]
    rounds[0]["tokens"] = 16280
    path.write_text(json.dumps(data))
    assert suite_main(["--golden", str(golden), "--results-dir", str(results)]) == 1
    newest = sorted(results.glob("admission-*/report.md"))[-1].read_text()
    assert "p64-c16384-one-long-radix [forced] round 0: tokens 16280 -> 16384" in newest


def test_update_rewrites_golden_atomically(tmp_path: Path, sg) -> None:
    from servegate.admission.cli import suite_main

    suite = tmp_path / "small.toml"
    suite.write_text('[admission]\npage_sizes = [64]\nchunk_sizes = [2048]\n'
                     'mixes = ["one-long"]\npaths = ["radix"]\nmodes = ["off", "forced"]\n')
    golden = tmp_path / "golden"
    assert suite_main(["--suite", str(suite), "--golden", str(golden), "--update",
                       "--results-dir", str(tmp_path / "r")]) == 0
    data = json.loads((golden / "one-long.json").read_text())
    assert data["provenance"]["sglang_version"] == sg.version
    assert set(data["scenarios"]["p64-c2048-one-long-radix"]) == {"off", "forced"}
    assert not list(golden.glob(".*.tmp"))
