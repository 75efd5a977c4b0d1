"""The exact prompt and output lengths ``python -m sglang.benchmark.serving`` will send: the client
seeds numpy's global generator with ``--seed`` and draws input then output lengths with
``compute_random_lens``; calling sglang's own function in that order reproduces them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lengths:
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


def draw_lengths(seed: int, input_len: int, output_len: int, range_ratio: float,
                 num_prompts: int) -> Lengths:
    """The client's lengths for one point, drawn with sglang's sampler; numpy's global state is
    restored afterwards."""
    import numpy as np
    from sglang.benchmark.datasets.common import compute_random_lens

    state = np.random.get_state()
    try:
        np.random.seed(seed)
        inputs = compute_random_lens(full_len=input_len, range_ratio=range_ratio, num=num_prompts)
        outputs = compute_random_lens(full_len=output_len, range_ratio=range_ratio,
                                      num=num_prompts)
    finally:
        np.random.set_state(state)
    return Lengths(tuple(int(n) for n in inputs), tuple(int(n) for n in outputs))
