"""run.json's ``profile`` records and the per-family table per mode."""

from __future__ import annotations

import pytest

from servegate.attribution.record import OTHER_NAMES_KEPT, block_record, label, table
from servegate.attribution.trace import Forward, Reduced


def _reduced() -> Reduced:
    forwards = [Forward("EXTEND", 1, 256, 1000.0, {"gemm": 512.0, "attention": 256.0}),
                Forward("EXTEND", 2, 236, 900.0, {"gemm": 472.0, "attention": 236.0}),
                Forward("DECODE", 2, None, 300.0, {"gemm": 200.0, "norm_elementwise": 50.0})]
    names = {f"aten::v{i}": float(i) for i in range(30)}
    return Reduced(forwards, names, "cpu")


def test_block_record_is_compact_and_keeps_the_largest_other_names() -> None:
    block = block_record(_reduced(), arm="", mode="forced", start=0, seconds=12.3456)
    assert block["seconds"] == 12.346 and "trace" not in block
    assert len(block["other_names"]) == OTHER_NAMES_KEPT
    assert next(iter(block["other_names"])) == "aten::v29"
    assert block["forwards"][0] == {"stage": "EXTEND", "kind": "prefill", "bs": 1,
                                    "tokens": 256, "span_us": 1000.0,
                                    "us": {"attention": 256.0, "gemm": 512.0}}
    assert "tokens" not in block["forwards"][2]
    kept = block_record(_reduced(), arm="head", mode="off", start=1, seconds=1.0,
                        trace="profile/raw/x.trace.json.gz")
    assert kept["trace"] == "profile/raw/x.trace.json.gz"


def test_table_per_mode_family_and_prefill_batch_size() -> None:
    blocks = [block_record(_reduced(), arm="", mode="off", start=0, seconds=1.0),
              block_record(_reduced(), arm="", mode="off", start=1, seconds=1.0)]
    tab = table(blocks)
    row = tab["off"]
    assert row["prefill_forwards"] == 4 and row["decode_forwards"] == 2
    gemm = row["families"]["gemm"]
    assert gemm["per_prefill_forward_us"] == pytest.approx(492.0)
    assert gemm["per_prefill_token_us"] == pytest.approx(2.0)
    assert gemm["per_decode_forward_us"] == pytest.approx(200.0)
    assert row["families"]["moe"]["per_prefill_forward_us"] == 0.0
    assert set(row["by_prefill_tokens"]) == {"236", "256"}
    assert row["by_prefill_tokens"]["256"]["us"]["gemm"] == 512.0
    assert label("head", "off") == "head-off" and label("", "on") == "on"
