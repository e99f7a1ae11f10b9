"""gate/statistics.py against known distributions: Student's t tables and closed forms, R's Welch test on its
`sleep` data, and seeded simulations of the false-alarm rate, the interval's coverage and the power.

Simulated rates are checked within about 3.5 binomial standard deviations of the expected rate, so a seed
cannot make a correct implementation fail by luck, while an error of a few points in a rate still shows."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from pytest_sglang_perf.gate.statistics import LogDifference, boot_spread, log_difference, with_boot_spread
from pytest_sglang_perf.gate.student_t import t_cdf, t_quantile

# --- Student's t -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "df", "value"),
    [(0.975, 1, 12.7062), (0.975, 5, 2.5706), (0.95, 2, 2.9200), (0.95, 10, 1.8125), (0.975, 30, 2.0423)],
)
def test_quantiles_match_the_printed_table(p: float, df: float, value: float) -> None:
    assert t_quantile(p, df) == pytest.approx(value, abs=5e-5)
    assert t_quantile(1 - p, df) == pytest.approx(-value, abs=5e-5)


def test_infinite_df_is_the_standard_normal() -> None:
    assert t_quantile(0.975, math.inf) == pytest.approx(1.95996, abs=5e-6)
    assert t_quantile(0.975, math.inf) == pytest.approx(statistics.NormalDist().inv_cdf(0.975), rel=1e-12)
    for t in (0.3, 2.0, 8.0, 30.0):
        assert t_cdf(-t, math.inf) == pytest.approx(0.5 * math.erfc(t / math.sqrt(2)), rel=1e-13)


def test_cdf_matches_the_printed_table() -> None:
    assert t_cdf(2.0, 10) == pytest.approx(0.96331, abs=5e-6)
    assert 2 * (1 - t_cdf(2.0, 10)) == pytest.approx(0.0734, abs=5e-5)  # two-sided p


@pytest.mark.parametrize("t", [0.0, 1e-9, 0.2, 1.0, 3.0, 40.0, 1e6, 1e200])
def test_cdf_matches_the_closed_forms_of_df_1_and_2(t: float) -> None:
    """df 1 is the Cauchy distribution, F(-t) = atan(1/t) / pi; df 2 has F(-t) = 1 / (h (h + t)), h = sqrt(2 + t^2)
    (both written without cancellation, so the far tails are checked to full relative precision)."""
    assert t_cdf(-t, 1) == pytest.approx(math.atan2(1.0, t) / math.pi, rel=1e-13)
    h = math.hypot(math.sqrt(2.0), t)
    assert t_cdf(-t, 2) == pytest.approx(1.0 / (h * (h + t)), rel=1e-13)


@pytest.mark.parametrize("p", [1e-12, 0.001, 0.025, 0.2, 0.4999, 0.6, 0.95, 0.999])
def test_quantile_matches_the_closed_forms_of_df_1_and_2(p: float) -> None:
    assert t_quantile(p, 1) == pytest.approx(-1.0 / math.tan(math.pi * p), rel=1e-11)
    assert t_quantile(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-11)


def test_large_df_follows_the_first_order_expansion_not_just_the_normal() -> None:
    """F(t; df) = Phi(t) - phi(t) (t^3 + t) / (4 df) + O(1/df^2): at df = 1e6 the correction is 1e-7."""
    normal = statistics.NormalDist()
    expansion = normal.cdf(2.0) - normal.pdf(2.0) * (8.0 + 2.0) / 4e6
    assert abs(t_cdf(2.0, 1e6) - expansion) < 1e-12
    assert abs(t_cdf(2.0, 1e6) - normal.cdf(2.0)) > 1e-7


@pytest.mark.parametrize("df", [0.5, 1, 3.7, 10, 1e6, math.inf])
def test_cdf_is_symmetric_and_one_half_at_zero(df: float) -> None:
    assert t_cdf(0.0, df) == 0.5
    for t in (1e-6, 0.3, 1.7, 4.0, 25.0):
        assert t_cdf(-t, df) == pytest.approx(1 - t_cdf(t, df), abs=1e-15)
        assert 0.0 <= t_cdf(-t, df) < 0.5 < t_cdf(t, df) <= 1.0


@pytest.mark.parametrize("df", [1, 2, 3.7, 10, 30, 1000, 1e6, math.inf])
def test_quantile_inverts_the_cdf(df: float) -> None:
    for p in (1e-10, 0.001, 0.025, 0.1, 0.3, 0.5, 0.7, 0.9, 0.975, 0.999, 1 - 1e-10):
        t = t_quantile(p, df)
        assert t_cdf(t, df) == pytest.approx(p, rel=1e-12)
        assert t_cdf(-t, df) == pytest.approx(1 - p, rel=1e-9)  # the small tail of p close to 1, to ~1e-9


def test_quantiles_grow_as_df_falls() -> None:
    values = [t_quantile(0.975, df) for df in (1, 2, 3.7, 10, 100, 1e6, math.inf)]
    assert values == sorted(values, reverse=True) and len(set(values)) == len(values)


@pytest.mark.parametrize("df", [0.5, 1, 3, 1e6, math.inf])
def test_huge_t_neither_overflows_nor_loses_the_tail(df: float) -> None:
    assert t_cdf(math.inf, df) == 1.0 and t_cdf(-math.inf, df) == 0.0
    assert t_cdf(1e300, df) == 1.0 and 0.0 <= t_cdf(-1e300, df) < 1e-150  # 3e-151 at df 0.5: tails of t^-df


def test_a_far_tail_keeps_its_relative_precision() -> None:
    assert t_cdf(-1e300, 1) == pytest.approx(1 / (math.pi * 1e300), rel=1e-12)
    assert t_quantile(1e-300, 1) == pytest.approx(-1 / (math.pi * 1e-300), rel=1e-12)
    assert t_cdf(-12.0, math.inf) == pytest.approx(0.5 * math.erfc(12.0 / math.sqrt(2)), rel=1e-13)


@pytest.mark.parametrize("p", [0.0, 1.0, -0.1, 1.5, math.nan])
def test_quantile_refuses_p_outside_the_open_interval(p: float) -> None:
    with pytest.raises(ValueError, match="0 < p < 1"):
        t_quantile(p, 5)


@pytest.mark.parametrize("df", [0.0, -1.0, math.nan])
def test_both_refuse_a_df_that_is_not_positive(df: float) -> None:
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_cdf(1.0, df)
    with pytest.raises(ValueError, match="degrees of freedom"):
        t_quantile(0.9, df)
    assert math.isnan(t_cdf(math.nan, 3))


# --- Welch's t on log values -----------------------------------------------------------------------------

SLEEP_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
SLEEP_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]
"""R's `sleep` data; `t.test(extra ~ group, data = sleep)` prints t = -1.8608, df = 17.776, p-value = 0.07939,
95 percent confidence interval -3.3654832 0.2054832 (group 1 minus group 2)."""


def test_welch_reproduces_r_on_the_sleep_data() -> None:
    """Exponentiated, so that the log values the module takes are R's raw values."""
    stats = log_difference([[math.exp(v) for v in SLEEP_1]], [math.exp(v) for v in SLEEP_2])
    assert stats is not None and stats.method == "welch"
    assert stats.diff == pytest.approx(2.33 - 0.75, rel=1e-12)
    assert stats.diff / stats.se == pytest.approx(1.8608, abs=5e-5)
    assert stats.df == pytest.approx(17.776, abs=5e-4)
    assert 2 * stats.p_increase() == pytest.approx(0.07939, abs=5e-6)
    low, high = stats.interval(0.95)
    assert (math.log1p(low), math.log1p(high)) == pytest.approx((-0.2054832, 3.3654832), abs=5e-7)


