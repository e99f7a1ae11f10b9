"""A regression that held on a fresh boot, against a baseline of one boot, is tested across the two boots
(gate/across_boots.py): boots that agree establish it, boots as far apart as real SGLang's on a CPU do not."""

from __future__ import annotations

from pytest_sglang_perf.gate.across_boots import held_across_boots

ALPHA = 0.05


def requests(center: float) -> tuple[float, ...]:
    return tuple(center * f for f in (0.99, 1.0, 1.01, 1.0, 0.995))


def test_two_boots_that_agree_establish_a_slowdown() -> None:
    assert held_across_boots("output_throughput", [requests(320.0)], requests(240.0), requests(244.0), ALPHA) is True


def test_two_boots_as_far_apart_as_the_change_do_not() -> None:
    """The issue's CPU boots: 257, 320, 201, 203 tok/s. A baseline on the 320 boot, then boots of 201 and 257."""
    assert held_across_boots("output_throughput", [requests(320.0)], requests(201.0), requests(257.0), ALPHA) is False


def test_the_metrics_direction_decides_what_is_worse() -> None:
    """TTFT is lower-better: two boots that agree on a longer TTFT hold; on a shorter one, nothing is worse."""
    assert held_across_boots("ttft", [requests(0.10)], requests(0.15), requests(0.151), ALPHA) is True
    assert held_across_boots("ttft", [requests(0.10)], requests(0.05), requests(0.051), ALPHA) is False


def test_a_baseline_of_several_boots_or_no_test_is_left_alone() -> None:
    assert held_across_boots("output_throughput", [requests(320.0)] * 2, requests(200.0), requests(201.0),
                             ALPHA) is None
    assert held_across_boots("output_throughput", [requests(320.0)], (), requests(201.0), ALPHA) is None
    assert held_across_boots("no_such_metric", [requests(320.0)], requests(200.0), requests(201.0), ALPHA) is None
