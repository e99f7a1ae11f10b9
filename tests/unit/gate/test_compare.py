from __future__ import annotations

import pytest

from pytest_sglang_perf.gate.compare import (
    GatePolicy,
    Verdict,
    check_all,
    check_metric,
    within_tolerance,
    worst,
)
from pytest_sglang_perf.gate.judge import confirmed
from pytest_sglang_perf.measurement.metrics import METRICS


def vals(center: float, spread: float = 0.005, n: int = 3) -> list[float]:
    """n values around `center`, spread by +-`spread` (relative): quiet samples by default."""
    if n == 1:
        return [center]
    return [center * (1 + spread * (2 * i / (n - 1) - 1)) for i in range(n)]


def one_boot(values: list[float]) -> list[list[float]]:
    return [values]


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
    ],
)
def test_a_clear_change_beyond_the_tolerance_is_a_verdict(name: str, base: float, measured: float,
                                                         verdict: Verdict) -> None:
    check = check_metric(name, one_boot(vals(base)), vals(measured), METRICS[name].default_tolerance)
    assert check.verdict is verdict
    assert check.method == "welch"
    assert check.p_value is not None


def test_a_regression_needs_statistical_evidence() -> None:
    """The medians are 8% apart, beyond the 5% tolerance, but the samples are so noisy that the change is not
    established: inconclusive, not regressed."""
    noisy_base = [80.0, 100.0, 125.0]
    noisy_now = [74.0, 92.0, 115.0]
    check = check_metric("output_throughput", one_boot(noisy_base), noisy_now, 0.05)
    assert check.change == pytest.approx(-0.08)
    assert check.verdict is Verdict.INCONCLUSIVE
    assert check.p_value is not None and check.p_value > 0.05


def test_the_allowed_band_is_the_tolerance_whatever_the_noise() -> None:
    quiet = check_metric("output_throughput", one_boot(vals(100.0)), vals(94.0), 0.05)
    noisy = check_metric("output_throughput", one_boot([90.0, 100.0, 111.0]), [85.0, 94.0, 104.0], 0.05)
    assert quiet.allowed == noisy.allowed == 0.05
    assert (quiet.verdict, noisy.verdict) == (Verdict.REGRESSED, Verdict.INCONCLUSIVE)


def test_an_improvement_needs_evidence_too() -> None:
    check = check_metric("output_throughput", one_boot([80.0, 100.0, 125.0]), [88.0, 110.0, 137.0], 0.05)
    assert check.verdict is Verdict.OK


def test_single_values_are_judged_by_the_practical_rule_alone() -> None:
    """Boot costs of a one-boot baseline: one value a side, no test possible, and the check says so."""
    slow = check_metric("boot_seconds", one_boot([60.0]), [90.0], 0.25)
    fine = check_metric("boot_seconds", one_boot([60.0]), [70.0], 0.25)
    assert (slow.verdict, fine.verdict) == (Verdict.REGRESSED, Verdict.OK)
    assert slow.method is None and slow.p_value is None and slow.detectable is None


def test_boot_metrics_of_a_multi_boot_baseline_are_tested_against_the_boot_spread() -> None:
    boots = [[60.0], [66.0], [57.0]]
    within = check_metric("boot_seconds", boots, [76.0], 0.25)  # +27% but boots already vary by +-8%
    far = check_metric("boot_seconds", boots, [120.0], 0.25)
    assert within.method == far.method == "boots"
    assert within.verdict is Verdict.INCONCLUSIVE
    assert far.verdict is Verdict.REGRESSED


@pytest.mark.parametrize(
    ("measured", "verdict"),
    [
        (0.0115, Verdict.OK),         # 15% worse but only 1.5 ms: below the 2 ms floor
        (0.0125, Verdict.REGRESSED),  # 25% and 2.5 ms worse
        (0.0085, Verdict.OK),         # 15% better but only 1.5 ms: not worth reporting
        (0.0075, Verdict.IMPROVED),
    ],
)
def test_absolute_floor_ignores_tiny_changes(measured: float, verdict: Verdict) -> None:
    check = check_metric("ttft", one_boot(vals(0.010, 0.001)), vals(measured, 0.001), 0.10)
    assert check.verdict is verdict


def test_a_zero_baseline_has_no_relative_change() -> None:
    check = check_metric("ttft", one_boot([0.0, 0.0, 0.0]), vals(0.5), 0.05)
    assert check.change is None and check.baseline == 0.0
    assert check.method is None  # logs of 0 do not exist: the practical rule decides
    assert check.verdict is Verdict.REGRESSED


def test_no_baseline_is_new_with_what_a_later_run_could_detect() -> None:
    check = check_metric("tpot", None, vals(0.02, 0.01), 0.10)
    assert check.verdict is Verdict.NEW
    assert (check.baseline, check.change) == (None, None)
    assert check.measured == pytest.approx(0.02)
    assert check.allowed == 0.10
    assert check.detectable is not None and 0 < check.detectable < 0.10
    assert not check.underpowered


def test_noisy_small_samples_are_underpowered() -> None:
    check = check_metric("ttft", one_boot([0.08, 0.10, 0.13]), [0.08, 0.10, 0.13], 0.10)
    assert check.detectable is not None and check.detectable > 0.10
    assert check.underpowered


def test_more_samples_detect_smaller_changes() -> None:
    few = check_metric("output_throughput", one_boot(vals(100.0, 0.02, 3)), vals(100.0, 0.02, 3), 0.05)
    many = check_metric("output_throughput", one_boot(vals(100.0, 0.02, 12)), vals(100.0, 0.02, 12), 0.05)
    assert few.detectable is not None and many.detectable is not None
    assert many.detectable < few.detectable / 2