def test_welch_follows_its_formulas() -> None:
    reference, measured = [100.0, 104.0, 97.0], [90.0, 95.0, 92.0, 94.0]
    log_r, log_m = [math.log(v) for v in reference], [math.log(v) for v in measured]
    v_r, v_m = statistics.variance(log_r) / 3, statistics.variance(log_m) / 4
    stats = log_difference([reference], measured)
    assert stats == LogDifference(
        diff=pytest.approx(statistics.fmean(log_m) - statistics.fmean(log_r), rel=1e-12),  # type: ignore[arg-type]
        se=pytest.approx(math.sqrt(v_r + v_m), rel=1e-12),  # type: ignore[arg-type]
        df=pytest.approx((v_r + v_m) ** 2 / (v_r**2 / 2 + v_m**2 / 3), rel=1e-12),  # type: ignore[arg-type]
        method="welch", n_reference=3, n_measured=4,
    )
    assert stats.change == pytest.approx(statistics.geometric_mean(measured) / statistics.geometric_mean(reference) - 1)
    assert stats.p_decrease() == pytest.approx(t_cdf(stats.diff / stats.se, stats.df), rel=1e-15)
    assert stats.p_increase() + stats.p_decrease() == pytest.approx(1.0, abs=1e-15)


def test_welch_df_is_the_pooled_df_for_equal_spreads_and_n_minus_1_for_one_spread() -> None:
    equal = log_difference([[math.exp(x) for x in (0.0, 0.1, 0.2)]], [math.exp(x) for x in (0.5, 0.6, 0.7)])
    assert equal is not None and equal.df == pytest.approx(4.0, rel=1e-9)
    one_sided = log_difference([[100.0, 100.0, 100.0]], [90.0, 95.0, 92.0])
    assert one_sided is not None and one_sided.df == pytest.approx(2.0, rel=1e-12)
    assert one_sided.se == pytest.approx(statistics.stdev([math.log(v) for v in (90, 95, 92)]) / math.sqrt(3))


