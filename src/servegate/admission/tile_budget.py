"""The AMD prefill tile budget replayed on CPU, and what it refused.

sglang reads ``SGLANG_PREFILL_TILE_BUDGET`` / ``_MODE`` into module constants at import and
checks them only when ``_IS_HIP``; an env var set now would change nothing. So the replay patches
the three constants of the imported ``schedule_policy`` (restored on exit) and wraps
``PrefillAdder._check_prefill_tile_budget`` to record each refusal with the tile count sglang's
own ``_candidate_tile_metrics`` computed: the check itself still decides.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from servegate.admission.scenario import ScenarioError

_CONSTANTS = ("_IS_HIP", "PREFILL_TILE_BUDGET", "PREFILL_TILE_BUDGET_MODE")


class TileRecorder:
    """Refusals since the last ``drain``: candidate length, tiles, budget, what was admitted."""

    def __init__(self) -> None:
        self.refusals: list[dict[str, Any]] = []
        self.admitted_attr_missing = False

    def drain(self) -> list[dict[str, Any]]:
        out, self.refusals = self.refusals, []
        return out


@contextlib.contextmanager
def tile_budget(policy: Any, budget: int, mode: str) -> Iterator[TileRecorder]:
    """Open sglang's HIP-only tile budget at ``budget`` in ``mode``; record its refusals."""
    missing = [name for name in (*_CONSTANTS, "estimate_prefill_extend_tile_metrics")
               if not hasattr(policy, name)]
    if missing or not hasattr(policy.PrefillAdder, "_check_prefill_tile_budget"):
        raise ScenarioError(
            f"tile-budget scenario: this sglang's schedule_policy has no prefill tile budget "
            f"({', '.join(missing) or 'PrefillAdder._check_prefill_tile_budget'} missing)")
    saved = {name: getattr(policy, name) for name in _CONSTANTS}
    check = policy.PrefillAdder._check_prefill_tile_budget
    recorder = TileRecorder()

    def recording_check(adder: Any, candidate_extend_len: int) -> Any:
        verdict = check(adder, candidate_extend_len)
        # sglang sizes admitted requests by Req.extend_input_len, read with a default of 0.
        recorder.admitted_attr_missing |= any(
            not hasattr(req, "extend_input_len") for req in adder.can_run_list)
        if verdict is not None:
            metrics = adder._candidate_tile_metrics(candidate_extend_len)
            admitted = adder._admitted_extend_lens()
            recorder.refusals.append({
                "candidate": int(candidate_extend_len),
                "tiles": int(metrics.get(adder._tile_admission_metric_key()) or 0),
                "budget": budget, "mode": mode,
                "admitted_lens_seen": [int(n) for n in admitted],
                "admitted_lens": [int(getattr(r, "extend_len", 0)) for r in adder.can_run_list]})
        return verdict

    policy._IS_HIP, policy.PREFILL_TILE_BUDGET, policy.PREFILL_TILE_BUDGET_MODE = True, budget, mode
    policy.PrefillAdder._check_prefill_tile_budget = recording_check
    try:
        yield recorder
    finally:
        policy.PrefillAdder._check_prefill_tile_budget = check
        for name, value in saved.items():
            setattr(policy, name, value)


def round_tiles(policy: Any, extend_lens: list[int], mode: str, block_m: int = 64) -> int:
    """The tiles a whole admitted round costs, by sglang's own estimator (the budget's metric)."""
    metrics = policy.estimate_prefill_extend_tile_metrics(extend_lens, block_m)
    return int(metrics.get(f"{mode}_q_tiles_per_head") or 0)