def test_a_stricter_confidence_needs_stronger_evidence() -> None:
    base, now = one_boot([98.0, 100.0, 102.0]), [90.0, 92.0, 94.0]
    default = check_metric("output_throughput", base, now, 0.05)
    strict = check_metric("output_throughput", base, now, 0.05, GatePolicy(confidence=0.999))
    assert default.verdict is Verdict.REGRESSED
    assert strict.verdict is Verdict.INCONCLUSIVE


def test_invalid_tolerance_and_policy_are_rejected() -> None:
    with pytest.raises(ValueError, match="tolerance for ttft"):
        check_metric("ttft", one_boot(vals(0.1)), vals(0.1), -0.1)
    with pytest.raises(ValueError, match="confidence"):
        GatePolicy(confidence=1.0)


def test_check_all_orders_by_metrics_and_marks_new_ones() -> None:
    measured = {"ttft": vals(0.1), "accept_length": vals(3.0), "output_throughput": vals(80.0)}
    baseline = {"output_throughput": one_boot(vals(100.0)), "ttft": one_boot(vals(0.1)),
                "boot_seconds": one_boot([30.0])}
    checks = check_all(measured, baseline, {"output_throughput": 0.05})
    assert [c.metric for c in checks] == ["output_throughput", "ttft", "accept_length", "boot_seconds"]
    assert [c.verdict for c in checks] == [Verdict.REGRESSED, Verdict.OK, Verdict.NEW, Verdict.INCONCLUSIVE]
    assert (checks[-1].baseline, checks[-1].measured) == (30.0, None)  # in the baseline, not measured: kept


def test_check_all_uses_default_tolerances_unless_given() -> None:
    measured, baseline = {"ttft": vals(0.108)}, {"ttft": one_boot(vals(0.100))}
    (default,) = check_all(measured, baseline, {})
    (strict,) = check_all(measured, baseline, {"ttft": 0.05})
    assert (default.allowed, default.verdict) == (METRICS["ttft"].default_tolerance, Verdict.OK)
    assert (strict.allowed, strict.verdict) == (0.05, Verdict.REGRESSED)


def test_check_all_without_a_baseline_is_all_new() -> None:
    checks = check_all({"output_throughput": vals(50.0), "ttft": vals(0.1)}, None, {})
    assert {c.verdict for c in checks} == {Verdict.NEW}


def test_check_all_rejects_unknown_metrics() -> None:
    with pytest.raises(KeyError, match="unknown metric 'latency'"):
        check_all({"latency": [1.0]}, None, {})


def test_within_tolerance_needs_the_whole_one_sided_bound_inside() -> None:
    policy = GatePolicy()
    assert within_tolerance("output_throughput", one_boot(vals(100.0, 0.005)), vals(99.5, 0.005), 0.05, policy)
    assert not within_tolerance("output_throughput", one_boot([90.0, 100.0, 111.0]), [90.0, 100.0, 111.0], 0.05,
                                policy)
    assert not within_tolerance("ttft", one_boot(vals(0.1)), vals(0.108, 0.05), 0.10, policy)


def test_a_regression_holds_only_when_the_re_measure_regresses_too() -> None:
    base = one_boot(vals(100.0))
    first = (check_metric("output_throughput", base, vals(90.0), 0.05),
             check_metric("ttft", one_boot(vals(0.1)), vals(0.13), 0.10))
    second = (check_metric("output_throughput", base, vals(99.0), 0.05),
              check_metric("ttft", one_boot(vals(0.1)), vals(0.13), 0.10))
    held = confirmed(first, second)
    assert [c.verdict for c in held] == [Verdict.INCONCLUSIVE, Verdict.REGRESSED]
    assert held[0].measured == first[0].measured  # the first measurement is what the report shows


def test_worst_orders_severity() -> None:
    assert worst([Verdict.OK, Verdict.IMPROVED, Verdict.NEW]) is Verdict.NEW
    assert worst([Verdict.NEW, Verdict.REGRESSED]) is Verdict.REGRESSED
    assert worst([Verdict.INCONCLUSIVE, Verdict.STALE, Verdict.NEW]) is Verdict.INCONCLUSIVE
    assert worst([Verdict.STALE, Verdict.NEW]) is Verdict.STALE
    assert worst([Verdict.UPDATED, Verdict.OK]) is Verdict.UPDATED
    assert worst([Verdict.UPDATED, Verdict.IMPROVED]) is Verdict.IMPROVED
    assert worst([]) is Verdict.OK


def test_prefill_throughput_keeps_ttfts_floor() -> None:
    """A short prompt's TTFT 10.0 -> 11.5 ms is within ttft's 2 ms floor: prefill_throughput (-13%) is not a
    regression either; 10 -> 14 ms is, for both."""

    def cell(ttft_ms: float) -> dict[str, list[float]]:
        times = [ttft_ms * (1 + 0.001 * k) / 1e3 for k in range(8)]
        return {"ttft": times, "prefill_throughput": [512 / t for t in times]}

    base = {name: [values] for name, values in cell(10.0).items()}
    near = {c.metric: c for c in check_all(cell(11.5), base, {})}
    assert near["ttft"].verdict is Verdict.OK
    assert near["prefill_throughput"].verdict is Verdict.OK and "floor (2 ms)" in str(near["prefill_throughput"].note)
    far = {c.metric: c for c in check_all(cell(14.0), base, {})}
    assert far["ttft"].verdict is far["prefill_throughput"].verdict is Verdict.REGRESSED