def test_identical_values_give_certain_answers() -> None:
    faster = log_difference([[100.0, 100.0]], [110.0, 110.0, 110.0])
    assert faster == LogDifference(pytest.approx(math.log(1.1)), 0.0, 3.0, "welch", 2, 3)  # type: ignore[arg-type]
    assert (faster.p_increase(), faster.p_decrease()) == (0.0, 1.0)
    assert faster.interval(0.95) == (faster.change, faster.change) and faster.detectable(0.05, 0.8) == 0.0
    same = log_difference([[5.0, 5.0], [5.0]], [5.0])
    assert same is not None and same.se == 0.0 and same.df == 1.0
    assert (same.p_increase(), same.p_decrease()) == (1.0, 1.0)


@pytest.mark.parametrize(
    ("reference", "measured"),
    [
        ([[1.0, 2.0, 3.0]], [0.0, 1.0]),
        ([[1.0, 2.0, 3.0]], [-1.0, 1.0]),
        ([[1.0, math.nan, 3.0]], [1.0, 2.0]),
        ([[1.0, 2.0]], [math.inf, 2.0]),
        ([[5.0]], [1.0, 2.0, 3.0]),  # 1 vs 3 samples: no spread for Welch
        ([[1.0, 2.0, 3.0]], [4.0]),
        ([[1.0, 2.0], []], [1.0, 2.0]),  # an empty boot
        ([], [1.0, 2.0]),
        ([[1.0, 2.0, 3.0]], []),
        ([[1.0, 2.0], [3.0, 4.0]], []),
    ],
)
def test_no_test_is_possible(reference: list[list[float]], measured: list[float]) -> None:
    assert log_difference(reference, measured) is None


# --- several reference boots -----------------------------------------------------------------------------


def _expected_boots(reference: list[list[float]], measured: list[float]) -> tuple[float, float, float]:
    """(diff, se, df) by the rules, written out independently of the module."""
    logs = [[math.log(v) for v in group] for group in reference]
    log_m = [math.log(v) for v in measured]
    boots = len(logs)
    means = [statistics.fmean(group) for group in logs]
    s_b2 = statistics.variance(means)
    used = [group for group in [*logs, log_m] if len(group) >= 2]
    df_w = sum(len(group) - 1 for group in used)
    s_w2 = sum(statistics.variance(g) * (len(g) - 1) for g in used) / df_w if df_w else 0.0
    n_bar = statistics.harmonic_mean([len(group) for group in logs])
    between = max(s_b2 - s_w2 / n_bar, 0.0)
    se2 = s_b2 / boots + between + (s_w2 / len(log_m) if df_w else 0.0)
    # Satterthwaite over the independent mean squares s_B^2 and s_w^2, with their net coefficients
    c_b = 1 + 1 / boots if between > 0 else 1 / boots
    c_w = 1 / len(log_m) - (1 / n_bar if between > 0 else 0.0)
    parts = [(c_b * s_b2, boots - 1), (c_w * s_w2, df_w)]
    denominator = sum(part**2 / df for part, df in parts if part)
    df = se2**2 / denominator if denominator else boots - 1.0
    return statistics.fmean(log_m) - statistics.fmean(means), math.sqrt(se2), df


