"""Student's t distribution: its cumulative distribution and its quantiles, through the regularised incomplete beta
function, precise in the far tails (the gate's p-values and intervals, gate/statistics.py)."""

from __future__ import annotations

import math
from collections.abc import Callable
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


def _check_df(df: float) -> None:
    if not df > 0:  # also refuses NaN
        raise ValueError(f"degrees of freedom must be > 0 (or math.inf), got {df!r}")



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


def _clamp(p: float) -> float:
    return min(max(p, 0.0), 1.0)
