"""The metric registry and GSM8K answer extraction: the holes mutation testing showed (issue 15).
Expected values are written out by hand."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pytest

from servegate import metrics
from servegate.accuracy import extract


@pytest.mark.parametrize(("text", "value"), [
    ("12.", Decimal("12")), ("$1,234.50", Decimal("1234.50")), ("-.5", Decimal("-0.5")),
    ("12X", None), ("1e5", None), ("Infinity", None), ("NaN", None), ("", None), ("..", None),
])
def test_to_decimal_accepts_plain_numbers_only(text: str, value: Decimal | None) -> None:
    assert extract.to_decimal(text) == value


@pytest.mark.parametrize(("value", "text"), [
    (Decimal("-0.00"), "0"), (Decimal("0E+3"), "0"), (Decimal("18.00"), "18"),
    (Decimal("-0.50"), "-0.5"), (Decimal("1E+3"), "1000"),
])
def test_canonical_text(value: Decimal, text: str) -> None:
    assert extract.canonical(value) == text


def test_gold_answer_is_after_the_last_marker() -> None:
    assert extract.gold_answer("first #### 5 then #### 7") == "7"
    assert extract.gold_answer("a ####5#### 1,000.") == "1000"
    assert extract.gold_answer("no marker 12") is None
    assert extract.gold_answer("so the answer is ####12") == "12"      # no space after ####


@pytest.fixture
def latency_quantity() -> object:
    quantity = metrics.Quantity("queue_ms", "ms", "lower", "queue wait",
                                lambda r: r.ttft_s * 2.0)
    metrics.register_quantity(quantity, client_prefix="queue_wait_ms")
    yield quantity
    metrics.unregister("queue_ms")


@pytest.mark.usefixtures("latency_quantity")
def test_register_quantity_registers_its_statistics_with_the_client_stem() -> None:
    registered = metrics.METRICS["p99_queue_ms"]
    assert registered == metrics.Metric(
        name="p99_queue_ms", direction="lower", unit="ms", label="p99 queue wait",
        client_key="p99_queue_wait_ms", quantity="queue_ms", statistic="p99")
    assert {f"{s}_queue_ms" for s in metrics.STATISTICS} <= set(metrics.METRICS)


def test_register_quantity_without_prefix_uses_its_name() -> None:
    metrics.register_quantity(metrics.Quantity("wait_ms", "s", "higher", "wait",
                                               lambda r: None))
    try:
        assert metrics.METRICS["mean_wait_ms"].client_key == "mean_wait_ms"
        assert metrics.METRICS["mean_wait_ms"].direction == "higher"
        assert metrics.METRICS["mean_wait_ms"].unit == "s"
    finally:
        metrics.unregister("wait_ms")
    assert "wait_ms" not in metrics.QUANTITIES
    assert not any(name.endswith("_wait_ms") for name in metrics.METRICS)


def test_unregister_a_plain_metric() -> None:
    metrics.register_metric(metrics.Metric("peak_x", "higher", "tok/s", "peak x", "peak_x"))
    metrics.unregister("peak_x")
    assert "peak_x" not in metrics.METRICS
    metrics.unregister("never_registered")                     # no error


def test_unknown_metric_lists_the_known_ones() -> None:
    with pytest.raises(ValueError) as info:
        metrics.metric("fastness")
    message = str(info.value)
    assert message.startswith("metric 'fastness': not registered (known: ")
    assert "input_throughput, max_output_tokens_per_s, mean_e2e_latency_ms, " in message
    assert message.endswith("total_throughput)")


def test_accuracy_names_are_higher_is_better_without_registration() -> None:
    assert metrics.direction("accuracy") == "higher"
    assert metrics.direction("gsm8k_accuracy") == "higher"
    assert metrics.direction("median_ttft_ms") == "lower"


def test_statistics_are_over_the_last_axis() -> None:
    cube = np.arange(24, dtype=float).reshape(2, 3, 4)
    for stat, reference in (("mean", np.mean), ("median", np.median), ("std", np.std)):
        assert metrics.statistic_fn(stat)(cube).shape == (2, 3)
        assert np.allclose(metrics.statistic_fn(stat)(cube), reference(cube, axis=2))
    assert np.allclose(metrics.statistic_fn("p50")(cube), np.median(cube, axis=2))
    assert metrics.summarise([1, 2, 3, 10], "p50") == 2.5
    assert metrics.summarise([2, 4], "std") == 1.0


@pytest.mark.parametrize("bad", ["p0", "p100", "p101", "x50", "q50", "max"])
def test_unknown_statistic_is_an_error(bad: str) -> None:
    with pytest.raises(ValueError) as info:
        metrics.statistic_fn(bad)
    assert str(info.value) == f"statistic {bad!r}: expected mean, median, std or p<q>"


def test_fractional_percentiles_in_range_are_fine() -> None:
    assert metrics.summarise([0.0, 10.0], "p0.5") == pytest.approx(0.05)
    assert metrics.summarise([0.0, 10.0], "p99.9") == pytest.approx(9.99)


def test_undefined_and_infinite_samples_are_dropped() -> None:
    one_token = metrics.RequestSample(ttft_s=0.5, itl_s=[], input_len=10, output_len=1)
    two = metrics.RequestSample(ttft_s=0.5, itl_s=[0.1], input_len=10, output_len=2)
    inf = metrics.RequestSample(ttft_s=math.inf, itl_s=[0.1], input_len=10, output_len=2)
    out = metrics.per_request_samples([one_token, two, inf])
    assert out["tpot_ms"] == pytest.approx([100.0])            # 1 output token: no TPOT
    assert out["ttft_ms"] == [500.0, 500.0]
    assert out["e2e_latency_ms"] == pytest.approx([500.0, 600.0])


# The runner-class registry (servegate.runners).

def test_unknown_runner_class_lists_the_registered_ones() -> None:
    from servegate import runners

    with pytest.raises(runners.UnknownRunner) as info:
        runners.get("mi999x")
    assert str(info.value) == (f"runner class 'mi999x': expected one of "
                               f"{', '.join(runners.REGISTRY)} (a new GPU model is one entry "
                               f"in servegate/runners.py)")
    assert "cpu, mi355x, mi300x, " in str(info.value)


def test_architecture_strings() -> None:
    from servegate import runners

    assert runners.arch_of(" GFX942:sramecc+:xnack- ") == "gfx942"
    assert runners.arch_of("cuda") == "nvidia" and runners.arch_of("sm_90") == "nvidia"
    assert runners.arch_of("gfx950") == "gfx95"
    with pytest.raises(runners.UnknownRunner) as info:
        runners.arch_of("gfx90a")
    assert str(info.value) == "GPU architecture 'gfx90a': servegate knows cpu, gfx95, gfx942, nvidia"


def test_a_cpu_class_of_another_name_needs_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from servegate import runners

    monkeypatch.setitem(runners.REGISTRY, "cpu-big",
                        runners.RunnerClass("cpu-big", "cpu", gated=False))
    assert runners.is_gpu("cpu-big") is False
    assert runners.is_gpu("cpu-gfx95") is False and runners.is_gpu("mi300x") is True
    assert runners.is_gpu("gfx95") is True and runners.is_gpu("cpu") is False
