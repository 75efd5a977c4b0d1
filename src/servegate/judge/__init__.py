"""Judge stage: baselines with provenance, direction-aware verdicts with intervals, A/B claims.

:func:`servegate.judge.evaluate.judge` decides (a :class:`~servegate.judge.judgement.Judgement`,
written by the report stage). No torch/sglang imports here, and nothing here imports the report
stage.
"""
