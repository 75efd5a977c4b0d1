"""Ledger scenarios without sglang: the suite's extras parse, bad keys are named, and the
invariants decide on hand-written traces (a shortfall with a named refusal is a finding with its
numbers; without one it fails)."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_files import REPO_ROOT

from servegate.admission.ledger_checks import check_ledger
from servegate.admission.ledger_spec import LedgerSpec
from servegate.admission.replay import Admission, Round, Trace
from servegate.admission.scenario import Prompt, Scenario
from servegate.admission.suite import SuiteError, load_suite

_TILE = LedgerSpec("tile-budget", tile_budget=16, tile_budget_mode="compact")


def test_the_suite_has_every_ledger_kind_with_ids_naming_their_budget() -> None:
    suite = load_suite(REPO_ROOT / "suites" / "admission.toml")
    ledger = {s.scenario_id: s for s in suite.scenarios if s.ledger is not None}
    assert {s.ledger.kind for s in ledger.values()} == {"tile-budget", "swa", "mamba", "dllm"}
    assert {s.ledger.tile_budget_mode for s in ledger.values()} >= {"compact", "legacy"}
    assert "p64-c2048-tile-budget-radix-tb16compact" in ledger
    assert ledger["p64-c2048-tile-budget-radix-tb16compact"].describe()["prompts"] == [1000, 1400]
    plain = next(s for s in suite.scenarios if s.ledger is None)
    assert "ledger" not in plain.describe()        # the matrix's JSON keys are unchanged


_HEAD = ('[admission]\npage_sizes=[64]\nchunk_sizes=[2048]\nmixes=["one-long"]\n'
         'paths=["radix"]\nmodes=["off"]\n[[admission.extra]]\npage_size=64\nchunk_size=2048\n'
         'path="radix"\n')


@pytest.mark.parametrize(("extra", "needle"), [
    ('kind="tile-budget"\nprompt_lens=[1000]\ntile_budget=16\ntile_budget_mode="square"\n',
     "'tile_budget_mode' 'square' is not one of compact, legacy"),
    ('kind="swa"\nprompt_lens=[1000]\nsliding_window=512\n', "'swa_pool_tokens' is required"),
    ('kind="tile-budget"\ntile_budget=16\ntile_budget_mode="compact"\n',
     "extra[0]: 'prompt_lens' is required with 'kind'"),
    ('mix="one-long"\ntile_budget=16\n', "['tile_budget'] need 'kind'"),
    ('kind="nope"\nprompt_lens=[10]\n', "kind 'nope' is not one of"),
])
def test_bad_ledger_extras_name_the_key(tmp_path: Path, extra: str, needle: str) -> None:
    path = tmp_path / "admission.toml"
    path.write_text(_HEAD + extra)
    with pytest.raises(SuiteError) as err:
        load_suite(path)
    assert needle in str(err.value) and str(path) in str(err.value)


def _tile_trace(mode: str, extends: list[int], ledger: dict | None = None) -> Trace:
    scenario = Scenario(page_size=64, chunk_size=2048, prompts=(Prompt(1000), Prompt(1400)),
                        mix="tile-budget", ledger=_TILE)
    # KV growth worked out by hand: ceil_page(1000) + 64 = 1088, ceil_page(1024) + 64 = 1088.
    kv = {1000: 1088, 1024: 1088, 1400: 1472, 376: 448}
    admissions = [Admission(f"r{i}", 0, n, kv[n], False) for i, n in enumerate(extends)]
    rnd = Round(0, admissions, sum(extends), True, 0, 0, "other", ledger=ledger or {})
    return Trace(scenario, mode, mode == "forced", [rnd], 100, 100, 0, 3, 3)


_REFUSAL = {"candidate": 1048, "tiles": 17, "budget": 16, "mode": "compact",
            "admitted_lens_seen": [0], "admitted_lens": [1000]}


def test_a_named_tile_refusal_is_a_finding_with_its_numbers() -> None:
    report = check_ledger({"off": _tile_trace("off", [1000, 1024]),
                           "forced": _tile_trace("forced", [1000], {"tile_refusals": [_REFUSAL]})})
    assert report.failures == []
    (finding,) = [f for f in report.findings if f.name == "tile-budget-refusal"]
    assert (finding.data["refused_len"], finding.data["forced_tokens"],
            finding.data["off_tokens"]) == (1048, 1000, 2024)
    assert "1048-token chunk" in finding.detail and "1000 + 1024" in finding.detail


def test_forced_below_off_without_a_named_budget_fails() -> None:
    report = check_ledger({"off": _tile_trace("off", [1000, 1024]),
                           "forced": _tile_trace("forced", [1000])})
    names = {i.name for i in report.invariants.values() if not i.holds}
    assert names == {"forced-not-below-off-unless-named-budget", "tile-budget-binds-when-forced"}
    assert report.failures[0].startswith("p64-c2048-tile-budget-radix-tb16compact [forced]")


def test_kv_growth_off_the_page_ceiling_fails() -> None:
    trace = _tile_trace("off", [1000, 1024])
    trace.rounds[0].admissions[1].kv_reserved = 1024 + 1      # floored, not page-ceiled + page
    report = check_ledger({"off": trace})
    assert not report.invariants["kv-page-ceiled"].holds
    assert "expected ceil_page(1024) + page 64 = 1088" in report.failures[0]
