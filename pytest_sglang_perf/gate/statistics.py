"""The statistics of the gate: the difference of two runs' log means, tested with Student's t (gate/student_t.py).

Everything works on natural logs of the samples: timing noise on a GPU is multiplicative (a slow step slows
a request by a factor, not by a number of ms), and the gate's tolerances are relative, so a difference of
log means is the log of a ratio of geometric means, and `change` = expm1(diff) is the relative change.
`docs/statistics.md` says why these tests and not others; the rules of `log_difference`:

- No test (None) when a value is not finite or not > 0 (no log), a group is empty, or there are too few
  samples to estimate a spread: a guess of the noise would make a p-value without meaning.
- One reference boot: "welch". Welch's t on the log values of both sides, each with its own variance, since a
  server can be noisier on one run than on another; needs >= 2 values per side. se^2 = s_r^2/n_r + s_m^2/n_m,
  df by Welch-Satterthwaite. Identical values on both sides: se = 0 and df = n_r + n_m - 2.
- Several reference boots: "boots". On a GPU the spread between boots (clocks, memory layout, autotuning)
  is often larger than the spread between the requests of one boot, and the measured run is a new boot, so
  request noise alone would understate the error and fire on boot luck. With the B boot means m_b:
  s_B^2 = their sample variance; s_w^2 = pooled within-boot variance over every group with >= 2 values, the
  measured one included (0 when none has); n_bar = harmonic mean of the reference boot sizes;
  between = max(s_B^2 - s_w^2 / n_bar, 0), the boot-to-boot variance beyond what request noise explains.
  se^2 = A + C with A = s_B^2 / B + between (the reference mean's error plus the new boot's own offset) and
  C = s_w^2 / n_m (the measured mean's request noise; 0 when no group has 2 values). df by Satterthwaite over
  the independent mean squares that A + C is made of, s_B^2 (B - 1 df) and s_w^2 (the pooled df): A and C
  share s_w^2 (see _boots_coefficients). diff = mean(log measured) - mean of the boot means. Needs >= 1
  measured value.
- Boots paired by round: "paired-boots" (`paired_boots`, the A/B between boots). Two variants booted in turns
  (A B A B ...): round k's difference d_k = mean(log B_k) - mean(log A_k) holds both boots' offsets and the slow
  drift of the host between rounds only as far as it differs within a round; diff = mean(d_k), se = sd(d_k) /
  sqrt(K), df = K - 1. Needs >= 2 rounds; every boot offset is in the spread, none is taken for an effect.
- One boot a side with the boot spread a baseline recorded (`boot_spread`, `with_boot_spread`: the A/B within one
  boot each, where both variants' baselines were recorded over at least MIN_SPREAD_BOOTS boots): each side's
  variance of the recorded boot means of the log values, s_B^2 with B - 1 df, is added to the Welch se^2 (each
  side's one boot has an offset of its own); df by Satterthwaite over the three terms. s_B^2 holds the recorded
  requests' noise too (s_w^2 / n_bar), which the Welch term already counts: conservative on purpose, since the
  difference beyond it is often estimated as 0 from a few boots that happened to agree, and a 0 would leave the
  request noise alone to decide (the false positives this rule is there to prevent).
- Satterthwaite's df is an approximation: p-values and intervals are close to nominal, not exact.
- se == 0 (identical values): a difference is certain, p is 0 or 1, the interval is the point.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_sglang_perf.gate.student_t import t_cdf, t_quantile

_LOG_MAX = math.log(1.7976931348623157e308)


@dataclass(frozen=True)
class LogDifference:
    """mean(log measured) - mean(log reference), with its standard error and degrees of freedom."""

    diff: float
    se: float
    df: float
    method: str
    """"welch": one reference boot, request samples on both sides (Welch's t on log values);
    "boots": several reference boots, so the boot-to-boot spread is part of the error;
    "paired-boots": both sides booted in turns, the error from the rounds' differences (`paired_boots`);
    "welch+boot-spread": one boot a side, with each side's recorded boot spread (`with_boot_spread`)."""
    n_reference: int
    """Reference samples (all boots)."""
    n_measured: int

    @property
    def change(self) -> float:
        """The relative change of the geometric mean, measured / reference - 1."""
        return _expm1(self.diff)

    def p_increase(self) -> float:
        """One-sided p-value, H1: measured > reference."""
        if self.se == 0:
            return 0.0 if self.diff > 0 else 1.0
        return _clamp(t_cdf(-self.diff / self.se, self.df))

    def p_decrease(self) -> float:
        """One-sided p-value, H1: measured < reference."""
        if self.se == 0:
            return 0.0 if self.diff < 0 else 1.0
        return _clamp(t_cdf(self.diff / self.se, self.df))

    def interval(self, confidence: float) -> tuple[float, float]:
        """Two-sided confidence interval of the relative change; confidence in [0, 1) (0 gives the point)."""
        if not 0.0 <= confidence < 1.0:
            raise ValueError(f"confidence must be in [0, 1), got {confidence!r}")
        if self.se == 0:
            return self.change, self.change
        half = t_quantile((1.0 + confidence) / 2.0, self.df) * self.se
        return _expm1(self.diff - half), _expm1(self.diff + half)

    def detectable(self, alpha: float, power: float) -> float:
        """The smallest relative change (> 0) a one-sided test at level alpha detects with probability `power`.

        The usual approximation: the shifted statistic is taken as a central t with this se and df. A power
        <= alpha is reached at any change >= 0 (the test fires with probability alpha at no change): 0.0."""
        for name, value in (("alpha", alpha), ("power", power)):
            if not 0.0 < value < 1.0:
                raise ValueError(f"{name} must be in (0, 1), got {value!r}")
        if self.se == 0:
            return 0.0
        shift = (t_quantile(1.0 - alpha, self.df) + t_quantile(power, self.df)) * self.se
        return max(_expm1(shift), 0.0)


def log_difference(reference: Sequence[Sequence[float]], measured: Sequence[float]) -> LogDifference | None:
    """None when no test is possible: a value that is not finite or not > 0, an empty group, or too few samples.

    `reference` holds one group of samples per server boot; the module docstring gives the rules."""
    logs, groups = _logs(measured), [_logs(group) for group in reference]
    valid = [group for group in groups if group is not None]
    if logs is None or not valid or len(valid) < len(groups):
        return None
    n_reference = sum(len(group) for group in valid)
    if len(valid) == 1:
        return _welch(valid[0], logs, n_reference)
    return _boots(valid, logs, n_reference)


@dataclass(frozen=True)
class BootSpread:
    """A metric's boot-to-boot variance of log values (the variance of the boot means), from samples recorded over
    several boots (the module docstring's rule), and its df (boots - 1)."""

    variance: float
    df: int


MIN_SPREAD_BOOTS = 3
"""A recorded boot spread counts from this many boots (2 df): from 2, its one df makes it near 0 too often."""


def boot_spread(groups: Sequence[Sequence[float]]) -> BootSpread | None:
    """The boot spread of one group of samples per boot (the module docstring's rule); None for fewer than
    MIN_SPREAD_BOOTS boots or a value without a log."""
    logs = [_logs(group) for group in groups]
    valid = [group for group in logs if group is not None]
    if len(valid) < MIN_SPREAD_BOOTS or len(valid) < len(logs):
        return None
    return BootSpread(_mean_var([_mean_var(group)[0] for group in valid])[1], len(valid) - 1)


def with_boot_spread(result: LogDifference, spreads: Sequence[BootSpread]) -> LogDifference:
    """A one-boot-a-side difference with each side's recorded boot spread in its error (the module docstring)."""
    terms = [(result.se ** 2, result.df), *((spread.variance, float(spread.df)) for spread in spreads)]
    variance = math.fsum(value for value, _ in terms)
    return LogDifference(result.diff, math.sqrt(variance), _satterthwaite(terms, result.df), "welch+boot-spread",
                         result.n_reference, result.n_measured)


def paired_boots(reference: Sequence[Sequence[float]], measured: Sequence[Sequence[float]]) -> LogDifference | None:
    """The difference between two variants' boots, paired by round (the module docstring's "paired-boots"): one
    group of samples per boot on each side, in boot order; rounds beyond the shorter side are left out. None when
    fewer than 2 rounds have valid samples on both sides."""
    pairs = [(_logs(a), _logs(b)) for a, b in zip(reference, measured, strict=False)]
    rounds = [(a, b) for a, b in pairs if a is not None and b is not None]
    if len(rounds) < 2 or len(rounds) < len(pairs):
        return None
    differences = [_mean_var(b)[0] - _mean_var(a)[0] for a, b in rounds]
    mean, var = _mean_var(differences)
    k = len(differences)
    return LogDifference(mean, math.sqrt(var / k), k - 1.0, "paired-boots", sum(len(a) for a, _ in rounds),
                         sum(len(b) for _, b in rounds))


def _welch(reference: list[float], measured: list[float], n_reference: int) -> LogDifference | None:
    n_r, n_m = len(reference), len(measured)
    if n_r < 2 or n_m < 2:
        return None
    mean_r, var_r = _mean_var(reference)
    mean_m, var_m = _mean_var(measured)
    terms = [(var_r / n_r, n_r - 1.0), (var_m / n_m, n_m - 1.0)]
    se = math.sqrt(terms[0][0] + terms[1][0])
    df = _satterthwaite(terms, fallback=n_r + n_m - 2.0)
    return LogDifference(mean_m - mean_r, se, df, "welch", n_reference, n_m)


def _boots(groups: list[list[float]], measured: list[float], n_reference: int) -> LogDifference:
    boots = len(groups)
    center, var_means = _mean_var([_mean_var(group)[0] for group in groups])
    var_within, df_within = _pooled_variance([*groups, measured])
    n_bar = boots / math.fsum(1.0 / len(group) for group in groups)
    c_b, c_w = _boots_coefficients(var_means, var_within, boots, n_bar, len(measured))
    terms = [(c_b * var_means, boots - 1.0), (c_w * var_within, float(df_within))]
    se = math.sqrt(max(terms[0][0] + terms[1][0], 0.0))
    df = _satterthwaite(terms, fallback=boots - 1.0)
    diff = _mean_var(measured)[0] - center
    return LogDifference(diff, se, df, "boots", n_reference, len(measured))


def _boots_coefficients(var_means: float, var_within: float, boots: int, n_bar: float,
                        n_measured: int) -> tuple[float, float]:
    """(c_b, c_w) with A + C = c_b s_B^2 + c_w s_w^2, for A = s_B^2 / B + between, C = s_w^2 / n_m and
    between = max(s_B^2 - s_w^2 / n_bar, 0).

    Satterthwaite's df is for a sum of independent mean squares: A and C share s_w^2 (with opposite signs while
    between > 0), so a df over A and C counts s_w^2's df twice and comes out too large: with 3 boots of 3 and
    boot offsets as large as the request noise, that fired 6.8% of the time at alpha 5% in simulation, the net
    coefficients 5.0% (with n_m = n_bar, se^2 = (1 + 1/B) s_B^2, an exact t with B - 1 df)."""
    if var_means - var_within / n_bar > 0:
        return 1.0 + 1.0 / boots, 1.0 / n_measured - 1.0 / n_bar
    return 1.0 / boots, 1.0 / n_measured


def _logs(values: Sequence[float]) -> list[float] | None:
    """Natural logs, or None for an empty group or a value without one (not finite, not > 0)."""
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        return None
    return [math.log(v) for v in values]


def _mean_var(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample variance (ddof 1; 0 for one value), two-pass with fsum so near-equal logs keep digits."""
    mean = math.fsum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


def _pooled_variance(groups: Sequence[Sequence[float]]) -> tuple[float, int]:
    """The within-group variance pooled over the groups with >= 2 values, and its df (0.0, 0 when none has)."""
    used = [group for group in groups if len(group) >= 2]
    df = sum(len(group) - 1 for group in used)
    if df == 0:
        return 0.0, 0
    return math.fsum(_mean_var(group)[1] * (len(group) - 1) for group in used) / df, df


def _satterthwaite(terms: Sequence[tuple[float, float]], fallback: float) -> float:
    """df of a variance estimate sum(c_i * s_i^2) of independent mean squares, each given as (c_i * s_i^2, its df):
    total^2 / sum(term^2 / df), zero terms skipped (a term may be negative).

    Taken as ratios to the total, so tiny variances do not underflow when squared; `fallback` when all are 0."""
    total = math.fsum(value for value, _ in terms)
    if total == 0:
        return fallback
    return 1.0 / math.fsum((value / total) ** 2 / df for value, df in terms if value)


def _clamp(p: float) -> float:
    return min(max(p, 0.0), 1.0)


def _expm1(x: float) -> float:
    """math.expm1 that saturates to inf instead of raising OverflowError."""
    return math.inf if x > _LOG_MAX else math.expm1(x)