@pytest.mark.parametrize(
    ("reference", "measured"),
    [
        ([[100.0, 102.0, 98.0], [110.0, 111.0, 109.0, 112.0], [95.0, 96.0]], [104.0, 101.0, 103.0]),  # unequal sizes
        ([[100.0, 110.0, 90.0], [101.0, 109.0, 91.0]], [100.0, 105.0, 95.0]),  # boots agree: between = 0
        ([[100.0], [104.0], [98.0]], [101.0]),  # no group with 2 values: C = 0, df = B - 1
        ([[100.0, 101.0], [120.0, 119.0]], [118.0, 110.0, 111.0]),
    ],
)
def test_boots_follow_their_formulas(reference: list[list[float]], measured: list[float]) -> None:
    stats = log_difference(reference, measured)
    diff, se, df = _expected_boots(reference, measured)
    assert stats is not None and stats.method == "boots"
    assert (stats.diff, stats.se, stats.df) == pytest.approx((diff, se, df), rel=1e-12)
    assert (stats.n_reference, stats.n_measured) == (sum(map(len, reference)), len(measured))


def test_boots_with_equal_sizes_reduce_to_an_exact_t() -> None:
    """n_m = n_bar and a real boot-to-boot spread: se^2 = (1 + 1/B) s_B^2 and df = B - 1 exactly."""
    reference = [[100.0, 101.0, 99.0], [110.0, 111.0, 112.0], [90.0, 91.0, 92.0]]
    stats = log_difference(reference, [105.0, 104.0, 106.0])
    means = [statistics.fmean(math.log(v) for v in group) for group in reference]
    assert stats is not None and stats.df == pytest.approx(2.0, rel=1e-12)
    assert stats.se == pytest.approx(math.sqrt((1 + 1 / 3) * statistics.variance(means)), rel=1e-12)


def test_more_boots_are_needed_only_on_the_reference_side() -> None:
    """The measured run is one new boot: a single measured value is enough against several reference boots."""
    assert log_difference([[100.0, 101.0], [103.0, 102.0]], [101.0]) is not None


# --- calibration by simulation ---------------------------------------------------------------------------

SIGMA = 0.05
"""Request-to-request noise on the log scale: a 5% coefficient of variation."""


def _draw(rng: random.Random, n: int, log_mean: float, sigma: float = SIGMA) -> list[float]:
    return [math.exp(rng.gauss(log_mean, sigma)) for _ in range(n)]


def _boot_draw(rng: random.Random, boots: int, n: int, shift: float, offset_sd: float) -> list[list[float]]:
    """`boots` groups of `n` requests, each boot with its own offset: the GPU's boot-to-boot spread."""
    return [_draw(rng, n, shift + rng.gauss(0.0, offset_sd)) for _ in range(boots)]


def _rate(hits: int, trials: int) -> float:
    return hits / trials


def test_welch_false_alarm_rate_is_nominal_where_its_df_is_exact() -> None:
    """A quiet reference against a noisy measurement: Welch's df is then n_m - 1 and its t is exact."""
    rng = random.Random(1)
    trials = 4000
    hits = sum(
        _stats([_draw(rng, 3, 0.0, 1e-6)], _draw(rng, 3, 0.0)).p_increase() < 0.05 for _ in range(trials)
    )
    assert _rate(hits, trials) == pytest.approx(0.05, abs=0.012)


