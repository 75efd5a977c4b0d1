"""GSM8K accuracy: per-question records so on/off runs can be compared pairwise (issue 4).

Pipeline inside this package: dataset (load + validate + sha256) -> prompts (few-shot from train)
-> client (bounded-concurrency requests to a running sglang server) -> extract (strict/flexible)
-> runner (records + AccuracyResult) -> paired / report (Wilson, McNemar, MDE, summary.md).
``servegate.commands.bench`` calls :func:`servegate.accuracy.runner.run_gsm8k` once a mode's server is up.
"""
