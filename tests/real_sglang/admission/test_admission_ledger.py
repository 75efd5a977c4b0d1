"""The ledger scenarios on the real sglang, replayed once (module fixture): every kind builds,
every invariant holds on 0.5.23, the tile-budget refusal is a finding with the issue's numbers,
the traces equal the golden ones, and a ring that charges continuations again fails."""

from __future__ import annotations

import pytest
from repo_files import REPO_ROOT

pytestmark = pytest.mark.sglang


@pytest.fixture(scope="module")
def ledger():
    from servegate.admission.matrix import run_matrix
    from servegate.admission.replay import load_sglang
    from servegate.admission.suite import load_suite

    suite = load_suite(REPO_ROOT / "suites" / "admission.toml")
    scenarios = tuple(s for s in suite.scenarios if s.ledger is not None)
    return run_matrix(scenarios, ("off", "on", "forced"), load_sglang())


def _trace(result, sid: str, mode: str):
    return next(t for t in result.traces if t.scenario.scenario_id == sid and t.mode == mode)


def test_every_kind_replays_and_every_invariant_holds(ledger) -> None:
    assert ledger.not_built == []
    assert {r.kind for r in ledger.ledger} == {"tile-budget", "swa", "mamba", "dllm"}
    assert ledger.checked.failures == []
    for report in ledger.ledger:
        assert report.invariants and all(i.holds for i in report.invariants.values())
        assert report.modes == ["off", "forced"]


def test_tile_refusal_is_the_issues_finding(ledger) -> None:
    report = next(r for r in ledger.ledger if r.scenario.endswith("tb16compact"))
    (refusal,) = [f for f in report.findings if f.name == "tile-budget-refusal"]
    assert (refusal.data["refused_len"], refusal.data["off_extend_lens"],
            refusal.data["forced_extend_lens"]) == (1048, [1000, 1024], [1000])
    assert any(f.name == "tile-budget-ignores-admitted" for f in report.findings)


def test_swa_mamba_and_dllm_ledgers_read_off_sglang(ledger) -> None:
    swa = _trace(ledger, "p64-c2048-swa-radix-sw512-swa1536", "forced")
    first = swa.rounds[0].admissions[0]
    assert (first.extend_len, first.ledger["chunk_tokens_limit"]) == (1408, 1408)
    ring = _trace(ledger, "p64-c2048-swa-radix-sw512-swa1536-ring", "forced")
    assert [a.ledger["swa_reserved"] for a in ring.rounds[1].admissions] == [0, 512]
    radix = _trace(ledger, "p1-c2048-mamba-radix", "forced")
    assert radix.effective is False
    assert _trace(ledger, "p1-c2048-mamba-no-radix", "forced").effective is True
    cost = radix.ledger["mamba_slot_cost"]
    assert [a.kv_reserved for a in radix.rounds[1].admissions] == [952 + 1, 1096 + 1 + cost]
    dllm = _trace(ledger, "p64-c2048-dllm-radix-blk32", "forced")
    assert [a.ledger["dllm_charge"] for a in dllm.rounds[0].admissions] == [1024, 1408, 704]


def test_traces_equal_the_golden_ones(ledger) -> None:
    from servegate.admission import golden

    stored, _ = golden.load_golden(REPO_ROOT / "baselines" / "admission")
    assert golden.diff_traces(stored, ledger.traces) == []


def test_a_ring_charged_again_per_chunk_fails_its_invariant(monkeypatch: pytest.MonkeyPatch) -> None:
    from sglang.srt.mem_cache.prefill_budget import SWAPrefillBudget

    from servegate.admission.ledger_checks import check_ledger
    from servegate.admission.ledger_replay import replay_ledger
    from servegate.admission.replay import load_sglang
    from servegate.admission.suite import load_suite

    real = SWAPrefillBudget.reserve

    def charge_every_chunk(self, *args, **kwargs):
        kwargs["is_chunked_continuation"] = False
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SWAPrefillBudget, "reserve", charge_every_chunk)
    suite = load_suite(REPO_ROOT / "suites" / "admission.toml")
    scenario = next(s for s in suite.scenarios if s.ledger and s.ledger.swa_ring)
    report = check_ledger({"forced": replay_ledger(scenario, "forced", load_sglang())})
    assert not report.invariants["swa-continuation-charged-to-ring-once"].holds