def test_welch_with_3_vs_3_from_one_log_normal_stays_at_or_below_nominal() -> None:
    """Both sides from the same log-normal. With equal spreads and 3 vs 3, Welch's df underestimates the
    pooled 4 and the test is a little conservative (3.9% over 100000 trials at alpha 5%), never liberal."""
    rng = random.Random(2)
    trials = 4000
    up = down = 0
    for _ in range(trials):
        stats = _stats([_draw(rng, 3, 0.0)], _draw(rng, 3, 0.0))
        up += stats.p_increase() < 0.05
        down += stats.p_decrease() < 0.05
    for hits in (up, down):
        assert 0.025 <= _rate(hits, trials) <= 0.062


def test_boots_false_alarm_rate_is_nominal_where_welch_on_pooled_boots_is_not() -> None:
    """3 reference boots of 3 requests and a new measured boot, boot offsets as large as the request noise.
    Satterthwaite's df is an approximation, so this checks an upper bound (with a floor, so a test that never
    fires does not pass); pooling the boots into one Welch group ignores their spread and fires 3x too often."""
    rng = random.Random(3)
    trials = 4000
    boots = pooled = 0
    for _ in range(trials):
        reference = _boot_draw(rng, 3, 3, 0.0, SIGMA)
        measured = _boot_draw(rng, 1, 3, 0.0, SIGMA)[0]
        boots += _stats(reference, measured).p_increase() < 0.05
        pooled += _stats([[v for group in reference for v in group]], measured).p_increase() < 0.05
    assert 0.035 <= _rate(boots, trials) <= 0.062
    assert _rate(pooled, trials) > 0.12


def test_the_interval_covers_the_true_change_at_its_confidence() -> None:
    rng = random.Random(4)
    true_change = 0.10
    welch = boots = 0
    for _ in range(1500):
        low, high = _stats([_draw(rng, 5, 0.0)], _draw(rng, 5, math.log1p(true_change))).interval(0.90)
        welch += low <= true_change <= high
    for _ in range(1000):
        reference = _boot_draw(rng, 3, 3, 0.0, SIGMA)
        measured = _boot_draw(rng, 1, 3, math.log1p(true_change), SIGMA)[0]
        low, high = _stats(reference, measured).interval(0.90)
        boots += low <= true_change <= high
    assert _rate(welch, 1500) == pytest.approx(0.90, abs=0.027)
    assert _rate(boots, 1000) == pytest.approx(0.90, abs=0.032)


def test_a_shift_of_three_standard_errors_is_detected_most_of_the_time() -> None:
    rng = random.Random(5)
    trials = 2000
    shift = 3 * SIGMA * math.sqrt(1 / 3 + 1 / 3)
    hits = sum(_stats([_draw(rng, 3, 0.0)], _draw(rng, 3, shift)).p_increase() < 0.05 for _ in range(trials))
    assert _rate(hits, trials) > 0.6  # 0.72 expected: 3 vs 3 leaves Welch 2 to 4 df


def _stats(reference: list[list[float]], measured: list[float]) -> LogDifference:
    stats = log_difference(reference, measured)
    assert stats is not None
    return stats


# --- the detectable change -------------------------------------------------------------------------------


def test_detectable_change_is_detected_with_the_asked_power() -> None:
    """10 vs 10 requests: the change detectable at alpha 5% with power 80%, from the true standard error,
    applied as a real shift, is detected about 80% of the time (the central-t approximation of the power
    runs a little high for few df: at 3 vs 3 it gives 76%)."""
    n = 10
    expected = LogDifference(0.0, SIGMA * math.sqrt(2 / n), 2 * n - 2.0, "welch", n, n)
    change = expected.detectable(0.05, 0.80)
    rng = random.Random(6)
    trials = 2000
    hits = sum(
        _stats([_draw(rng, n, 0.0)], _draw(rng, n, math.log1p(change))).p_increase() < 0.05 for _ in range(trials)
    )
    assert _rate(hits, trials) == pytest.approx(0.80, abs=0.05)


