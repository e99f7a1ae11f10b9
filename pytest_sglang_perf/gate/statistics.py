"""The statistics of the gate: Student's t distribution, and the difference of two runs' log means.

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
- Satterthwaite's df is an approximation: p-values and intervals are close to nominal, not exact.
- se == 0 (identical values): a difference is certain, p is 0 or 1, the interval is the point.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

_EPSILON = 1e-15  # the relative accuracy the continued fraction and the quantile search stop at
_TINY = 1e-300  # Lentz's guard against a zero denominator
_MAX_TERMS = 10_000  # a bound on the continued fraction's terms; where it is used, it converges in under 100
_STIRLING_FROM = 10.0
"""From this argument on, a difference of log-gammas is taken from Stirling's series (lgamma loses digits)."""
_STIRLING_COEFFICIENTS = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156)
"""B(2k) / (2k (2k - 1)) for k = 1..7, B the Bernoulli numbers."""
_NORMAL_FROM = 1e25
"""From this df on the t distribution is the normal one to every digit of a float (they differ by about
t^4 / (4 df) relative, and the normal tail is 0 beyond t = 39); the beta form would run into _TINY."""
_LOG_MAX = math.log(1.7976931348623157e308)


def t_cdf(t: float, df: float) -> float:
    """Student's t cumulative distribution; df > 0, may be math.inf (the standard normal).

    The lower tail is computed directly and the upper one as its mirror, so the two agree and a far lower
    tail keeps its relative precision (a p-value of 1e-30 is 1e-30, not 0 from 1 - (1 - 1e-30))."""
    _check_df(df)
    if math.isnan(t):
        return math.nan
    if t == 0:
        return 0.5
    upper = _upper_tail(abs(t), df)
    return upper if t < 0 else 1.0 - upper


