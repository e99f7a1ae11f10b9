from __future__ import annotations

import math

import pytest

from pytest_sglang_perf.gate.compare import (
    NOISE_CAP,
    NOISE_K,
    Verdict,
    allowed_band,
    check_all,
    check_metric,
    worst,
)
from pytest_sglang_perf.measurement.metrics import METRICS
from pytest_sglang_perf.measurement.stats import Summary


def summ(median: float, noise: float = 0.0, n: int = 5) -> Summary:
    """A summary whose relative_noise() is `noise`."""
    mad = noise * abs(median) / 1.4826
    return Summary(n=n, median=median, mean=median, stdev=0.0, min=median, max=median, mad=mad)


@pytest.mark.parametrize(
    ("name", "base", "measured", "verdict"),
    [
        ("output_throughput", 100.0, 90.0, Verdict.REGRESSED),
        ("output_throughput", 100.0, 110.0, Verdict.IMPROVED),
        ("output_throughput", 100.0, 97.0, Verdict.OK),
        ("output_throughput", 100.0, 103.0, Verdict.OK),
        ("ttft", 0.100, 0.120, Verdict.REGRESSED),
        ("ttft", 0.100, 0.080, Verdict.IMPROVED),
        ("ttft", 0.100, 0.105, Verdict.OK),
        ("accept_length", 3.0, 2.8, Verdict.REGRESSED),
        ("boot_seconds", 60.0, 90.0, Verdict.REGRESSED),
    ],
)
def test_verdicts_follow_the_metric_direction(name: str, base: float, measured: float, verdict: Verdict) -> None:
    check = check_metric(name, summ(base), summ(measured), METRICS[name].default_tolerance)
    assert check.verdict is verdict
    assert check.baseline == base
    assert check.measured == measured
    assert check.change == pytest.approx((measured - base) / base)
    assert check.unit == METRICS[name].unit


def test_the_same_relative_change_is_a_regression_or_an_improvement_by_direction() -> None:
    faster = check_metric("output_throughput", summ(100.0), summ(120.0), 0.05)
    slower = check_metric("ttft", summ(0.100), summ(0.120), 0.05)
    assert faster.change == pytest.approx(slower.change)
    assert (faster.verdict, slower.verdict) == (Verdict.IMPROVED, Verdict.REGRESSED)


def test_a_change_exactly_at_the_band_is_ok() -> None:
    check = check_metric("output_throughput", summ(100.0), summ(95.0), 0.05)
    assert check.change == -0.05
    assert check.verdict is Verdict.OK


def test_quiet_runs_get_the_plain_tolerance() -> None:
    spec = METRICS["output_throughput"]
    assert allowed_band(spec, 0.05, summ(100.0, 0.001), summ(100.0, 0.001)) == 0.05


def test_noise_widens_the_band() -> None:
    spec = METRICS["output_throughput"]
    band = allowed_band(spec, 0.05, summ(100.0, 0.02), summ(100.0, 0.03))
    assert band == pytest.approx(NOISE_K * math.sqrt(0.02**2 + 0.03**2))
    assert 0.05 < band < NOISE_CAP * 0.05


def test_a_noisy_run_tolerates_a_drop_a_quiet_one_would_fail() -> None:
    quiet = check_metric("output_throughput", summ(100.0), summ(93.0), 0.05)
    noisy = check_metric("output_throughput", summ(100.0, 0.02), summ(93.0, 0.02), 0.05)
    assert quiet.verdict is Verdict.REGRESSED
    assert noisy.verdict is Verdict.OK
    assert noisy.allowed == pytest.approx(3 * math.sqrt(2) * 0.02)


def test_noise_widening_is_capped_so_a_big_regression_still_fails() -> None:
    check = check_metric("output_throughput", summ(100.0, 0.3), summ(75.0, 0.3), 0.05)
    assert check.allowed == pytest.approx(NOISE_CAP * 0.05)
    assert check.verdict is Verdict.REGRESSED


