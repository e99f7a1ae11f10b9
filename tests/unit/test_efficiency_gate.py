"""The optional gate on the bandwidth ceiling (gate/efficiency.py, gate/judge.reference_values)."""

from __future__ import annotations

import pytest

from pytest_sglang_perf.gate.efficiency import efficiency_values, with_efficiency
from pytest_sglang_perf.gate.terminal import format_value
from pytest_sglang_perf.measurement.metrics import EFFICIENCY, METRICS

VALUES = {"decode_throughput": [[50.0, 52.0], [48.0]], "ttft": [[0.1, 0.1], [0.1]]}


def test_each_request_is_a_share_of_the_ceiling() -> None:
    assert efficiency_values([30.0, 45.0], 60.0) == (0.5, 0.75)
    assert efficiency_values([30.0], 0.0) == ()


def test_a_baseline_gets_its_share_from_the_ceiling_it_was_recorded_against() -> None:
    found = with_efficiency(VALUES, {"ceiling_tok_s": 100.0, "efficiency": 0.5})
    assert found[EFFICIENCY] == [[0.5, 0.52], [0.48]]  # per boot, like the metric's other values
    assert found["ttft"] == VALUES["ttft"]


@pytest.mark.parametrize("roofline", [None, {"unavailable": "no GPU"}, {"ceiling_tok_s": 0}, {"ceiling_tok_s": True}])
def test_a_baseline_without_a_ceiling_has_no_share_to_compare(roofline: dict[str, object] | None) -> None:
    assert EFFICIENCY not in with_efficiency(VALUES, roofline)  # the metric is then new: never guessed


def test_the_share_is_higher_is_better_and_printed_as_a_percentage() -> None:
    assert METRICS[EFFICIENCY].higher_is_better and METRICS[EFFICIENCY].default_tolerance == 0.05
    assert format_value(EFFICIENCY, 0.8312) == "83.1%"
