"""A dLLM config's admission round: is its budget still charged page-ceiled under forced fill?

``PrefillAdder`` turns exact fill off for a dLLM config (risk 4 of PR #32888's review); this
replays ``SchedulerDllmMixin.process_dllm_incoming_reqs``'s calls on a real adder (built as
``_create_dllm_prefill_adder`` builds it) with separate context encoding, the one dLLM mode whose
extends are prompt lengths, and records what each admission took off ``rem_dllm_tokens``."""

from __future__ import annotations

from typing import Any

from servegate.admission.replay import (
    _VOCAB,
    Admission,
    Pools,
    Round,
    Sglang,
    Trace,
    _token_ids,
    cpu_scheduler,
)
from servegate.admission.scenario import Scenario, ScenarioError


def _dllm_config(block_size: int, requests: int) -> Any:
    try:
        from sglang.srt.dllm.config import DllmConfig
    except ImportError as err:
        raise ScenarioError(f"dllm scenario: this sglang has no DllmConfig ({err})") from err
    return DllmConfig(algorithm="LowConfidence", algorithm_config={}, block_size=block_size,
                      mask_id=0, max_running_requests=requests,
                      requires_separate_context_encoding=True)


def replay_dllm(scenario: Scenario, mode: str, sg: Sglang) -> Trace:
    spec = scenario.ledger
    assert spec is not None and spec.dllm_block_size is not None
    _, prompt_ids = _token_ids(scenario)
    longest = max(len(ids) for ids in prompt_ids) + spec.dllm_block_size
    config = _dllm_config(spec.dllm_block_size, len(prompt_ids))
    with cpu_scheduler(sg, scenario, mode):
        pools = Pools(sg, scenario, longest, len(prompt_ids))
        running = sg.batch.ScheduleBatch(reqs=[], batch_is_full=False)
        adder = sg.policy.PrefillAdder(
            scenario.page_size, pools.tree, pools.allocator, running, 0.7,
            scenario.rem_input_tokens, scenario.chunk_size, dllm_config=config)
        admissions, stop = _admit(sg, scenario, pools, adder, prompt_ids, config)
    rnd = Round(index=0, admissions=admissions, batch_tokens=sum(a.extend_len for a in admissions),
                saturated=len(admissions) < len(prompt_ids), rem_chunk_tokens=adder.rem_chunk_tokens,
                rem_input_tokens=adder.rem_input_tokens, stop=stop,
                ledger={"rem_dllm_tokens": int(adder.rem_dllm_tokens)})
    return Trace(scenario=scenario, mode=mode, effective=bool(adder.exact_chunk_fill), rounds=[rnd],
                 pool_tokens=pools.tokens, free_after=int(pools.allocator.available_size()),
                 evictable_after=int(pools.tree.evictable_size()), rows_total=pools.rows,
                 rows_free_after=int(pools.req_to_token.available_size()),
                 ledger={"dllm_separate_context_encoding": True,
                         "dllm_block_size": spec.dllm_block_size})


def _admit(sg: Sglang, scenario: Scenario, pools: Pools, adder: Any, prompt_ids: list[Any],
           config: Any) -> tuple[list[Admission], str]:
    admissions: list[Admission] = []
    stop = "drained"
    for index, ids in enumerate(prompt_ids):
        params = sg.SamplingParams(max_new_tokens=1, temperature=0)
        params.normalize(None)
        req = sg.batch.Req(f"req-{index + 1}", "", ids, params, vocab_size=_VOCAB,
                           dllm_config=config)
        req.init_next_round_input(pools.tree)
        before, dllm_before = sg.kv_offset(adder), int(adder.rem_dllm_tokens)
        count = len(adder.can_run_list)
        result = adder.add_one_req(req, has_chunked_req=True, truncation_align_size=None)
        if len(adder.can_run_list) > count:
            admissions.append(Admission(
                req.rid, sg.prefix_len(req), sg.extend_len(req), sg.kv_offset(adder) - before,
                adder.new_chunked_req is req,
                ledger={"dllm_charge": dllm_before - int(adder.rem_dllm_tokens)}))
        if result != sg.policy.AddReqResult.CONTINUE:
            stop = "kv" if result == sg.policy.AddReqResult.NO_TOKEN else "dllm"
            break
    if not admissions:
        raise ScenarioError(f"{scenario.scenario_id}: the dLLM adder admitted nothing")
    return admissions, stop
