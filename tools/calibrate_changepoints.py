"""Measure a change-point detector on synthetic nights: detection and false-alarm rates by seed.

``python tools/calibrate_changepoints.py [--seeds 200] [--detector ruptures|e-divisive|otava]``
prints one row per scenario (development tooling, not part of the installed package). This is
how the penalty in :mod:`servegate.history.changepoints` was chosen and how ruptures was
compared with the alternatives (numbers in docs/history.md).
``e-divisive`` needs ``signal-processing-algorithms`` and ``otava`` needs ``apache-otava``; they
are not servegate dependencies (their pins clash with sglang's numpy/scipy), so run those in a
scratch venv with ``PYTHONPATH=src``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

Detector = Callable[[list[list[float]]], list[int]]


@dataclass(frozen=True)
class Scenario:
    """``nights`` nights of lognormal noise ``noise``; ``step`` from night ``at`` on (0: none)."""

    name: str
    nights: int = 40
    noise: float = 0.02
    step: float = 0.0
    at: int = 20
    repeats: int = 1
    blip: float = 0.0           # one night at ``at`` scaled by (1 + blip), then back

    def series(self, seed: int) -> list[list[float]]:
        rng = np.random.default_rng(seed)
        level = np.ones(self.nights)
        if self.step:
            level[self.at:] *= 1.0 + self.step
        if self.blip:
            level[self.at] *= 1.0 + self.blip
        values = 100.0 * level[:, None] * np.exp(rng.normal(0.0, self.noise,
                                                            (self.nights, self.repeats)))
        return values.tolist()


SCENARIOS: tuple[Scenario, ...] = (
    Scenario("flat, 2 % noise"),
    Scenario("8 % step at night 20", step=0.08),
    Scenario("8 % step, 3 repeats/night", step=0.08, repeats=3),
    Scenario("4 % step at night 20", step=0.04),
    Scenario("8 % step on the last night", step=0.08, at=39),
    Scenario("8 % step, last two nights", step=0.08, at=38),
    Scenario("10 % one-night blip at 20", blip=0.10),
    Scenario("flat, 5 % noise (CPU)", noise=0.05),
    Scenario("flat, 10 nights", nights=10),
    Scenario("flat, 5 nights", nights=5),
    Scenario("8 % step at night 5 of 10", nights=10, step=0.08, at=5),
    Scenario("20 % step, 5 % noise", noise=0.05, step=0.20),
)


def ruptures_detector(**kwargs: float) -> Detector:
    from servegate.history.changepoints import detect

    def run(nights: list[list[float]]) -> list[int]:
        return [cp.index for cp in detect(nights, **kwargs).change_points]   # type: ignore[arg-type]
    return run


def edivisive_detector(pvalue: float = 0.05, permutations: int = 100) -> Detector:
    from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive

    def run(nights: list[list[float]]) -> list[int]:
        series = np.log(np.asarray([np.exp(np.mean(np.log(v))) for v in nights]))
        return sorted(int(i) for i in e_divisive(series, pvalue=pvalue, permutations=permutations))
    return run


def otava_detector(max_pvalue: float = 0.001) -> Detector:
    from otava.analysis import compute_change_points

    def run(nights: list[list[float]]) -> list[int]:
        series = [float(np.mean(np.log(v))) for v in nights]
        points, _ = compute_change_points(series, window_len=50, max_pvalue=max_pvalue)
        return sorted(int(cp.index) for cp in points)
    return run


@dataclass(frozen=True)
class Rates:
    scenario: str
    seeds: int
    exact_one_near: float     # exactly one change point, within `tolerance` nights of the step
    any_near: float           # at least one change point within tolerance
    false_alarm: float        # a change point farther than tolerance (any, for a flat series)
    seconds_per_series: float


def measure(detector: Detector, scenario: Scenario, seeds: Sequence[int],
            tolerance: int = 2) -> Rates:
    exact = near = false = 0
    start = time.perf_counter()
    for seed in seeds:
        found = detector(scenario.series(seed))
        target = scenario.step != 0.0
        close = [i for i in found if target and abs(i - scenario.at) <= tolerance]
        far = [i for i in found if i not in close]
        near += bool(close)
        exact += len(close) == 1 and not far
        false += bool(far)
    elapsed = (time.perf_counter() - start) / max(1, len(seeds))
    count = max(1, len(seeds))
    return Rates(scenario.name, len(seeds), exact / count, near / count, false / count, elapsed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/calibrate_changepoints.py",
                                     description=__doc__)
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--detector", choices=("ruptures", "e-divisive", "otava"),
                        default="ruptures")
    parser.add_argument("--beta", type=float, default=None, help="ruptures penalty factor")
    args = parser.parse_args(argv)
    if args.detector == "ruptures":
        detector = ruptures_detector(**({} if args.beta is None else {"beta": args.beta}))
    elif args.detector == "e-divisive":
        np.random.seed(args.first_seed)    # e_divisive's permutations use the global RNG
        detector = edivisive_detector()
    else:
        detector = otava_detector()
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    print(f"detector {args.detector}"
          + (f" beta {args.beta}" if args.beta is not None else "")
          + f", seeds {seeds.start}..{seeds.stop - 1}, tolerance +-2 nights")
    print(f"{'scenario':<30} {'one near':>9} {'any near':>9} {'false':>7} {'ms/series':>10}")
    for scenario in SCENARIOS:
        rates = measure(detector, scenario, seeds)
        print(f"{rates.scenario:<30} {rates.exact_one_near:>9.3f} {rates.any_near:>9.3f} "
              f"{rates.false_alarm:>7.3f} {rates.seconds_per_series * 1000:>10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