def test_detectable_change_shrinks_as_samples_grow() -> None:
    """Samples at the normal quantiles of the same spread: only n changes."""
    normal = statistics.NormalDist(0.0, SIGMA)
    changes = []
    for n in (3, 5, 10, 30, 100):
        samples = [math.exp(normal.inv_cdf((i + 0.5) / n)) for i in range(n)]
        changes.append(_stats([samples], samples).detectable(0.05, 0.80))
    assert changes == sorted(changes, reverse=True) and len(set(changes)) == len(changes)
    large = (1.6448536 + 0.8416212) * SIGMA * math.sqrt(2 / 100)  # the normal approximation at n = 100
    assert changes[-1] == pytest.approx(large, rel=0.05)


def test_detectable_change_uses_both_quantiles() -> None:
    stats = LogDifference(0.0, 0.1, math.inf, "welch", 10, 10)
    assert stats.detectable(0.05, 0.5) == pytest.approx(math.expm1(1.6448536269514722 * 0.1), rel=1e-12)
    assert stats.detectable(0.05, 0.05) == 0.0  # a power no higher than alpha needs no change at all
    for alpha, power in ((0.0, 0.8), (0.05, 1.0), (1.0, 0.8)):
        with pytest.raises(ValueError, match="must be in"):
            stats.detectable(alpha, power)


# --- guards ----------------------------------------------------------------------------------------------


def test_p_values_stay_in_range_for_extreme_statistics() -> None:
    for diff, se in ((700.0, 1e-300), (-700.0, 1e-300), (1e-300, 1e300), (5.0, 1e-10)):
        stats = LogDifference(diff, se, 3.0, "welch", 3, 3)
        for p in (stats.p_increase(), stats.p_decrease()):
            assert 0.0 <= p <= 1.0
    assert LogDifference(700.0, 1e-300, 3.0, "welch", 3, 3).p_increase() == 0.0
    assert LogDifference(800.0, 1.0, 3.0, "welch", 3, 3).change == math.inf


def test_interval_is_the_point_at_zero_confidence_and_refuses_one() -> None:
    stats = LogDifference(0.1, 0.05, 4.0, "welch", 3, 3)
    assert stats.interval(0.0) == (stats.change, stats.change)
    low, high = stats.interval(0.95)
    assert low < stats.change < high
    assert (math.log1p(low) + math.log1p(high)) / 2 == pytest.approx(0.1, rel=1e-12)  # symmetric in log space
    for confidence in (1.0, -0.1):
        with pytest.raises(ValueError, match="confidence"):
            stats.interval(confidence)


def test_boot_spread_is_the_variance_of_the_boot_means() -> None:
    """The recorded boots' means vary by the boots' offsets (and their requests' noise: conservative); boots whose
    means agree exactly measure none; fewer than 3 boots, or a value without a log, give none at all."""
    offsets = (1.0, 1.05, 0.95)
    exact = boot_spread([[10.0 * o] * 4 for o in offsets])
    assert exact is not None and exact.df == 2
    assert exact.variance == pytest.approx(statistics.variance([math.log(10.0 * o) for o in offsets]))
    agreeing = boot_spread([[9.0, 11.0, 10.0], [11.0, 9.0, 10.0], [10.0, 9.0, 11.0]])
    assert agreeing is not None and agreeing.variance == pytest.approx(0.0, abs=1e-30)
    assert boot_spread([[10.0, 11.0], [10.5, 10.6]]) is None  # two boots: one df
    assert boot_spread([[10.0], [11.0], [0.0]]) is None


def test_with_boot_spread_adds_each_sides_variance_to_the_error() -> None:
    first = log_difference([[10.0, 10.1, 9.9, 10.0]], [10.5, 10.6, 10.4, 10.5])
    spread = boot_spread([[10.0 * o] * 4 for o in (1.0, 1.05, 0.95)])
    assert first is not None and spread is not None
    wider = with_boot_spread(first, [spread, spread])
    assert wider.diff == first.diff and wider.method == "welch+boot-spread"
    assert wider.se == pytest.approx(math.sqrt(first.se ** 2 + 2 * spread.variance))
    assert 2 <= wider.df < first.df  # the two recorded spreads' few boots bound the df
