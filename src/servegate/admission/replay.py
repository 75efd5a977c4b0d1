"""Drive sglang's real scheduler admission code round by round, the way ``Scheduler`` does
(``_get_new_batch_prefill_raw``: the chunked request first, then ``add_one_req`` in FCFS order,
real KV allocation, finished prefills released into the tree cache). Nothing here re-implements
the budget arithmetic: every number recorded is read off sglang's own objects."""

from __future__ import annotations

import contextlib
import os
import random
from array import array
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from types import SimpleNamespace
from typing import Any

from servegate.admission.scenario import EXACT_FILL_MODES, Scenario, ScenarioError

# Sglang and its loaders live in sglang_api; re-exported here for callers (preflight, tests).
from servegate.admission.sglang_api import Sglang as Sglang
from servegate.admission.sglang_api import load_sglang as load_sglang
from servegate.admission.sglang_api import load_sglang_tree as load_sglang_tree

EXACT_FILL_ENV = "SGLANG_EXACT_CHUNK_FILL"
# What a CPU server runs with: the torch-native attention backend makes sglang write the
# request-to-token rows in Python (0.5.20-0.5.21 would otherwise launch a triton kernel).
CPU_SERVER_ARGS: dict[str, object] = {"attention_backend": "torch_native"}
_VOCAB = 32000


@dataclass
class Admission:
    """One request admitted into one round."""

    rid: str
    prefix_len: int
    extend_len: int
    kv_reserved: int            # growth of the KV budget's current offset for this admission
    chunked: bool               # True when the request was cut (continues next round)
    ledger: dict[str, int] = field(default_factory=dict)   # ledger scenarios: SWA, mamba, dLLM


@dataclass
class Round:
    index: int
    admissions: list[Admission]
    batch_tokens: int
    saturated: bool             # work was still waiting after this round
    rem_chunk_tokens: int | None
    rem_input_tokens: int
    stop: str                   # why admission stopped: chunk, input, kv, drained, other
    ledger: dict[str, Any] = field(default_factory=dict)   # ledger scenarios: tile, SWA caps

    @property
    def extend_lens(self) -> list[int]:
        return [a.extend_len for a in self.admissions]


@dataclass
class Trace:
    scenario: Scenario
    mode: str
    effective: bool             # PrefillAdder.exact_chunk_fill as sglang computed it
    rounds: list[Round]
    pool_tokens: int
    free_after: int             # allocator.available_size() after the replay
    evictable_after: int        # tree_cache.evictable_size() after the replay
    rows_total: int
    rows_free_after: int
    warm_rounds: int = 0
    notes: list[str] = field(default_factory=list)
    ledger: dict[str, Any] = field(default_factory=dict)   # ledger scenarios' whole-replay readings

    def contract(self, sglang_version: str) -> dict[str, Any]:
        """The CLI JSON contract: other tools rely on these keys."""
        return {
            "sglang_version": sglang_version,
            "exact_fill": self.mode,
            "effective": self.effective,
            "scenario": self.scenario.describe(),
            "rounds": [
                {"extend_lens": r.extend_lens, "batch_tokens": r.batch_tokens,
                 "saturated": r.saturated, "prefix_lens": [a.prefix_len for a in r.admissions],
                 "kv_reserved": [a.kv_reserved for a in r.admissions],
                 "rem_chunk_tokens": r.rem_chunk_tokens, "rem_input_tokens": r.rem_input_tokens,
                 "stop": r.stop, **_ledger_keys(r)}
                for r in self.rounds
            ],
            "pool": {"tokens": self.pool_tokens, "free_after": self.free_after,
                     "evictable_after": self.evictable_after, "rows_total": self.rows_total,
                     "rows_free_after": self.rows_free_after},
            **({"ledger": self.ledger} if self.ledger else {}),
        }

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["scenario"] = self.scenario.describe()
        return data


def _forced_exact_chunk_fill() -> bool:
    """servegate's forced mode: the gfx95 gate patched open (constructor conditions still apply)."""
    return True


class UnsupportedMode(ScenarioError):
    """``on``/``forced`` asked of an sglang without the exact-fill gate (before 0.5.20)."""


def _cache_clear(gate: Any) -> None:
    clear = getattr(gate, "cache_clear", None)   # lru_cache'd upstream; an edited copy may not be
    if clear is not None:
        clear()


