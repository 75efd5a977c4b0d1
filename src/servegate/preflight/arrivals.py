"""Replay one load point through sglang's real ``PrefillAdder`` with the closed-loop arrival model of
``sglang.benchmark.serving --max-concurrency C``, counted in scheduler steps; with DP, rank 0's
share (the model and its limits: docs/serve.md, Preflight)."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from servegate.admission.replay import Pools, Replayer, Sglang, exact_fill_mode
from servegate.admission.scenario import Prompt, Scenario
from servegate.preflight.budget import Budget

PREFLIGHT_MODES: dict[str, str] = {"off": "off", "exact": "forced"}   # preflight -> replay mode
_FILLER = 7


@dataclass(frozen=True)
class PointReplay:
    concurrency: int
    requests: int               # requests replayed (this rank's share)
    batches: tuple[int, ...]    # tokens per prefill round, in order
    saturated: tuple[bool, ...]
    effective: bool             # PrefillAdder.exact_chunk_fill as sglang computed it
    repeat: int = 0             # which repeat's client seed (set by the caller)
    seed: int = 0


def _ids(index: int, length: int) -> array:
    """A prompt no other prompt shares a page with (unique first token), like random-ids."""
    head = array("q", [100 + index % 30000])
    return head + array("q", [_FILLER]) * (length - 1)


def _rank_share(inputs: Sequence[int], outputs: Sequence[int], concurrency: int,
                dp: int) -> tuple[list[int], list[int], int]:
    if dp <= 1:
        return list(inputs), list(outputs), concurrency
    return list(inputs[::dp]), list(outputs[::dp]), -(-concurrency // dp)


def replay_point(sg: Sglang, budget: Budget, inputs: Sequence[int], outputs: Sequence[int],
                 concurrency: int, mode: str) -> PointReplay:
    """Replay one (concurrency, mode) point; ``mode`` is ``off`` or ``exact``."""
    ins, outs, conc = _rank_share(inputs, outputs, concurrency, budget.dp_size)
    scenario = Scenario(
        page_size=budget.page_size, chunk_size=budget.chunk_size,
        prompts=tuple(Prompt(n) for n in ins), mix="preflight", radix=budget.radix,
        ignore_eos=True,                         # the client sends ignore_eos (its default)
        max_prefill_tokens=budget.max_prefill_tokens)
    scenario.validate()
    override = sg.get_context().override_server_args(
        page_size=budget.page_size, device="cpu", chunked_prefill_size=budget.chunk_size)
    override.install()
    try:
        with exact_fill_mode(sg, PREFLIGHT_MODES[mode]):
            pools = Pools(sg, scenario, max(ins), len(ins))
            replayer = Replayer(sg, scenario, pools)
            rounds = _closed_loop(replayer, ins, outs, conc)
    finally:
        override.restore()
    return PointReplay(concurrency=concurrency, requests=len(ins),
                       batches=tuple(r.batch_tokens for r in rounds),
                       saturated=tuple(r.saturated for r in rounds),
                       effective=bool(replayer.effective))


def _closed_loop(replayer: Replayer, inputs: list[int], outputs: list[int],
                 concurrency: int) -> list[Any]:
    rounds: list[Any] = []
    remaining: dict[int, int] = {}              # request index -> decode steps left
    burst = list(range(min(concurrency, len(inputs))))
    sent = len(burst)
    while burst:
        reqs = [replayer.make_req(_ids(i, inputs[i])) for i in burst]
        rounds += replayer.run(reqs)
        for i in burst:
            remaining[i] = max(outputs[i] - 1, 0)
        step = min(remaining.values())
        finished = [i for i, left in remaining.items() if left == step]
        for i in list(remaining):
            remaining[i] -= step
        for i in finished:
            del remaining[i]
        burst = list(range(sent, min(sent + len(finished), len(inputs))))
        sent += len(burst)          # empty once every prompt was sent: the rest only decodes
    return rounds
