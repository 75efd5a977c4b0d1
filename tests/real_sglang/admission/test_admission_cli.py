"""The admission CLI contract: bad input exits 2 naming the option (checked before sglang loads);
the JSON contract comes from a real replay (marked ``sglang``)."""

from __future__ import annotations

import json

import pytest
from repo_files import REPO_ROOT
from servegate_cli import run_servegate

REPO = REPO_ROOT
CONTRACT = ["admission", "replay", "--page-size", "64", "--chunk-size", "16384",
            "--prompt-lens", "3000,5000,7000,9000", "--json"]


def _cli(*args: str) -> dict:
    proc = run_servegate(*args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.sglang
def test_contract_json_off_and_forced() -> None:
    forced = _cli(*CONTRACT, "--exact-fill", "forced")
    assert {"sglang_version", "exact_fill", "effective", "rounds"} <= forced.keys()
    assert forced["exact_fill"] == "forced" and forced["effective"] is True
    first = forced["rounds"][0]
    assert first["extend_lens"] == [3000, 5000, 7000, 1384]
    assert first["batch_tokens"] == 16384 and first["saturated"] is True
    off = _cli(*CONTRACT, "--exact-fill", "off")
    assert off["effective"] is False
    assert off["rounds"][0]["extend_lens"] == [3000, 5000, 7000, 1280]
    assert off["rounds"][0]["batch_tokens"] == 16280
    # The reviewer's proposed assertion cannot tell the modes apart; the batch total can.
    assert off["rounds"][0]["rem_chunk_tokens"] == forced["rounds"][0]["rem_chunk_tokens"] == 0
