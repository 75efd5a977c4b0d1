"""servegate.bench: how head vs base is laid out (live pair or one start per tree after the
other), which devices each server sees, and which server gets an injected slowdown."""

from __future__ import annotations

from pathlib import Path

from servegate.bench import _plan, server_base_env
from servegate.config import load_suite, suite_path
from servegate.measure.logparse import batch_lines
from servegate.plan import LivePair, ServerSlot, device_env, live_pair_layout

REPO = Path(__file__).resolve().parents[2]
AB_CPU = REPO / "tests" / "data" / "suites" / "ab-cpu.toml"
TREES = {"base": None, "head": None}


def test_a_cpu_runs_head_vs_base_as_one_live_pair_per_start() -> None:
    suite = load_suite(AB_CPU)
    layout = live_pair_layout(suite, "cpu")
    assert layout.live and (layout.gpus, layout.per_server) == (0, 0)
    [pair] = _plan(suite, ["off"], dict(TREES), False, "cpu")
    assert isinstance(pair, LivePair) and pair.devices == ()
    assert len(pair.points) == 2 * 4


def test_eight_gpus_hold_two_tp4_servers_with_halves_crossed_over() -> None:
    suite = load_suite(suite_path("nightly"))
    layout = live_pair_layout(suite, "mi355x")
    assert layout.live and (layout.gpus, layout.per_server) == (8, 4), layout
    pairs = _plan(suite, ["off", "on"], dict(TREES), False, "mi355x")
    assert [p.devices for p in pairs] == [((0, 1, 2, 3), (4, 5, 6, 7)),
                                          ((4, 5, 6, 7), (0, 1, 2, 3))]
    assert device_env("gfx95", (4, 5, 6, 7)) == {"HIP_VISIBLE_DEVICES": "4,5,6,7"}
    assert device_env("nvidia", (0, 1)) == {"CUDA_VISIBLE_DEVICES": "0,1"}
    assert device_env("cpu", ()) == {}


def test_too_few_devices_fall_back_to_a_start_per_tree_and_say_so() -> None:
    suite = load_suite(suite_path("premerge"))
    layout = live_pair_layout(suite, "mi325x")           # its smallest CI label has 4 GPUs
    assert not layout.live and "no live pair" in layout.note and "4 GPUs" in layout.note
    slots = _plan(suite, ["off", "on"], dict(TREES), False, "mi325x")
    assert all(isinstance(s, ServerSlot) and s.in_server for s in slots)
    assert sorted(s.arm for s in slots) == ["base", "head"]


def test_one_tree_runs_are_never_live_pairs() -> None:
    slots = _plan(load_suite(suite_path("cpu")), ["off", "on"], {"": None}, False, "cpu")
    assert all(isinstance(s, ServerSlot) for s in slots)


def test_injected_slowdowns_reach_only_the_arms_named() -> None:
    environ = {"SERVEGATE_INJECT_DELAY_MS": "40", "SERVEGATE_INJECT_ARMS": "head",
               "HF_TOKEN": "x"}
    assert server_base_env("head", environ)["SERVEGATE_INJECT_DELAY_MS"] == "40"
    base = server_base_env("base", environ)
    assert not [k for k in base if k.startswith("SERVEGATE_INJECT_")]
    assert base["HF_TOKEN"] == "x"
    unscoped = {"SERVEGATE_INJECT_DELAY_MS": "40"}
    assert server_base_env("base", unscoped) == unscoped == server_base_env("", unscoped)


def test_an_idle_server_log_slice_has_no_batches() -> None:
    busy = ("[2026-12-01 12:30:00] Prefill batch, #new-seq: 1, #new-token: 256, ...\n"
            "[2026-12-01 12:30:01] Decode batch, #running-req: 2, #token: 640, ...\n"
            "[2026-12-01 12:30:01 DP1 TP2] Prefill batch, #new-seq: 2, ...\n")
    idle = ('[2026-12-01 12:30:02] INFO:     127.0.0.1:4 - "GET /v1/models HTTP/1.1" 200 OK\n'
            "servegate-hook: mode ack seq=3 mode=off gate=False in pid 7\n")
    assert batch_lines(busy) == 3 and batch_lines(idle) == 0 and batch_lines("") == 0


def test_the_devices_a_runner_sees_override_the_registry_count() -> None:
    suite = load_suite(suite_path("premerge"))
    assert live_pair_layout(suite, "mi325x", gpus=8).live        # on its 8-GPU label
    assert not live_pair_layout(suite, "mi355x", gpus=6).live    # only 6 visible: fall back