@contextlib.contextmanager
def cpu_scheduler(sg: Sglang, scenario: Scenario, mode: str) -> Iterator[None]:
    """sglang's server args as a CPU server's (the scenario's page and chunk size) under
    exact-fill ``mode``, restored on exit."""
    override = sg.get_context().override_server_args(
        page_size=scenario.page_size, device="cpu", chunked_prefill_size=scenario.chunk_size,
        **CPU_SERVER_ARGS)
    override.install()
    try:
        with exact_fill_mode(sg, mode):
            yield
    finally:
        override.restore()


@contextlib.contextmanager
def exact_fill_mode(sg: Sglang, mode: str) -> Iterator[None]:
    """Set the env (off: 0, on/forced: 1) and, for forced, patch the gate; restore on exit."""
    if mode not in EXACT_FILL_MODES:
        raise ScenarioError(f"--exact-fill {mode!r} is not one of {', '.join(EXACT_FILL_MODES)}")
    module = sg.policy
    real_gate = getattr(module, "_use_exact_chunk_fill", None)
    if real_gate is None:
        if mode != "off":
            raise UnsupportedMode(
                f"--exact-fill {mode}: sglang {sg.version} at {sg.package_dir} has no "
                f"schedule_policy._use_exact_chunk_fill (exact fill needs sglang >= 0.5.20, "
                f"PR #32888); only 'off' is meaningful on this tree")
        yield
        return
    previous = os.environ.get(EXACT_FILL_ENV)
    os.environ[EXACT_FILL_ENV] = "0" if mode == "off" else "1"
    _cache_clear(real_gate)
    if mode == "forced":
        module._use_exact_chunk_fill = _forced_exact_chunk_fill
    try:
        yield
    finally:
        module._use_exact_chunk_fill = real_gate
        _cache_clear(real_gate)
        if previous is None:
            os.environ.pop(EXACT_FILL_ENV, None)
        else:
            os.environ[EXACT_FILL_ENV] = previous


def _token_ids(scenario: Scenario) -> tuple[list[array], list[array]]:
    """Deterministic prompts: unique first token per request, shared prefixes per group."""
    rng = random.Random(1234)
    groups: dict[int, list[int]] = {}
    for group, length in scenario.warm_prefixes:
        groups[group] = [20000 + group] + [rng.randrange(100, _VOCAB - 1) for _ in range(length - 1)]
    prompts = []
    for index, prompt in enumerate(scenario.prompts):
        head: list[int] = []
        if prompt.group >= 0 and prompt.shared_prefix:
            base = groups.setdefault(
                prompt.group,
                [20000 + prompt.group]
                + [rng.randrange(100, _VOCAB - 1) for _ in range(prompt.shared_prefix - 1)])
            head = base[: prompt.shared_prefix]
        first = [] if head else [1 + index]
        tail = [rng.randrange(100, _VOCAB - 1) for _ in range(prompt.length - len(head) - len(first))]
        prompts.append(array("q", head + first + tail))
    warm = [array("q", groups[g][:n]) for g, n in scenario.warm_prefixes]
    return warm, prompts


