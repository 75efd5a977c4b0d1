"""One judged statement (a Check) and how a list of them folds into one verdict and exit code.

Shared by baseline comparison, A/B claims and every report writer, so a check reads the same in
the terminal, verdict.json, summary.md and junit.xml.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from servegate.core.errors import EXIT_INCONCLUSIVE, EXIT_INFRA, EXIT_OK, EXIT_REGRESSION
from servegate.judge.stats import Guidance, Interval, direction, verdict

CheckVerdict = Literal["pass", "regression", "improvement", "inconclusive", "error"]
Kind = Literal["baseline", "ab", "accuracy", "claim", "experiment", "integrity"]
# What a claim check states, as a field (nothing parses a check's name): the gated TTFT
# improvement, GSM8K non-inferiority, the no-op's equivalence, the no-op's prefill alignment.
ClaimKind = Literal["improvement", "accuracy", "noop", "noop-prefill"]


@dataclass
class Check:
    """A verdict on one metric at one point, with the numbers that justify it."""

    kind: Kind
    name: str                       # human label, unique within a judgement
    metric: str
    verdict: CheckVerdict
    gate: bool = True               # experiments are reported, never gate
    mode: str | None = None
    concurrency: int | None = None
    reference: str = "baseline"     # "baseline" or the reference mode ("off")
    interval: Interval | None = None
    floor: float | None = None
    current_value: float | None = None
    reference_value: float | None = None
    reason: str = ""
    # decision boundaries on the interval's scale (ratio or difference); None: from the floor
    boundaries: tuple[float, ...] | None = None
    # in the suite's primary (gated) family; a check outside it is reported, never gates
    primary: bool = True
    # the smallest family level alpha at which this check would be decided (Holm's input)
    p_value: float | None = None
    # block checks: the measured noise behind the interval, by level (the noise budget's input)
    noise: dict[str, Any] | None = None
    # a claim's statement (None for every other check)
    claim: ClaimKind | None = None
    resolution: float | None = None     # a gated one-night check's (stats.resolution)

    @property
    def point(self) -> str:
        """``mode@cN`` (or just the mode / "run" when the check is not tied to a concurrency)."""
        if self.mode is None:
            return "run"
        return self.mode if self.concurrency is None else f"{self.mode}@c{self.concurrency}"

    @property
    def by_resolution(self) -> bool:
        """A pass its design's resolution decided: the interval still reaches past the floor."""
        if self.verdict != "pass" or self.resolution is None or self.interval is None:
            return False
        worse = "higher" if self.interval.scale == "difference" else direction(self.metric)
        return verdict(self.interval, worse, self.floor or 0.0) != "pass"

    @property
    def mde(self) -> float | None:
        if self.interval is None or self.floor is None:
            return None
        value = self.interval.minimal_detectable_effect(self.floor)
        return value if math.isfinite(value) else None

    def decision_boundaries(self) -> tuple[float, ...] | None:
        """Where the interval must not reach for the check to be decided."""
        if self.boundaries is not None:
            return self.boundaries
        if self.interval is None or self.floor is None:
            return None
        try:
            worse_is_higher = direction(self.metric) == "lower"
        except ValueError:
            worse_is_higher = True
        shift = 1.0 if self.interval.scale == "ratio" else 0.0
        return (shift + self.floor if worse_is_higher else shift - self.floor,)

    @property
    def guidance(self) -> Guidance | None:
        bounds = self.decision_boundaries()
        if self.interval is None or bounds is None:
            return None
        return self.interval.guidance(bounds)

    @property
    def samples_factor(self) -> float | None:
        """Factor on server starts per side (questions, for accuracy) that would decide at the
        current estimate (None when decided, or when nothing would)."""
        guide = self.guidance
        if guide is None or guide.decided or not math.isfinite(guide.factor):
            return None
        return guide.factor

    def describe(self) -> str:
        """One line: what was compared, the interval, the verdict and why."""
        head = f"[{self.verdict.upper():<12}] {self.name}"
        if self.interval is None:
            return f"{head}: {self.reason}".rstrip(": ")
        iv = self.interval
        if iv.scale == "ratio":
            body = (f"ratio {iv.estimate:.3f} [{iv.low:.3f}, {iv.high:.3f}]"
                    f" ({100 * iv.confidence:.2f}% {iv.method})")
            floor = f", floor ±{100 * self.floor:.1f}%" if self.floor is not None else ""
        else:
            body = (f"diff {iv.estimate:+.4f} [{iv.low:+.4f}, {iv.high:+.4f}]"
                    f" ({100 * iv.confidence:.2f}% {iv.method})")
            floor = f", margin ±{self.floor:.4f}" if self.floor is not None else ""
        extra = ""
        if self.verdict == "inconclusive" and self.mde is not None:
            unit = "%" if iv.scale == "ratio" else " pp"
            extra = f"; MDE {100 * self.mde:.1f}{unit}"
            guide = self.guidance
            if guide is not None and not guide.decided:
                extra += f"; {guide.text}"
        gate = "" if self.gate else (" (experiment, not gating)" if self.kind == "experiment"
                                     else " (not gating)")
        reason = f" — {self.reason}" if self.reason else ""
        return f"{head}: {body}{floor}{extra}{gate}{reason}"

    def to_dict(self) -> dict[str, Any]:
        """verdict.json entry (stable keys; numbers rounded for readability, not for decisions)."""
        iv = self.interval
        guide = self.guidance

        def rnd(value: float | None, digits: int = 6) -> float | None:
            return None if value is None or not math.isfinite(value) else round(value, digits)

        return {
            "kind": self.kind,
            "name": self.name,
            "metric": self.metric,
            "point": self.point,
            "mode": self.mode,
            "concurrency": self.concurrency,
            "reference": self.reference,
            "verdict": self.verdict,
            "gate": self.gate,
            "scale": iv.scale if iv else None,
            "ratio": rnd(iv.estimate) if iv and iv.scale == "ratio" else None,
            "difference": rnd(iv.estimate) if iv and iv.scale == "difference" else None,
            "interval": [rnd(iv.low), rnd(iv.high)] if iv else None,
            "confidence": rnd(iv.confidence) if iv else None,
            "method": iv.method if iv else None,
            "n_current": iv.n_current if iv else None,
            "n_reference": iv.n_reference if iv else None,
            "floor": rnd(self.floor),
            "mde": rnd(self.mde),
            "samples_factor": rnd(self.samples_factor, 3),
            "prompts_factor": rnd(guide.prompts_factor, 3)
            if guide is not None and guide.prompts_factor is not None and not guide.decided
            else None,
            "guidance": guide.text if guide is not None and not guide.decided else None,
            "se": rnd(iv.se) if iv and iv.se is not None else None,
            "df": rnd(iv.df, 3) if iv else None,
            "current_value": rnd(self.current_value),
            "reference_value": rnd(self.reference_value),
            "reason": self.reason,
            "primary": self.primary,
            "claim": self.claim,
            "resolution": rnd(self.resolution),
        }


# verdict.json's keys of a check, in order: the one schema (report/verdict_json.py validates
# against it); derived from ``to_dict`` so the two cannot drift apart.
CHECK_KEYS: tuple[str, ...] = tuple(Check("integrity", "", "", "pass").to_dict())


def overall_verdict(checks: list[Check]) -> CheckVerdict:
    """Fold gating checks: regression > error > inconclusive > improvement > pass."""
    gating = {check.verdict for check in checks if check.gate}
    for state in ("regression", "error", "inconclusive", "improvement"):
        if state in gating:
            return state  # type: ignore[return-value]
    return "pass"


def exit_code(verdict: CheckVerdict, strict: bool) -> int:
    """0 pass/improvement, 1 regression, 2 infra/input error, 3 inconclusive with --strict."""
    if verdict == "regression":
        return EXIT_REGRESSION
    if verdict == "error":
        return EXIT_INFRA
    if verdict == "inconclusive" and strict:
        return EXIT_INCONCLUSIVE
    return EXIT_OK
