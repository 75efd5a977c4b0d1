"""``servegate admission ab``: the admission matrix on two real sglang trees (released wheels,
unpacked), each replayed in its own process, compared scenario by scenario and mode by mode.

Pair used: 0.5.19 (last release without PR #32888) cannot import over the shared environment
(its ``configs/qwen3_asr.py`` registers a config name transformers 5.19 already has:
``ValueError: 'qwen3_asr' is already used by a Transformers config``); 0.5.20 fixed exactly that
line (``exist_ok=True``). The bracketing pair is therefore 0.5.19 with that one fix (nothing in the
scheduler touched) as base and 0.5.20 as head; ``test_pristine_0_5_19_is_refused`` shows the
refusal of the pristine release.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from repo_files import REPO_ROOT
from servegate_cli import run_servegate
from sglang_trees import (
    ASR_FIX,
    FORCED_FLOOR,
    GATE_LEAK,
    TWO_SCENARIO_SUITE,
    edited_copy,
    release_tree,
)

from servegate.admission.ledger_spec import LEDGER_KINDS

REPO = REPO_ROOT


def _ab(*args: str | Path, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return run_servegate("admission", "ab", *args, timeout=timeout,
                         env={"SERVEGATE_RUNNER": "cpu"})


def _json(proc: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _by_mode(result: dict[str, Any], mode: str) -> list[dict[str, Any]]:
    return [s for s in result["scenarios"] if s["mode"] == mode]


# ---- no sglang needed: the comparison and the gate on hand-made suite outputs ----------------


# ---- real trees ----------------------------------------------------------------------------

@pytest.mark.sglang
def test_unknown_expect_change_scenario_is_refused_before_any_replay() -> None:
    tree = release_tree("0.5.20")
    proc = _ab("--base", tree, "--head", tree, "--expect-change", "p64-nope:off", timeout=120)
    assert proc.returncode == 2
    assert "--expect-change p64-nope:off: no such scenario" in proc.stderr


@pytest.mark.sglang
def test_a_a_reports_every_scenario_identical() -> None:
    tree = release_tree("0.5.20")
    proc = _ab("--base", tree, "--head", tree, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = _json(proc)
    assert result["base"] == result["head"] | {"seconds": result["base"]["seconds"]}
    assert result["base"]["version"] == "0.5.20" and result["base"]["commit"] is None
    assert len(_matrix(result["scenarios"])) == 3 * 93
    assert all(s["identical"] is True and s["rounds_moved"] == [] for s in result["scenarios"])
    assert result["verdict"] == "PASS" and result["failing"] == []


@pytest.mark.sglang
def test_leaked_gate_fails_naming_the_off_scenarios_that_moved(tmp_path: Path) -> None:
    base = release_tree("0.5.20")
    head = edited_copy(base, tmp_path / "sglang-0.5.20-leaked", GATE_LEAK)
    proc = _ab("--base", base, "--head", head, "--json")
    assert proc.returncode == 1, proc.stderr[-2000:]
    result = _json(proc)
    off = _by_mode(result, "off")
    # Every off scenario now runs exact fill (effective False -> True) ...
    assert all(s["failing"] and f"{s['name']} [off]: effective False -> True" in s["rounds_moved"]
               for s in off)
    assert all(f"{s['name']} [off]" in result["failing"] for s in off)
    # ... and where the page is larger than one token the admitted rounds move; at page 1 exact
    # fill equals off, so only the flag changes.
    rounds_moved = {s["name"] for s in off if any(" round " in line for line in s["rounds_moved"])}
    assert rounds_moved and all(not name.startswith("p1-") for name in rounds_moved)
    assert {"p64-c16384-many-medium-radix", "p8-c2048-not-page-multiples-radix"} <= rounds_moved
    # forced was already exact fill: the leak changes nothing there.
    assert all(s["identical"] for s in _by_mode(result, "forced"))
    # --expect-change turns the deliberate difference into a pass (shown on two of the moved
    # scenarios: suites/admission.toml's page 64, chunk 2048 pair; the whole matrix again would
    # cost two more full replays in CI).
    suite = tmp_path / "admission.toml"
    suite.write_text(TWO_SCENARIO_SUITE)
    text = _ab("--base", base, "--head", head, "--suite", suite, "--expect-change", "*:off,*:on")
    assert text.returncode == 0, text.stdout[-2000:] + text.stderr[-2000:]
    assert "admission ab: PASS" in text.stdout and "expected" in text.stdout


@pytest.mark.sglang
def test_pristine_0_5_19_is_refused_naming_the_tree_and_the_failing_import() -> None:
    old, new = release_tree("0.5.19"), release_tree("0.5.20")
    proc = _ab("--base", old, "--head", new, timeout=300)
    assert proc.returncode == 2
    assert f"--base {old}" in proc.stderr and "does not import over this environment" in proc.stderr
    assert "sglang.srt.configs.qwen3_asr" in proc.stderr
    assert "'qwen3_asr' is already used by a Transformers config" in proc.stderr


@pytest.mark.sglang
def test_bracketing_pair_off_identical_and_forced_only_in_the_newer(tmp_path: Path) -> None:
    base = edited_copy(release_tree("0.5.19"), tmp_path / "sglang-0.5.19-asrfix", ASR_FIX)
    head = release_tree("0.5.20")
    proc = _ab("--base", base, "--head", head, "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = _json(proc)
    print(json.dumps({"base": result["base"]["version"], "head": result["head"]["version"],
                      "summary": result["summary"]}, indent=1))
    assert (result["base"]["version"], result["head"]["version"]) == ("0.5.19", "0.5.20")
    assert result["base"]["has_gate"] is False and result["head"]["has_gate"] is True
    # Observed: PR #32888 left admission off gfx95 byte-identical in all 93 off scenarios.
    off = _matrix(_by_mode(result, "off"))
    assert len(off) == 93 and all(s["identical"] is True for s in off)
    # the ledger scenarios' off rows did not move either (built on both, or only on the newer)
    assert result["summary"]["off"]["moved"] == 0
    for mode in ("on", "forced"):
        rows = _by_mode(result, mode)
        rows = _matrix(rows)
        assert len(rows) == 93 and all(s["only_in"] == "head" and s["identical"] is None
                                       for s in rows)
        assert all(s["not_replayed"] == {"tree": "base", "reason": (
            f"mode {mode} not run: sglang 0.5.19 has no exact-fill gate "
            "(schedule_policy._use_exact_chunk_fill, sglang >= 0.5.20)")} for s in rows)
    assert result["verdict"] == "PASS"


@pytest.mark.sglang
def test_a_head_that_breaks_exact_fill_fails_on_its_own_invariants(tmp_path: Path) -> None:
    """`off` and `on` are untouched (no trace the gate reads moves), yet the head's forced
    batches stop short of the chunk: its own invariant checks fail the gate, listed apart from
    trace moves; the base (the release) has none."""
    base = release_tree("0.5.23")
    head = edited_copy(base, tmp_path / "sglang-0.5.23-forced-floor", FORCED_FLOOR)
    proc = _ab("--base", base, "--head", head, "--json")
    assert proc.returncode == 1, proc.stderr[-2000:]
    result = _json(proc)
    assert result["failing"] == []                       # no gated trace moved
    assert result["base_invariant_failures"] == []
    assert result["failing_invariants"] and all(
        "[forced]" in line for line in result["failing_invariants"])
    assert all(not r["pre_existing"] for r in result["head_invariant_failures"])
    assert result["verdict"] == "FAIL"


@pytest.mark.sglang
def test_every_scenario_a_release_does_not_replay_names_its_reason() -> None:
    """0.5.20 -> 0.5.23 (issue 40): the ledger scenarios 0.5.20 cannot build are listed with the
    first line of the error each raised on 0.5.20, never a bare "only in head"."""
    proc = _ab("--base", release_tree("0.5.20"), "--head", release_tree("0.5.23"), "--json")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = _json(proc)
    one_sided = [s for s in result["scenarios"] if s["identical"] is None]
    print(json.dumps({f"{s['name']} [{s['mode']}]": s["not_replayed"] for s in one_sided},
                     indent=1))
    # Measured: every ledger kind (tile budget, SWA, mamba, dLLM) is new since 0.5.20 in the
    # shape servegate builds it; the plain matrix is replayed on both.
    assert one_sided and {s["name"] for s in one_sided} == {
        s["name"] for s in result["scenarios"] if any(f"-{k}-" in s["name"] for k in LEDGER_KINDS)}
    for row in one_sided:
        assert row["only_in"] == "head" and row["not_replayed"]["tree"] == "base"
        reason = row["not_replayed"]["reason"]
        # an exception's first line: its type, then the message (0.5.20 lacks what is named)
        assert reason.split(":")[0] in {"TypeError", "AttributeError"} and "\n" not in reason
        assert "unexpected keyword argument" in reason or "has no attribute" in reason, reason


def _matrix(rows: list[dict]) -> list[dict]:
    """The plain matrix's rows (ledger scenarios, issue 31, build only on trees that have them)."""
    return [r for r in rows if not any(f"-{kind}-" in r["name"] for kind in LEDGER_KINDS)]
