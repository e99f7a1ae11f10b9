"""Compare measured summaries with baseline summaries: one direction-aware verdict per metric.

A metric may get worse by its tolerance (say 5%), or by three times the two runs' combined relative
noise when that is larger, but never by more than four times the tolerance. It fails only when it is
worse by more than that and by more than its absolute floor (e.g. 2 ms of TTFT), so timer ticks and
noisy runs do not fail tests while a very noisy run still cannot hide a large regression.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pytest_sglang_perf.measurement.metrics import METRICS, Metric, metric
from pytest_sglang_perf.measurement.stats import Summary

NOISE_K = 3.0
"""The band is widened to NOISE_K standard deviations of the combined relative noise of both runs."""
NOISE_CAP = 4.0
"""Noise never widens the band beyond NOISE_CAP times the tolerance."""


class Verdict(enum.Enum):
    OK = "ok"
    REGRESSED = "regressed"
    IMPROVED = "improved"
    NEW = "new"
    UPDATED = "updated"


SEVERITY: tuple[Verdict, ...] = (
    Verdict.REGRESSED, Verdict.NEW, Verdict.IMPROVED, Verdict.UPDATED, Verdict.OK,
)
"""Most severe first: the verdict a group of checks (a cell) gets is the first one present here."""


@dataclass(frozen=True)
class MetricCheck:
    metric: str
    unit: str
    baseline: float | None
    """Baseline median; None when there is no baseline (a NEW metric)."""
    measured: float
    """Measured median."""
    change: float | None
    """Relative change (measured - baseline) / baseline; None without a baseline or when it is 0."""
    allowed: float
    """Relative band allowed in the worse direction, after noise widening."""
    verdict: Verdict


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    """The most severe verdict (see SEVERITY); OK for no verdicts at all."""
    present = set(verdicts)
    return next((v for v in SEVERITY if v in present), Verdict.OK)


@dataclass(frozen=True)
class Cell:
    """The checks of one test x variant."""

    test_id: str
    variant: str
    checks: tuple[MetricCheck, ...]
    simulated: bool
    updated: bool = False
    """The measured values were recorded as the new baseline (--sglang-update-baselines)."""

    @property
    def verdict(self) -> Verdict:
        """UPDATED when the baseline was refreshed (the test passes whatever the checks said),
        otherwise the most severe check: regressed > new > improved > updated > ok."""
        return Verdict.UPDATED if self.updated else worst(c.verdict for c in self.checks)


def allowed_band(metric: Metric, tolerance: float, baseline: Summary, measured: Summary) -> float:
    """The relative band allowed in the worse direction: the tolerance, widened by noise, capped."""
    if tolerance < 0 or not math.isfinite(tolerance):
        raise ValueError(f"tolerance for {metric.name} must be a finite number >= 0, got {tolerance!r}")
    noise = math.hypot(baseline.relative_noise(), measured.relative_noise())
    return min(max(tolerance, NOISE_K * noise), NOISE_CAP * tolerance)


def relative_change(baseline: float, measured: float) -> float | None:
    """(measured - baseline) / |baseline|, or None when the baseline is 0 (no relative change exists)."""
    if baseline == 0:
        return None
    return (measured - baseline) / abs(baseline)


def check_metric(name: str, baseline: Summary | None, measured: Summary, tolerance: float) -> MetricCheck:
    """Compare one metric's measured summary with its baseline summary."""
    spec = metric(name)
    if baseline is None:  # the band a later run with the same noise would get
        allowed = allowed_band(spec, tolerance, measured, measured)
        return MetricCheck(name, spec.unit, None, measured.median, None, allowed, Verdict.NEW)
    allowed = allowed_band(spec, tolerance, baseline, measured)
    change = relative_change(baseline.median, measured.median)
    verdict = _verdict(spec, baseline.median, measured.median, change, allowed)
    return MetricCheck(name, spec.unit, baseline.median, measured.median, change, allowed, verdict)


def _verdict(spec: Metric, baseline: float, measured: float, change: float | None, allowed: float) -> Verdict:
    if abs(measured - baseline) <= spec.abs_floor:
        return Verdict.OK
    # a zero baseline has no relative change: any difference beyond the floor counts as infinite
    worse = spec.worse(math.copysign(math.inf, measured - baseline) if change is None else change)
    if worse > allowed:
        return Verdict.REGRESSED
    if -worse > allowed:
        return Verdict.IMPROVED
    return Verdict.OK


def check_all(
    measured: Mapping[str, Summary],
    baseline: Mapping[str, Summary] | None,
    tolerances: Mapping[str, float],
) -> tuple[MetricCheck, ...]:
    """Check every measured metric, in METRICS order; metrics only in the baseline are ignored.

    A metric missing from `tolerances` uses its default tolerance.
    """
    for name in measured:
        metric(name)  # an unknown metric name is a programming error: fail with the list of known ones
    old = baseline or {}
    return tuple(
        check_metric(name, old.get(name), measured[name], tolerances.get(name, spec.default_tolerance))
        for name, spec in METRICS.items()
        if name in measured
    )