class Pools:
    """Real KV pool, allocator, request-row pool and radix cache sized for one scenario."""

    def __init__(self, sg: Sglang, scenario: Scenario, longest: int, requests: int) -> None:
        torch = sg.torch
        page = scenario.page_size
        total = sum(p.length for p in scenario.prompts) + sum(n for _, n in scenario.warm_prefixes)
        raw = 2 * total + 4 * scenario.chunk_size + 8 * page * (requests + 1)
        self.tokens = -(-raw // page) * page
        self.kv = sg.memory_pool.MHATokenToKVPool(
            size=self.tokens, page_size=page, dtype=torch.bfloat16, head_num=1, head_dim=4,
            layer_num=1, device="cpu", enable_memory_saver=False)
        if page == 1:
            self.allocator = sg.token.TokenToKVPoolAllocator(
                self.tokens, torch.bfloat16, "cpu", self.kv, need_sort=False)
        else:
            self.allocator = sg.paged.PagedTokenToKVPoolAllocator(
                self.tokens, page, torch.bfloat16, "cpu", self.kv, need_sort=False)
        self.rows = requests + 2
        self.req_to_token = sg.memory_pool.ReqToTokenPool(
            size=self.rows, max_context_len=longest + page + 8, device="cpu",
            enable_memory_saver=False)
        params = sg.CacheInitParams(
            disable=not scenario.radix, req_to_token_pool=self.req_to_token,
            token_to_kv_pool_allocator=self.allocator, page_size=page,
            tree_components=(sg.ComponentType.FULL,), chunked_prefill_size=scenario.chunk_size)
        # The cache the tree's own registry builds: radix disabled with chunked prefill is a
        # ChunkCache up to 0.5.21, a disabled UnifiedRadixCache from 0.5.22.
        cache = sg.ChunkCache if (not scenario.radix and sg.ChunkCache is not None) else None
        self.tree = (cache or sg.UnifiedRadixCache)(params)


def _ledger_keys(rnd: Round) -> dict[str, Any]:
    """A ledger scenario's extra readings (absent for the plain matrix: its JSON is unchanged)."""
    out: dict[str, Any] = {}
    if any(a.ledger for a in rnd.admissions):
        out["admission_ledger"] = [a.ledger for a in rnd.admissions]
    if rnd.ledger:
        out["ledger"] = rnd.ledger
    return out


class Replayer:
    """The scheduler's round loop; ``observe``/``note``/``end_round`` are hooks a ledger
    scenario overrides to read more of sglang's ledger (no-ops here)."""

    def __init__(self, sg: Sglang, scenario: Scenario, pools: Pools) -> None:
        self.sg = sg
        self.scenario = scenario
        self.pools = pools
        self.model_config = SimpleNamespace(  # only what ScheduleBatch reads; no model is run
            vocab_size=_VOCAB, is_encoder_decoder=False, hf_text_config=SimpleNamespace())
        self.effective: bool | None = None
        self._serial = 0

    def make_req(self, ids: array) -> Any:
        sg = self.sg
        params = sg.SamplingParams(max_new_tokens=1, temperature=0,
                                   ignore_eos=self.scenario.ignore_eos)
        params.normalize(None)
        self._serial += 1
        return sg.batch.Req(f"req-{self._serial}", "", ids, params, vocab_size=_VOCAB)

    def run(self, waiting: list[Any]) -> list[Round]:
        sg, sc, pools = self.sg, self.scenario, self.pools
        policy = sg.policy
        running = sg.batch.ScheduleBatch(reqs=[], batch_is_full=False)
        chunked = None
        rounds: list[Round] = []
        limit = 4 * (sum(len(r.origin_input_ids) for r in waiting) // sc.page_size + len(waiting)) + 8
        while waiting or chunked is not None:
            if len(rounds) > limit:
                raise RuntimeError(f"{sc.scenario_id}: no progress after {limit} rounds")
            if chunked is not None:
                sg.checkpoint(chunked, pools.tree)
            adder = policy.PrefillAdder(
                sc.page_size, pools.tree, pools.allocator, running, 0.7,
                sc.rem_input_tokens, sc.chunk_size)
            if self.effective is None:
                self.effective = bool(getattr(adder, "exact_chunk_fill", False))  # None before 0.5.20
            admissions: list[Admission] = []
            stop = "drained"
            if chunked is not None:
                chunked.init_next_round_input()
                before, seen = sg.kv_offset(adder), self.observe(adder)
                chunked = adder.add_chunked_req(chunked)
                if adder.can_run_list:
                    req = adder.can_run_list[-1]
                    admissions.append(self.note(adder, seen, Admission(
                        req.rid, sg.prefix_len(req), sg.extend_len(req),
                        sg.kv_offset(adder) - before, chunked is not None)))
            for req in waiting:
                state = adder.budget_state()
                if state == policy.AddReqResult.OTHER:
                    stop = self._why(adder)
                    break
                req.init_next_round_input(pools.tree)
                before, seen = sg.kv_offset(adder), self.observe(adder)
                count = len(adder.can_run_list)
                result = adder.add_one_req(
                    req, has_chunked_req=chunked is not None,
                    truncation_align_size=sc.truncation_align_size)
                if len(adder.can_run_list) > count:
                    admissions.append(self.note(adder, seen, Admission(
                        req.rid, sg.prefix_len(req), sg.extend_len(req),
                        sg.kv_offset(adder) - before,
                        adder.new_chunked_req is req)))
                if result != policy.AddReqResult.CONTINUE:
                    stop = "kv" if result == policy.AddReqResult.NO_TOKEN else self._why(adder)
                    break
            can_run = adder.can_run_list
            if not can_run:
                raise RuntimeError(f"{sc.scenario_id}: round {len(rounds)} admitted nothing")
            admitted = set(map(id, can_run))
            waiting = [r for r in waiting if id(r) not in admitted]
            if adder.new_chunked_req is not None:
                chunked = adder.new_chunked_req
            if chunked is not None:
                chunked.inflight_middle_chunks += 1
            batch = sg.batch.ScheduleBatch.init_new(
                can_run, pools.req_to_token, pools.allocator, pools.tree, self.model_config,
                False, sg.SpeculativeAlgorithm.NONE, chunked_req=chunked)
            batch.prepare_for_extend()
            rounds.append(Round(
                index=len(rounds), admissions=admissions,
                batch_tokens=sum(a.extend_len for a in admissions),
                saturated=bool(waiting) or chunked is not None,
                rem_chunk_tokens=adder.rem_chunk_tokens, rem_input_tokens=adder.rem_input_tokens,
                stop=self._stop_reason(stop, adder, bool(waiting) or chunked is not None)))
            self.end_round(adder, rounds[-1])
            self._finish_prefills(can_run)
        return rounds

    def observe(self, adder: Any) -> Any:
        """Ledger readings before one admission (hook)."""
        return None

    def note(self, adder: Any, seen: Any, admission: Admission) -> Admission:
        """Record what the admission charged beyond the KV offset (hook)."""
        return admission

    def end_round(self, adder: Any, rnd: Round) -> None:
        """Record the round's ledger readings (hook)."""

    def _stop_reason(self, stop: str, adder: Any, work_left: bool) -> str:
        if not work_left:
            return "drained"
        return self._why(adder) if stop == "drained" else stop

    @staticmethod
    def _why(adder: Any) -> str:
        if adder.rem_chunk_tokens is not None and adder.rem_chunk_tokens <= 0:
            return "chunk"
        if adder.rem_input_tokens <= 0:
            return "input"
        return "other"

    def _finish_prefills(self, can_run: list[Any]) -> None:
        """What the prefill result handler does: finished prefills go into the tree cache."""
        for req in can_run:
            if req.inflight_middle_chunks <= 0:
                req.output_ids.append(7)
                req.update_finish_state()
                self.sg.release(req, self.pools.tree)
            else:
                req.inflight_middle_chunks -= 1


def replay(scenario: Scenario, mode: str, sg: Sglang | None = None) -> Trace:
    """Replay ``scenario`` under exact-fill ``mode`` against the installed sglang."""
    scenario.validate()
    sg = sg or load_sglang()
    if scenario.ledger is not None:
        raise ScenarioError(f"{scenario.scenario_id}: a ledger scenario replays through "
                            f"ledger_replay.replay_ledger")
    warm_ids, prompt_ids = _token_ids(scenario)
    longest = max(len(ids) for ids in [*warm_ids, *prompt_ids])
    with cpu_scheduler(sg, scenario, mode):
        pools = Pools(sg, scenario, longest, len(warm_ids) + len(prompt_ids))
        replayer = Replayer(sg, scenario, pools)
        warm_rounds = replayer.run([replayer.make_req(ids) for ids in warm_ids]) if warm_ids else []
        rounds = replayer.run([replayer.make_req(ids) for ids in prompt_ids])
    return Trace(
        scenario=scenario, mode=mode, effective=bool(replayer.effective), rounds=rounds,
        pool_tokens=pools.tokens, free_after=int(pools.allocator.available_size()),
        evictable_after=int(pools.tree.evictable_size()), rows_total=pools.rows,
        rows_free_after=int(pools.req_to_token.available_size()), warm_rounds=len(warm_rounds))


def dllm_disables_exact_fill(page_size: int = 64, chunk_size: int = 2048) -> bool:
    """Build a real PrefillAdder with a dLLM config under forced mode: is exact fill off?"""
    sg = load_sglang()
    from sglang.srt.dllm.config import DllmConfig

    scenario = Scenario(page_size=page_size, chunk_size=chunk_size, prompts=())
    with cpu_scheduler(sg, scenario, "forced"):
        pools = Pools(sg, scenario, chunk_size, 1)
        running = sg.batch.ScheduleBatch(reqs=[], batch_is_full=False)
        plain = sg.policy.PrefillAdder(page_size, pools.tree, pools.allocator, running, 0.7,
                                       16384, chunk_size)
        dllm = DllmConfig(algorithm="LowConfidence", algorithm_config={}, block_size=32,
                          mask_id=0, max_running_requests=4)
        with_dllm = sg.policy.PrefillAdder(page_size, pools.tree, pools.allocator, running,
                                           0.7, 16384, chunk_size, dllm_config=dllm)
    if not plain.exact_chunk_fill:
        raise RuntimeError("forced mode did not enable exact fill on a plain PrefillAdder")
    return not with_dllm.exact_chunk_fill
