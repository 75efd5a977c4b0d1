"""Judge stage: baselines with provenance, direction-aware verdicts with intervals, A/B claims.

Entry points: ``servegate compare`` (:mod:`servegate.judge.command`) and
``servegate update-baselines`` (:mod:`servegate.judge.update`). No torch/sglang imports here.
"""
