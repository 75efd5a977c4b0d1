"""Calibration stage: simulated nights through the real judge decide every design's size.

One module per job: :mod:`.worlds` (the noise every simulated night is drawn from),
:mod:`.designs` (a suite's design and its gated family, as the judge builds it),
:mod:`.in_server` (nights of the in-server design: A/A, power, the claim), :mod:`.pairs`
(paired modes and live pairs), :mod:`.history` (a runner's learned priors vs its first night)
and :mod:`.sustained` (the sustained-shift rule over simulated histories). The public names
of the first three are re-exported here.
"""

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
