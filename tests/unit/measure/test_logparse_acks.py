"""``logparse.mode_acks``: the mode-switch acknowledgements in a server-log slice, as the hook
prints them (``servegate-hook: mode ack seq=N mode=M gate=<bool> in pid P``).

Named ``test_logparse_acks``: ``tests/test_logparse.py`` has the basename ``test_logparse`` and
``tests/unit`` is an ``__init__.py``-free layout (pytest imports test modules by basename)."""

from __future__ import annotations

from pathlib import Path

from servegate.measure import logparse
from servegate.serve.modeswitch import Ack

ACKS = """\
[2026-12-01 10:00:01] Scheduler started
servegate-hook: mode ack seq=0 mode=off gate=False in pid 4101
servegate-hook: mode ack seq=0 mode=off gate=False in pid 4102
[2026-12-01 10:00:03 TP0] Prefill batch, #new-seq: 1, #new-token: 256, ...
servegate-hook: mode ack seq=1 mode=forced gate=True in pid 4102
servegate-hook: mode ack seq=1 mode=forced gate=True in pid 4101
servegate-hook: mode ack seq=2 mode=on gate=maybe in pid 4101
servegate-hook: exact chunk fill gate=True in pid 4101
"""


def test_acks_in_log_order_with_their_gate() -> None:
    assert logparse.mode_acks(ACKS) == [
        Ack(0, "off", False, 4101), Ack(0, "off", False, 4102),
        Ack(1, "forced", True, 4102), Ack(1, "forced", True, 4101)]   # gate=maybe is no ack


def test_no_ack_in_a_log_without_mode_control(test_data: Path) -> None:
    text = (test_data / "sglang-cpu-logs" / "srv64x.log").read_text()
    assert logparse.mode_acks(text) == [] and logparse.mode_acks("") == []


def test_a_block_slice_holds_only_its_switch() -> None:
    cut = ACKS.index("servegate-hook: mode ack seq=1")
    assert {a.seq for a in logparse.mode_acks(ACKS[cut:])} == {1}
