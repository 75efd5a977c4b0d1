"""The calibration's per-request spread read from a stored CPU baseline (issue 15), checked
against the committed baseline's own samples and hand-written documents."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from servegate.judge import calibrate


def _with_baselines(monkeypatch: pytest.MonkeyPatch, root: Path, doc: object) -> None:
    path = root / "cpu" / "m" / "s.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    monkeypatch.setattr(calibrate, "BASELINES_DIR", root)


def test_log_sd_averaged_over_points(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    e = math.e
    doc = {"points": [
        {"requests": {"ttft_ms": [1.0, e, e * e], "tpot_ms": [1.0, 1.0, e, e]}},
        # a non-positive sample is dropped; then only 2 left for ttft: that point is skipped
        {"requests": {"ttft_ms": [1.0, e, 0.0], "tpot_ms": [e, e * e, e ** 3]}},
    ]}
    _with_baselines(monkeypatch, tmp_path, doc)
    ttft, tpot = calibrate._stored_request_cvs("m", "s")
    assert ttft == pytest.approx(1.0)                         # sd of logs 0, 1, 2 (ddof 1)
    sd_tpot_1 = float(np.std([0, 0, 1, 1], ddof=1))           # 0.57735
    assert tpot == pytest.approx((sd_tpot_1 + 1.0) / 2)


@pytest.mark.parametrize("doc", [
    {"points": []},
    {},
    {"points": [{"requests": {"ttft_ms": [1.0, 2.0, 3.0]}}]},         # no tpot samples
    {"points": [{"requests": {"ttft_ms": [1.0, 2.0], "tpot_ms": [1.0, 2.0, 3.0]}}]},
    {"points": [{"requests": None}]},
])
def test_too_few_samples_give_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                      doc: object) -> None:
    _with_baselines(monkeypatch, tmp_path, doc)
    assert calibrate._stored_request_cvs("m", "s") is None


def test_missing_baseline_gives_nothing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(calibrate, "BASELINES_DIR", tmp_path)
    assert calibrate._stored_request_cvs("m", "s") is None
