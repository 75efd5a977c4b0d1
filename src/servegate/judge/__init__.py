"""Judge stage: baselines with provenance, direction-aware verdicts with intervals, A/B claims.

:func:`servegate.judge.evaluate.judge` decides (a :class:`~servegate.judge.judgement.Judgement`,
written by the report stage); ``servegate compare`` (:mod:`servegate.commands.compare`) and
``servegate update-baselines`` (:mod:`servegate.commands.update_baselines`) and ``servegate
calibrate`` (:mod:`servegate.commands.calibrate`, over :mod:`servegate.calibration`)
are its commands. No torch/sglang imports here, and nothing here imports the report stage.
"""