def t_quantile(p: float, df: float) -> float:
    """Inverse of t_cdf for 0 < p < 1 (ValueError otherwise); df may be math.inf."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile needs 0 < p < 1, got {p!r}")
    _check_df(df)
    if p == 0.5:
        return 0.0
    t = _solve_upper_tail(min(p, 1.0 - p), df)  # 1 - p is exact for p >= 0.5
    return t if p > 0.5 else -t


@dataclass(frozen=True)
class LogDifference:
    """mean(log measured) - mean(log reference), with its standard error and degrees of freedom."""

    diff: float
    se: float
    df: float
    method: str
    """"welch": one reference boot, request samples on both sides (Welch's t on log values);
    "boots": several reference boots, so the boot-to-boot spread is part of the error."""
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


def _check_df(df: float) -> None:
    if not df > 0:  # also refuses NaN
        raise ValueError(f"degrees of freedom must be > 0 (or math.inf), got {df!r}")


def _clamp(p: float) -> float:
    return min(max(p, 0.0), 1.0)


def _expm1(x: float) -> float:
    """math.expm1 that saturates to inf instead of raising OverflowError."""
    return math.inf if x > _LOG_MAX else math.expm1(x)


# --- Student's t through the regularised incomplete beta function -----------------------------------------


def _upper_tail(t: float, df: float) -> float:
    """P(T > t) for t >= 0: I_x(df/2, 1/2) / 2 with x = df / (df + t^2)."""
    if df >= _NORMAL_FROM:
        return 0.5 * math.erfc(t / math.sqrt(2.0))
    x, y, log_x, log_y = _beta_arguments(t, df)
    return 0.5 * _incomplete_beta(df / 2.0, 0.5, x, y, log_x, log_y)


def _central_mass(t: float, df: float) -> float:
    """P(0 < T < t) for t >= 0: I_y(1/2, df/2) / 2 with y = t^2 / (df + t^2); precise where t is small."""
    if df >= _NORMAL_FROM:
        return 0.5 * math.erf(t / math.sqrt(2.0))
    x, y, log_x, log_y = _beta_arguments(t, df)
    return 0.5 * _incomplete_beta(0.5, df / 2.0, y, x, log_y, log_x)


def _t_density(t: float, df: float) -> float:
    if df >= _NORMAL_FROM:
        return math.exp(-0.5 * t * t) / math.sqrt(2.0 * math.pi)
    log_kernel = -(df + 1.0) / 2.0 * math.log1p(t * t / df)
    return math.exp(log_kernel - 0.5 * math.log(df) - _log_beta(0.5, df / 2.0))


def _beta_arguments(t: float, df: float) -> tuple[float, float, float, float]:
    """x = df / (df + t^2), y = 1 - x, log x and log y: without cancellation, and without overflow or a lost
    tail for a huge t (the logs stay finite where x underflows: P(T > 1e200) with df = 1 is 3e-201, not 0)."""
    root = math.sqrt(df)
    s = root / t if t > root else t / root  # <= 1: the square of the smaller of sqrt(df) and t over the larger
    r = s * s
    log_small = 2.0 * math.log(s) - math.log1p(r) if s > 0 else -math.inf
    small, big, log_big = r / (1.0 + r), 1.0 / (1.0 + r), -math.log1p(r)
    return (small, big, log_small, log_big) if t > root else (big, small, log_big, log_small)


def _incomplete_beta(a: float, b: float, x: float, y: float, log_x: float, log_y: float) -> float:
    """The regularised incomplete beta function I_x(a, b), with y = 1 - x and the logs passed in at full precision.

    Its continued fraction converges fast for x < (a + 1) / (a + b + 2) (asked of y where x is close to 1 and
    has lost digits); beyond that, I_x(a, b) = 1 - I_y(b, a) brings the argument back under the switch point
    (and the result is then not small, so the subtraction loses nothing)."""
    if (x < (a + 1.0) / (a + b + 2.0)) if x <= 0.5 else (y > (b + 1.0) / (a + b + 2.0)):
        return _clamp(_beta_front(a, b, log_x, log_y) * _beta_fraction(a, b, x, y))
    return _clamp(1.0 - _beta_front(b, a, log_y, log_x) * _beta_fraction(b, a, y, x))


def _beta_front(a: float, b: float, log_x: float, log_y: float) -> float:
    """x^a y^b / (a B(a, b)), in logs."""
    return math.exp(a * log_x + b * log_y - _log_beta(a, b)) / a


def _beta_fraction(a: float, b: float, x: float, y: float) -> float:
    """The continued fraction of I_x(a, b) / front, 1 / (1 + d1 / (1 + d2 / (1 + ...))) with
    d(2m+1) = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1)),  d(2m) = m (b - m) x / ((a + 2m - 1)(a + 2m)),
    taken in its even form 1 / (beta(0) + alpha(1) / (beta(1) + alpha(2) / ...)), beta(m) = 1 + d(2m) + d(2m+1),
    alpha(m) = -d(2m-1) d(2m), and evaluated by Lentz's method (the product of the ratios C D of successive
    convergents). The even form lets 1 + d(2m+1) be written without cancellation (see _one_plus_odd)."""
    odd = _odd_term(a, b, x, 0)
    g = c = _one_plus_odd(a, b, y, odd, 0)
    d = 0.0
    for m in range(1, _MAX_TERMS):
        even = m * (b - m) / (a + 2 * m - 1) * (x / (a + 2 * m))
        alpha = -odd * even
        odd = _odd_term(a, b, x, m)
        beta = _one_plus_odd(a, b, y, odd, m) + even
        d = beta + alpha * d
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = beta + alpha / c
        c = c if abs(c) > _TINY else _TINY
        g *= c * d
        if abs(c * d - 1.0) < _EPSILON:
            break
    return 1.0 / g


def _odd_term(a: float, b: float, x: float, m: int) -> float:
    """d(2m+1), as a product of ratios so that a huge a (df = 1e300) does not overflow."""
    return -(a + m) / (a + 2 * m) * ((a + b + m) / (a + 2 * m + 1)) * x


def _one_plus_odd(a: float, b: float, y: float, odd: float, m: int) -> float:
    """1 + d(2m+1). For a large a and x close to 1, d is close to -1 and 1 + d would keep only the digits of x
    that 1 - x has lost (df = 1e6 lost 5 of them): for b <= 1 it is rewritten, every term >= 0, as
    (a (2m + 1 - b) + 3m^2 + m (2 - b) + (a + m)(a + b + m) y) / ((a + 2m)(a + 2m + 1))."""
    if b > 1:
        return 1.0 + odd
    rest = ((2 * m + 1 - b) * a + 3 * m * m + m * (2 - b)) / (a + 2 * m) / (a + 2 * m + 1)
    return rest + (a + m) / (a + 2 * m) * ((a + b + m) / (a + 2 * m + 1)) * y


def _log_beta(a: float, b: float) -> float:
    """log B(a, b) = lgamma(a) + lgamma(b) - lgamma(a + b). With one argument z large, the difference of two huge
    lgammas would lose digits (6 of them at df = 1e6): there Stirling's series gives it in closed form,
    log(Gamma(z + s) / Gamma(z)) = (z - 1/2) log1p(s/z) + s log(z + s) - s + R(z + s) - R(z)."""
    s, z = min(a, b), max(a, b)
    if z < _STIRLING_FROM:
        return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    ratio = (z - 0.5) * math.log1p(s / z) + s * math.log(z + s) - s + _stirling_rest(z + s) - _stirling_rest(z)
    return math.lgamma(s) - ratio


def _stirling_rest(w: float) -> float:
    """R(w), Stirling's series after its leading terms: sum of B(2k) / (2k (2k - 1) w^(2k-1)), k = 1..7; for
    w >= 10 the first term left out is below 1e-16 (and R(z + s) - R(z) is smaller still)."""
    inv2 = 1.0 / (w * w)
    total = 0.0
    for coefficient in reversed(_STIRLING_COEFFICIENTS):
        total = total * inv2 + coefficient
    return total / w


# --- the quantile: bracketing, then Newton's method kept inside the bracket --------------------------------


def _solve_upper_tail(q: float, df: float) -> float:
    """The t >= 0 with P(T > t) = q, for 0 < q < 0.5.

    Solved as residual(t) = 0 for an increasing residual whose slope is the density: q - P(T > t) in the
    tail, P(0 < T < t) - (0.5 - q) near the centre (where the tail would carry no digits of t)."""
    residual = partial(_tail_residual, q, df) if q < 0.25 else partial(_central_residual, 0.5 - q, df)
    low, high = _bracket(residual)
    if math.isinf(high):
        return math.inf  # beyond the largest float: a p of a few 1e-309 with df = 1
    return _newton_in_bracket(residual, partial(_t_density, df=df), low, high)


def _tail_residual(q: float, df: float, t: float) -> float:
    return q - _upper_tail(t, df)


def _central_residual(mass: float, df: float, t: float) -> float:
    return _central_mass(t, df) - mass  # 0.5 - q is exact for q in [0.25, 0.5]


def _bracket(residual: Callable[[float], float]) -> tuple[float, float]:
    """low < high = 2 low (or low = 0) with residual(low) <= 0 <= residual(high), by doubling or halving from 1."""
    if residual(1.0) < 0:
        high = 2.0
        while not math.isinf(high) and residual(high) < 0:
            high *= 2.0
        return high / 2.0, high
    low = 0.5
    while low > 0 and residual(low) > 0:
        low /= 2.0
    return low, max(2.0 * low, 5e-324)


def _newton_in_bracket(residual: Callable[[float], float], slope: Callable[[float], float],
                       low: float, high: float) -> float:
    """Newton's steps, replaced by bisection whenever a step would leave the shrinking bracket."""
    t = 0.5 * (low + high)
    for _ in range(200):
        r = residual(t)
        if r == 0:
            return t
        low, high = (t, high) if r < 0 else (low, t)
        density = slope(t)
        step = r / density if density > 0 else math.inf
        nxt = t - step
        if not low < nxt < high:
            nxt = 0.5 * (low + high)
        if abs(nxt - t) <= _EPSILON * abs(t) or high - low <= _EPSILON * high:
            return nxt
        t = nxt
    return t