@pytest.mark.parametrize(
    ("measured", "verdict"),
    [
        (0.0115, Verdict.OK),         # 15% worse but only 1.5 ms: below the 2 ms floor
        (0.0125, Verdict.REGRESSED),  # 25% and 2.5 ms worse
        (0.0085, Verdict.OK),         # 15% better but only 1.5 ms: not worth reporting
        (0.0075, Verdict.IMPROVED),
    ],
)
def test_the_absolute_floor_ignores_tiny_changes(measured: float, verdict: Verdict) -> None:
    assert METRICS["ttft"].abs_floor == 0.002
    check = check_metric("ttft", summ(0.010), summ(measured), 0.10)
    assert check.verdict is verdict


@pytest.mark.parametrize(
    ("name", "measured", "verdict"),
    [
        ("output_throughput", 50.0, Verdict.IMPROVED),
        ("output_throughput", 0.0, Verdict.OK),
        ("ttft", 0.5, Verdict.REGRESSED),
        ("ttft", 0.001, Verdict.OK),  # within the floor
    ],
)
def test_a_zero_baseline_has_no_relative_change(name: str, measured: float, verdict: Verdict) -> None:
    check = check_metric(name, summ(0.0), summ(measured), 0.05)
    assert check.change is None
    assert check.baseline == 0.0
    assert check.verdict is verdict


def test_no_baseline_is_new() -> None:
    check = check_metric("tpot", None, summ(0.02), 0.10)
    assert check.verdict is Verdict.NEW
    assert (check.baseline, check.change) == (None, None)
    assert check.measured == 0.02
    assert check.allowed == 0.10


def test_invalid_tolerance_is_rejected() -> None:
    with pytest.raises(ValueError, match="tolerance for ttft"):
        check_metric("ttft", summ(0.1), summ(0.1), -0.1)


def test_check_all_orders_by_metrics_and_marks_new_ones() -> None:
    measured = {"ttft": summ(0.1), "accept_length": summ(3.0), "output_throughput": summ(80.0)}
    baseline = {"output_throughput": summ(100.0), "ttft": summ(0.1), "boot_seconds": summ(30.0)}
    checks = check_all(measured, baseline, {"output_throughput": 0.05})
    assert [c.metric for c in checks] == ["output_throughput", "ttft", "accept_length"]
    assert [c.verdict for c in checks] == [Verdict.REGRESSED, Verdict.OK, Verdict.NEW]


def test_check_all_uses_default_tolerances_unless_given() -> None:
    measured, baseline = {"ttft": summ(0.108)}, {"ttft": summ(0.100)}
    (default,) = check_all(measured, baseline, {})
    (strict,) = check_all(measured, baseline, {"ttft": 0.05})
    assert (default.allowed, default.verdict) == (METRICS["ttft"].default_tolerance, Verdict.OK)
    assert (strict.allowed, strict.verdict) == (0.05, Verdict.REGRESSED)


def test_check_all_without_a_baseline_is_all_new() -> None:
    checks = check_all({"output_throughput": summ(50.0), "ttft": summ(0.1)}, None, {})
    assert {c.verdict for c in checks} == {Verdict.NEW}


def test_check_all_rejects_unknown_metrics() -> None:
    with pytest.raises(KeyError, match="unknown metric 'latency'"):
        check_all({"latency": summ(1.0)}, None, {})


def test_worst_orders_severity() -> None:
    assert worst([Verdict.OK, Verdict.IMPROVED, Verdict.NEW]) is Verdict.NEW
    assert worst([Verdict.NEW, Verdict.REGRESSED]) is Verdict.REGRESSED
    assert worst([Verdict.UPDATED, Verdict.OK]) is Verdict.UPDATED
    assert worst([Verdict.UPDATED, Verdict.IMPROVED]) is Verdict.IMPROVED
    assert worst([]) is Verdict.OK
