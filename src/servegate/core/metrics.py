"""The one registry of what servegate measures: per-request quantities and summary metrics.

The client mapping, the judge (direction, recomputation from samples), baselines, reports and
plots all read a metric here. A per-request quantity is one :func:`register_quantity` call (its
``mean_/median_/std_/p90_/p95_/p99_`` summaries come with it); a summary-only metric one
:func:`register_metric` call."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Direction = Literal["lower", "higher"]
STATISTICS: tuple[str, ...] = ("mean", "median", "std", "p90", "p95", "p99")


@dataclass(frozen=True)
class RequestSample:
    """One finished request as sglang's client details report it (seconds, token counts)."""

    ttft_s: float
    itl_s: Sequence[float]
    input_len: int
    output_len: int

    @property
    def latency_s(self) -> float:
        return self.ttft_s + sum(self.itl_s)   # the client's details carry no latency


@dataclass(frozen=True)
class Quantity:
    """A per-request quantity kept in run.json (``points[].requests[name]``) and baselines."""

    name: str                                   # e.g. "ttft_ms"
    unit: str
    direction: Direction
    label: str
    from_request: Callable[[RequestSample], float | None]   # None: not defined for this request


@dataclass(frozen=True)
class Metric:
    """A number per point, from the client's summary JSON (``points[].metrics[name]``)."""

    name: str                                   # e.g. "median_ttft_ms"
    direction: Direction
    unit: str
    label: str
    client_key: str                             # key in sglang.benchmark.serving's summary
    quantity: str | None = None                 # per-request quantity it summarises
    statistic: str | None = None                # mean | median | std | p<q>
    tags: frozenset[str] = field(default_factory=frozenset)


def finite_number(value: Any) -> bool:
    """A value a metric can hold: a real, finite number (JSON's true/false are not numbers)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


QUANTITIES: dict[str, Quantity] = {}
METRICS: dict[str, Metric] = {}


def register_quantity(quantity: Quantity, client_prefix: str | None = None) -> None:
    """Register a per-request quantity and its summary statistics (``mean_<name>``, ...).

    ``client_prefix``: the client's own summary-key stem when it differs from ``name``.
    """
    QUANTITIES[quantity.name] = quantity
    stem = client_prefix or quantity.name
    for stat in STATISTICS:
        register_metric(Metric(
            name=f"{stat}_{quantity.name}", direction=quantity.direction, unit=quantity.unit,
            label=f"{stat} {quantity.label}", client_key=f"{stat}_{stem}",
            quantity=quantity.name, statistic=stat))


def register_metric(metric: Metric) -> None:
    METRICS[metric.name] = metric


def metric(name: str) -> Metric:
    """The registered metric ``name`` (ValueError naming the known ones otherwise)."""
    try:
        return METRICS[name]
    except KeyError:
        raise ValueError(f"metric {name!r}: not registered (known: "
                         f"{', '.join(sorted(METRICS))})") from None


def direction(name: str) -> Direction:
    """Which way is better for ``name``; accuracy metrics are higher-is-better."""
    if name == "accuracy" or name.endswith("_accuracy"):
        return "higher"
    return metric(name).direction


def statistic_fn(statistic: str) -> Callable[[np.ndarray], np.ndarray]:
    """Row-wise ``statistic`` (mean | median | std | p<q>) over the last axis."""
    if statistic == "mean":
        return lambda a: np.mean(a, axis=-1)
    if statistic == "median":
        return lambda a: np.median(a, axis=-1)
    if statistic == "std":
        return lambda a: np.std(a, axis=-1)
    if statistic.startswith("p") and 0 < float(statistic[1:]) < 100:
        return lambda a, q=float(statistic[1:]): np.percentile(a, q, axis=-1)
    raise ValueError(f"statistic {statistic!r}: expected mean, median, std or p<q>")


def summarise(values: Sequence[float], statistic: str) -> float:
    # equivalent: dtype float or inferred, the statistics of numbers come out as floats
    return float(statistic_fn(statistic)(np.asarray(values, dtype=float)[None, :])[0])  # pragma: no mutate


def per_request_samples(samples: Sequence[RequestSample]) -> dict[str, list[float]]:
    """Every registered quantity over ``samples`` (requests where it is undefined are dropped)."""
    out: dict[str, list[float]] = {name: [] for name in QUANTITIES}
    for sample in samples:
        for name, quantity in QUANTITIES.items():
            value = quantity.from_request(sample)
            if value is not None and math.isfinite(value):
                out[name].append(float(value))
    return out


def _tpot_ms(r: RequestSample) -> float | None:
    return (r.latency_s - r.ttft_s) / (r.output_len - 1) * 1000.0 if r.output_len > 1 else None


register_quantity(Quantity("ttft_ms", "ms", "lower", "TTFT", lambda r: r.ttft_s * 1000.0))
register_quantity(Quantity("tpot_ms", "ms", "lower", "TPOT", _tpot_ms))
register_quantity(Quantity("e2e_latency_ms", "ms", "lower", "E2E latency",
                           lambda r: r.latency_s * 1000.0))
for _stat in STATISTICS:   # ITL: summarised by the client, not kept per request
    register_metric(Metric(f"{_stat}_itl_ms", "lower", "ms", f"{_stat} ITL", f"{_stat}_itl_ms"))
for _name, _label in (("output_throughput", "output tokens/s"),
                      ("request_throughput", "requests/s"),
                      ("input_throughput", "input tokens/s"),
                      ("total_throughput", "total tokens/s")):
    register_metric(Metric(_name, "higher", "tok/s" if "token" in _label else "req/s", _label,
                           _name))
register_metric(Metric("max_output_tokens_per_s", "higher", "tok/s", "peak output tokens/s",
                       "max_output_tokens_per_s"))
