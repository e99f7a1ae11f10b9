"""The optional gate on the bandwidth ceiling (gate/efficiency.py, gate/judge.reference_values)."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_sglang_perf.gate.compare import MetricCheck, Verdict, check_all
from pytest_sglang_perf.gate.efficiency import basis_difference, efficiency_values, judged_efficiency, with_efficiency
from pytest_sglang_perf.gate.formats import format_value
from pytest_sglang_perf.measurement.metrics import EFFICIENCY, METRICS
from pytest_sglang_perf.roofline.ceiling import Bandwidth, DecodeCeiling
from pytest_sglang_perf.roofline.step_bytes import StepBytes

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


BANDWIDTH: dict[str, object] = {"gb_s": 4200.0, "source": "measured", "gpu": "NVIDIA H200", "detail": ""}
RECORD: dict[str, Any] = {"efficiency": 0.5, "ceiling_tok_s": 100.0, "bytes_exact": False,
          "bandwidth": BANDWIDTH,
          "step_bytes": {"target": 15.0e9, "draft": 0.0, "kv": 0.08e9}}


def _check(verdict: Verdict, measured: float | None = 0.5) -> MetricCheck:
    return MetricCheck(EFFICIENCY, "ratio", 0.5, measured, 0.0, 0.05, verdict)


@pytest.mark.parametrize(("change", "expected"), [
    ({"bandwidth": {**BANDWIDTH, "source": "datasheet"}}, "bandwidth source was 'measured', now 'datasheet'"),
    ({"bandwidth": {**BANDWIDTH, "gpu": "NVIDIA H100"}}, "bandwidth gpu was 'NVIDIA H200'"),
    ({"bytes_exact": True}, "bytes were estimated, now exact"),
    ({"step_bytes": {"target": 15.2e9, "draft": 0.0, "kv": 0.08e9}}, "were 15.00 GB, now 15.20 GB"),
])
def test_ceilings_computed_on_other_grounds_are_not_compared(change: dict[str, object], expected: str) -> None:
    why = basis_difference(RECORD, {**RECORD, **change})
    assert why is not None and expected in why


def test_a_regression_against_a_ceiling_on_other_grounds_is_inconclusive() -> None:
    datasheet = DecodeCeiling(StepBytes(15.0e9, 0.0, 0.08e9), Bandwidth(4200.0, "datasheet", "NVIDIA H200"), 1.0,
                              100.0, bytes_exact=False, bytes_source="config.json")
    [check] = judged_efficiency([_check(Verdict.REGRESSED)], RECORD, has_entry=True, current=datasheet)
    assert check.verdict is Verdict.INCONCLUSIVE
    assert check.note == (f"{EFFICIENCY}: not comparable: the ceiling's bandwidth source was 'measured', now "
                          "'datasheet'")
    same = DecodeCeiling(datasheet.step, Bandwidth(4400.0, "measured", "NVIDIA H200"), 1.0, 100.0,
                         bytes_exact=False, bytes_source="config.json")
    [kept] = judged_efficiency([_check(Verdict.REGRESSED)], RECORD, has_entry=True, current=same)
    assert kept.verdict is Verdict.REGRESSED


def test_the_same_grounds_compare_even_when_the_bandwidth_moved() -> None:
    """A measured bandwidth that moved is what the gate is for: same source, same GPU, same bytes."""
    moved = {**RECORD, "bandwidth": {**BANDWIDTH, "gb_s": 4400.0}, "efficiency": 0.45}
    assert basis_difference(RECORD, moved) is None
    assert basis_difference(RECORD, {"unavailable": "no GPU"}) is None


def test_an_entry_without_a_ceiling_says_to_re_record() -> None:
    [check] = judged_efficiency([_check(Verdict.NEW)], None, has_entry=True, current="whatever")
    assert check.verdict is Verdict.NEW and check.note is not None and "--sglang-update-baselines" in check.note
    [fresh] = judged_efficiency([_check(Verdict.NEW)], None, has_entry=False, current="whatever")
    assert fresh.note is None  # no entry at all: an ordinary new cell


def test_a_run_without_a_ceiling_shows_the_metric_not_measured_and_why() -> None:
    reference = with_efficiency(VALUES, RECORD)
    checks = check_all({"decode_throughput": [50.0, 51.0]}, reference, {})
    [check] = judged_efficiency([c for c in checks if c.metric == EFFICIENCY], RECORD, has_entry=True,
                                current="no ceiling: GPU 'X' is not in the GPU table")
    assert check.verdict is Verdict.INCONCLUSIVE and check.measured is None
    assert check.note == f"{EFFICIENCY}: not measured in this run (no ceiling: GPU 'X' is not in the GPU table)"
