"""The exact-fill read-back and the measured slice: the holes mutation testing showed (issue 15).

The hook lines fed to the parser here are printed by servegate's own hook (its code run in a
fresh interpreter, on a stand-in for sglang's schedule_policy module), so the hook and the parser
cannot drift apart unnoticed. The expected prefill batches are read out of the log by plain
string splitting, independently of the parser's regular expression.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from servegate.measure import logparse
from servegate.measure.exactfill import ExactFillMismatch, check_effective
from servegate.results import Alignment
from servegate.serve.launch import EXACTFILL_HOOK_DIR

# Run the hook's own patch on a stand-in for sglang's schedule_policy module, then call the
# gate the way sglang's PrefillAdder does (twice: the hook reports once per process).
HOOK_PROBE = (
    "import types, sitecustomize as hook\n"
    "policy = types.SimpleNamespace(_use_exact_chunk_fill=lambda: {gate})\n"
    "hook._patch_policy(policy)\n"
    "print(policy._use_exact_chunk_fill(), policy._use_exact_chunk_fill())\n")


def _hook_stderr(env: dict[str, str], gate: bool = False) -> tuple[str, int, str]:
    """What servegate's hook prints (stderr), the pid it ran in, and its stdout."""
    full = {k: v for k, v in os.environ.items()
            if not k.startswith("SERVEGATE_") and k != "PYTHONPATH"}
    full.update(env, PYTHONPATH=str(EXACTFILL_HOOK_DIR))
    proc = subprocess.Popen([sys.executable, "-c", HOOK_PROBE.format(gate=gate)], env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return err, proc.pid, out


def _log(test_data: Path, name: str) -> str:
    return (test_data / "sglang-cpu-logs" / f"{name}.log").read_text()


def _without_old_hook_lines(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if "[sitecustomize]" not in line) + "\n"


def _aligned(saturated: int = 4, fraction: float = 1.0) -> Alignment:
    return Alignment(chunk_size=256, saturated_batches=saturated, aligned_fraction=fraction,
                     min_saturated_tokens=256 if fraction == 1.0 else 200,
                     prefill_tokens=[256] * saturated)


def test_the_forcing_hooks_own_line_is_what_the_parser_finds(test_data: Path) -> None:
    err, pid, out = _hook_stderr({"SERVEGATE_FORCE_EXACT_FILL": "1"})
    assert out.split() == ["True", "True"]
    assert logparse.forced_hook_pids(err) == {pid}
    # A forced run whose log carries only the hook's real line (no older hand-made format).
    log = _without_old_hook_lines(_log(test_data, "srv64x")) + err
    assert logparse.forced_hook_pids(_without_old_hook_lines(_log(test_data, "srv64x"))) == set()
    assert check_effective("forced", "cpu", log, _aligned()) is True


@pytest.mark.parametrize("gate", [True, False])
def test_the_reporting_hooks_own_line_is_what_the_parser_finds(gate: bool) -> None:
    err, pid, out = _hook_stderr({"SERVEGATE_REPORT_EXACT_FILL": "1"}, gate=gate)
    assert out.split() == [str(gate), str(gate)]
    assert err.count("servegate-hook:") == 1            # reported once per process
    assert logparse.gate_values(err) == {gate}
    assert logparse.gate_pids(err) == {pid}
    assert logparse.forced_hook_pids(err) == set()


def test_the_device_doubles_own_line_is_what_the_parser_finds() -> None:
    err, pid, _ = _hook_stderr({"SERVEGATE_EMULATE_GFX95": "1"})
    doubles = logparse.device_doubles(err)
    assert list(doubles) == [pid]
    assert doubles[pid].startswith("gfx95 emulated (gcnArchName=gfx95")


def test_server_processes_reporting_different_gate_values_fail() -> None:
    log = ("servegate-hook: exact chunk fill gate=False in pid 11\n"
           "servegate-hook: exact chunk fill gate=True in pid 12\n")
    for mode, runner in (("off", "cpu"), ("on", "cpu"), ("on", "mi355x"), ("on", "mi300x")):
        with pytest.raises(ExactFillMismatch, match="server processes disagree on the gate"):
            check_effective(mode, runner, log, _aligned(0, 0.0))


def test_processes_agreeing_on_the_gate_pass() -> None:
    log = ("servegate-hook: exact chunk fill gate=True in pid 11\n"
           "servegate-hook: exact chunk fill gate=True in pid 12\n")
    assert check_effective("on", "mi355x", log, _aligned()) is True
    off = log.replace("True", "False")
    assert check_effective("on", "mi300x", off, _aligned(3, 0.5)) is False   # not judged: off


def test_gate_on_where_it_must_be_off_fails() -> None:
    on = "servegate-hook: exact chunk fill gate=True in pid 11\n"
    with pytest.raises(ExactFillMismatch, match="mode off on runner cpu: exact fill expected "
                                                "inactive, but the server's gate is True"):
        check_effective("off", "cpu", on, _aligned())
    with pytest.raises(ExactFillMismatch, match="expected inactive"):
        check_effective("on", "mi300x", on, _aligned())


def test_effective_without_saturated_batches_is_not_misaligned() -> None:
    on = "servegate-hook: exact chunk fill gate=True in pid 11\n"
    assert check_effective("on", "mi355x", on, _aligned(0, 0.0)) is True
    with pytest.raises(ExactFillMismatch, match=r"only 50% of 3 saturated prefill batches are "
                                                r"exactly 256 tokens \(smallest 200\)"):
        check_effective("on", "mi355x", on, _aligned(3, 0.5))


def _independent_batches_after_last_flush(text: str) -> list[tuple[int, int]]:
    """(new tokens, pending tokens) of every prefill line after the last flush, by splitting."""
    lines = text.splitlines()
    last = max(i for i, line in enumerate(lines) if "Cache flushed successfully!" in line)
    out = []
    for line in lines[last + 1:]:
        if "Prefill batch" in line:
            new = int(line.split("#new-token: ")[1].split(",")[0])
            pending = int(line.split("#pending-token: ")[1].split(",")[0])
            out.append((new, pending))
    return out


@pytest.mark.parametrize("name", ["srv16", "srv16x", "srv64", "srv64x"])
def test_measured_slice_is_every_batch_after_the_last_flush(test_data: Path, name: str) -> None:
    """Not only the first batch: the whole measured slice is exactly the prefill lines after
    the last flush marker (earlier flushes and their batches excluded)."""
    log = test_data / "sglang-cpu-logs" / f"{name}.log"
    expected = _independent_batches_after_last_flush(log.read_text())
    assert len(expected) >= 5
    assert len(expected) < len(logparse.parse_prefill_lines(log.read_text())) - 2
    text = logparse.measured_text(log, 0)
    got = [(b.new_tokens, b.pending_tokens) for b in logparse.parse_prefill_lines(text)]
    assert got == expected


def test_measured_slice_honours_the_end_offset(test_data: Path, tmp_path: Path) -> None:
    log = test_data / "sglang-cpu-logs" / "srv64x.log"
    raw = log.read_bytes()
    end = raw.rindex(b"Prefill batch")                  # stop before the last prefill line
    text = logparse.measured_text(log, 0, end)
    expected = _independent_batches_after_last_flush(raw.decode())[:-1]
    assert [(b.new_tokens, b.pending_tokens)
            for b in logparse.parse_prefill_lines(text)] == expected
    assert logparse.read_slice(log, 10, 5) == ""         # an end before the start: nothing
    no_flush = tmp_path / "server.log"
    no_flush.write_text("Prefill batch, #new-seq: 1, #new-token: 9, #cached-token: 0, "
                        "#queue-req: 0, #pending-token: 0,\n")
    assert logparse.measured_text(no_flush, 0, require_flush=False) == no_flush.read_text()


def test_saturated_means_pending_tokens_left_over() -> None:
    assert logparse.PrefillBatch(1, 10, 0, 0, 1).saturated
    assert not logparse.PrefillBatch(1, 10, 0, 5, 0).saturated


def test_alignment_counts_only_saturated_batches() -> None:
    def batch(new: int, pending: int) -> logparse.PrefillBatch:
        return logparse.PrefillBatch(1, new, 0, 0, pending)

    stats = logparse.alignment([batch(256, 5), batch(200, 5), batch(256, 5), batch(256, 5),
                                batch(30, 0)], 256)
    assert stats == {"chunk_size": 256, "saturated_batches": 4, "aligned_fraction": 0.75,
                     "min_saturated_tokens": 200, "prefill_tokens": [256, 200, 256, 256, 30]}
    none = logparse.alignment([batch(30, 0)], 256)
    assert (none["saturated_batches"], none["aligned_fraction"],
            none["min_saturated_tokens"]) == (0, 0.0, 0)


def test_forced_always_expects_exact_fill() -> None:
    from servegate.measure.exactfill import expected_effective

    assert all(expected_effective("forced", r) for r in ("cpu", "mi300x", "h200", "mi355x"))
    assert [expected_effective("on", r) for r in ("cpu", "mi300x", "mi355x", "cpu-gfx95")] == \
        [False, False, True, True]
    assert not any(expected_effective("off", r) for r in ("cpu", "mi355x"))


def test_forced_without_the_hook_line_says_why() -> None:
    with pytest.raises(ExactFillMismatch) as info:
        check_effective("forced", "cpu", "nothing here\n", _aligned())
    assert str(info.value) == ("mode forced, but the server log has no 'servegate-hook: exact "
                               "chunk fill forced' line (hook not on the server's PYTHONPATH, "
                               "or sglang lacks the gate)")


def test_processes_emulating_different_devices_fail() -> None:
    from servegate.measure.exactfill import device_double

    log = ("servegate-hook: device double: gfx95 emulated (gcnArchName=gfx950:sramecc+) in pid 1\n"
           "servegate-hook: device double: gfx95 emulated (gcnArchName=gfx942) in pid 2\n")
    with pytest.raises(ExactFillMismatch, match="processes emulated different devices"):
        device_double("cpu-gfx95", log)
    same = log.replace("gfx942", "gfx950:sramecc+")
    assert device_double("cpu-gfx95", same) == \
        "gfx95 emulated (gcnArchName=gfx950:sramecc+) in pids [1, 2]"


def _prefill(new: int, pending: int, cached: int = 0, dp: int | None = None) -> str:
    stamp = f"[2026-11-30 11:05:16 DP{dp} TP0] " if dp is not None else "[2026-11-30 11:05:16] "
    return (f"{stamp}Prefill batch, #new-seq: 1, #new-token: {new}, #cached-token: {cached}, "
            f"token usage: 0.10, #running-req: 0, #queue-req: 0, #pending-token: {pending}, "
            f"cpu graph: False\n")


def test_every_field_of_a_prefill_line_is_read() -> None:
    (batch,) = logparse.parse_prefill_lines(_prefill(200, 7, cached=64, dp=3))
    assert batch == logparse.PrefillBatch(1, 200, 64, 0, 7, 3)


def test_a_flush_marker_at_the_very_start_of_the_slice(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(_prefill(6, 0) + "Cache flushed successfully!\n" + _prefill(256, 9))
    start = log.read_bytes().index(b"Cache flushed")
    text = logparse.measured_text(log, start)
    assert [b.new_tokens for b in logparse.parse_prefill_lines(text)] == [256]


def test_undecodable_bytes_in_the_log_are_replaced(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"\xff\xfe garbage\n" + _prefill(256, 9).encode())
    text = logparse.read_slice(log)
    assert text.startswith("\ufffd\ufffd garbage")
    assert [b.new_tokens for b in logparse.parse_prefill_lines(text)] == [256]


def test_attention_dp_chunk_is_an_integer_share_per_rank() -> None:
    lines = (_prefill(128, 5, dp=0) + _prefill(100, 5, dp=0) + _prefill(128, 5, dp=1)
             + _prefill(40, 0, dp=1))
    stats = logparse.alignment(logparse.parse_prefill_lines(lines), 256, 2)
    assert '"chunk_size": 128,' in json.dumps(stats)              # 256 // 2, not 128.0
    assert stats["configured_chunk_size"] == 256 and stats["dp_attention_size"] == 2
    assert (stats["saturated_batches"], stats["aligned_fraction"],
            stats["min_saturated_tokens"]) == (3, 2 / 3, 100)
    assert stats["prefill_tokens"] == [128, 100, 128, 40]
    assert stats["per_rank"]["1"]["min_saturated_tokens"] == 128


def test_dp_ranks_without_saturated_batches() -> None:
    lines = _prefill(40, 0, dp=0) + _prefill(30, 0, dp=1)
    stats = logparse.alignment(logparse.parse_prefill_lines(lines), 256, 2)
    assert (stats["saturated_batches"], stats["aligned_fraction"],
            stats["min_saturated_tokens"]) == (0, 0.0, 0)
    one_idle = _prefill(128, 5, dp=0) + _prefill(30, 0, dp=1)
    stats = logparse.alignment(logparse.parse_prefill_lines(one_idle), 256, 2)
    assert (stats["min_saturated_tokens"], stats["aligned_fraction"]) == (128, 1.0)


def test_mixed_tagged_and_untagged_lines_are_an_error() -> None:
    lines = _prefill(128, 5, dp=0) + _prefill(128, 5)
    with pytest.raises(logparse.LogParseError) as info:
        logparse.alignment(logparse.parse_prefill_lines(lines), 256, 2)
    assert str(info.value) == "prefill lines mix DP-tagged and untagged streams"


# The load client's process handling (a stand-in child: a short python program).

def _client(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_client_output_and_errors_go_to_its_log(tmp_path: Path) -> None:
    from servegate.measure.client import run_client

    log = tmp_path / "deep" / "er" / "client.log"
    run_client(_client("import os, sys; print('out', os.environ['SG_X']); "
                       "print('err', file=sys.stderr)"), log, 60, env={**os.environ,
                                                                        "SG_X": "42"})
    assert log.read_text().split() == ["out", "42", "err"]


def test_client_exit_code_is_an_error_with_the_log_tail(tmp_path: Path) -> None:
    from servegate.measure.client import ClientError, run_client

    log = tmp_path / "client.log"
    with pytest.raises(ClientError) as info:
        run_client(_client("print('boom: no server'); raise SystemExit(3)"), log, 60)
    assert str(info.value).startswith(f"load client exited with code 3 (log: {log})\n")
    assert "boom: no server" in str(info.value)


def test_client_timeout_and_watch_stop_it(tmp_path: Path) -> None:
    import time

    from servegate.measure.client import ClientError, run_client

    log = tmp_path / "client.log"
    started = time.monotonic()
    with pytest.raises(ClientError, match=r"load client timed out after 1 s \(log: "):
        run_client(_client("import time; time.sleep(60)"), log, 1.0, poll_s=0.2)
    assert time.monotonic() - started < 20

    calls: list[int] = []

    def server_died() -> None:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("server died")

    started = time.monotonic()
    with pytest.raises(RuntimeError, match="server died"):
        run_client(_client("import time; time.sleep(60)"), log, 60, watch=server_died,
                   poll_s=0.1)
    assert len(calls) == 2 and time.monotonic() - started < 20


def _record(**override: object) -> dict[str, object]:
    record: dict[str, object] = {
        "completed": 3, "duration": 3.5, "median_ttft_ms": 1.0, "median_tpot_ms": 1.0,
        "ttfts": [0.5, 0.0, 0.7], "itls": [[0.1], [], [0.2]], "input_lens": [300, 301, 302],
        "output_lens": [2, 2, 2], "errors": ["", "", ""]}
    record.update(override)
    return record


def test_failed_and_empty_requests_are_skipped_not_the_rest(tmp_path: Path) -> None:
    from servegate.measure.client import parse_client_jsonl

    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(_record(ttfts=[0.5, 0.6, None, 0.7, 0.8],
                                       itls=[[0.1], [0.1], [], [0.2], [0.3]],
                                       input_lens=[300, 301, 302, 303, 304],
                                       output_lens=[2, 2, 2, 2, 2],
                                       errors=["", "timeout", "", "", ""], completed=5)))
    _, requests = parse_client_jsonl(path)
    assert requests["input_lens"] == [300, 303, 304]          # after a skipped one: go on
    assert requests["ttft_ms"] == [500.0, 700.0, 800.0]
    path.write_text(json.dumps(_record()))
    _, requests = parse_client_jsonl(path)
    assert requests["input_lens"] == [300, 302]               # a zero TTFT is not a sample


def test_client_errors_quoted_three_at_most_and_cut(tmp_path: Path) -> None:
    from servegate.measure.client import ClientError, parse_client_jsonl

    path = tmp_path / "c.jsonl"
    errors = ["e1", "x" * 300, "", "e3", "e4"]
    path.write_text(json.dumps(_record(completed=0, errors=errors, ttfts=[0.1] * 5,
                                       itls=[[]] * 5, input_lens=[1] * 5, output_lens=[1] * 5)))
    with pytest.raises(ClientError) as info:
        parse_client_jsonl(path)
    assert str(info.value) == f"{path}: 0 requests completed; errors: e1; {'x' * 200}; e3"
    path.write_text(json.dumps(_record(completed=0, errors=["", "", ""])))
    with pytest.raises(ClientError, match=r"errors: none reported$"):
        parse_client_jsonl(path)


def test_missing_details_are_all_named(tmp_path: Path) -> None:
    from servegate.measure.client import ClientError, parse_client_jsonl

    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps({k: v for k, v in _record().items()
                                if k not in ("itls", "errors")}))
    with pytest.raises(ClientError, match=r"details missing \(itls, errors\); was "
                                          r"--output-details passed\?"):
        parse_client_jsonl(path)


def test_undecodable_client_output_is_still_read(tmp_path: Path) -> None:
    from servegate.measure.client import parse_client_jsonl

    path = tmp_path / "c.jsonl"
    path.write_bytes(b"\xff\xfe warm-up noise\n" + json.dumps(_record()).encode() + b"\n")
    metrics, _ = parse_client_jsonl(path)
    assert metrics["completed"] == 3


def test_client_never_reads_the_callers_stdin(tmp_path: Path) -> None:
    """The client's stdin is empty even when the caller's stays open (a terminal, a pipe)."""
    from servegate.measure.client import run_client

    log = tmp_path / "client.log"
    read_end, write_end = os.pipe()
    saved = os.dup(0)
    os.dup2(read_end, 0)
    try:
        run_client(_client("import sys; print(repr(sys.stdin.read()))"), log, 10)
    finally:
        os.dup2(saved, 0)
        for fd in (saved, read_end, write_end):
            os.close(fd)
    assert log.read_text().strip() == "''"
