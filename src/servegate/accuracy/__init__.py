"""GSM8K accuracy: per-question records so on/off runs can be compared pairwise (issue 4).

Pipeline inside this package: dataset (load + validate + sha256) -> prompts (few-shot from train)
-> client (bounded-concurrency requests to a running sglang server) -> extract (strict/flexible)
-> runner (records + AccuracyResult) -> paired / report (Wilson, McNemar, MDE, summary.md).
``servegate.commands.bench`` calls :func:`servegate.accuracy.runner.run_gsm8k` once a mode's server is up.
"""

from __future__ import annotations

__all__ = ["run_gsm8k"]


def __getattr__(name: str) -> object:
    # Lazy, so ``import servegate.accuracy.extract`` never pays for ``datasets``/``aiohttp``.
    if name == "run_gsm8k":
        from servegate.accuracy.runner import run_gsm8k

        return run_gsm8k
    raise AttributeError(name)
