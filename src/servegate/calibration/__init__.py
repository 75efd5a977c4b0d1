"""Calibration stage: simulated nights through the real judge decide every design's size.

:mod:`.worlds` (the noise), :mod:`.designs` (a suite's design and gated family), :mod:`.in_server`
(A/A, power, the claim), :mod:`.pairs` (paired modes, live pairs), :mod:`.history` (learned
priors) and :mod:`.sustained` (the sustained-shift rule); the first three's names re-exported."""

from servegate.calibration.designs import (
    CLAIM_SIZES,
    SLOWDOWNS,
    BlockDesign,
    SimCheck,
    block_design,
    design_row,
    family,
    suite_questions,
)
from servegate.calibration.in_server import (
    Decided,
    Estimates,
    Learned,
    calibrate_design,
    check_prior,
    decide_nights,
    decide_sequential,
    family_levels,
    rate_interval,
)
from servegate.calibration.worlds import (
    ACCURACY,
    BURST_P,
    BURST_SDS,
    CORE_RATIO,
    FLAKY,
    Noise,
    bursty_blocks,
)

__all__ = [
    "ACCURACY", "BURST_P", "BURST_SDS", "CLAIM_SIZES", "CORE_RATIO", "FLAKY", "SLOWDOWNS",
    "BlockDesign", "Decided", "Estimates", "Learned", "Noise", "SimCheck", "block_design",
    "bursty_blocks", "calibrate_design", "check_prior", "decide_nights", "decide_sequential",
    "design_row", "family", "family_levels", "rate_interval", "suite_questions",
]
