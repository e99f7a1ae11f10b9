"""Compare measured samples with baseline samples: one direction-aware verdict per metric, with statistics.

A metric regresses only when both hold (docs/verdicts.md):
- practical: its median is worse than the baseline's by more than its tolerance (say 5%) and by more than its
  absolute floor (e.g. 2 ms of TTFT, so that timer ticks never count);
- statistical: a one-sided test on the log values of the raw samples (gate/statistics.py: Welch's t for one
  baseline boot, the boot-to-boot test for a baseline recorded over several boots) says the change is real at
  the configured confidence.
Worse beyond the tolerance without that evidence is `inconclusive`. A metric with one value a side (the boot
costs of a one-boot baseline) cannot be tested: the practical rule alone decides it, and the check says so
(`method` is None). Better beyond the tolerance, with evidence, is `improved`.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from pytest_sglang_perf.gate.statistics import LogDifference, log_difference
from pytest_sglang_perf.measurement.metrics import METRICS, PREFILL, Metric, metric
from pytest_sglang_perf.measurement.stats import Summary

BootValues = Sequence[Sequence[float]]
"""One metric's baseline values, grouped by the server boot they were measured on."""


class Verdict(enum.Enum):
    OK = "ok"
    REGRESSED = "regressed"
    INCONCLUSIVE = "inconclusive"
    """Worse beyond the tolerance, but the change is not established (no statistical evidence, or it did not
    hold when re-measured)."""
    IMPROVED = "improved"
    NEW = "new"
    """No baseline for this cell yet."""
    STALE = "stale"
    """The baseline was recorded for another request, server args, model or GPUs: not comparable."""
    UPDATED = "updated"


SEVERITY: tuple[Verdict, ...] = (
    Verdict.REGRESSED, Verdict.INCONCLUSIVE, Verdict.STALE, Verdict.NEW, Verdict.IMPROVED, Verdict.UPDATED,
    Verdict.OK,
)
"""Most severe first: the verdict a group of checks (a cell) gets is the first one present here."""


@dataclass(frozen=True)
class GatePolicy:
    """How sure a verdict must be: the confidence of the tests and the power the detectable change is sized at."""

    confidence: float = 0.95
    power: float = 0.80

    def __post_init__(self) -> None:
        for name, value in (("confidence", self.confidence), ("power", self.power)):
            if not 0.5 <= value < 1:
                raise ValueError(f"{name} must be in [0.5, 1), got {value!r}")

    @property
    def alpha(self) -> float:
        return 1.0 - self.confidence


@dataclass(frozen=True)
class MetricCheck:
    metric: str
    unit: str
    baseline: float | None
    """Baseline median; None when there is no comparable baseline (a NEW or STALE metric)."""
    measured: float | None
    """Measured median; None when no measured sample defined the metric (see `note`)."""
    change: float | None
    """Relative change of the medians (measured - baseline) / baseline; None without a baseline or when it is 0."""
    allowed: float
    """The tolerance: the relative change allowed in the worse direction."""
    verdict: Verdict
    p_value: float | None = None
    """One-sided p-value of the change in the worse direction; None when no test was possible."""
    detectable: float | None = None
    """The smallest relative change these samples detect at the policy's confidence and power (None: untestable)."""
    method: str | None = None
    """"welch" or "boots" (gate/statistics.py), None when the practical rule alone decided."""
    n: int = 0
    """How many measured values the check used."""
    note: str | None = None
    """Samples that could not define the metric ("tpot: 4/5 samples (1 arrived in one read)"), shown with it."""

    @property
    def underpowered(self) -> bool:
        """The samples cannot detect a change as small as the tolerance."""
        return self.detectable is not None and self.detectable > self.allowed


def worst(verdicts: Iterable[Verdict]) -> Verdict:
    """The most severe verdict (see SEVERITY); OK for no verdicts at all."""
    present = set(verdicts)
    return next((v for v in SEVERITY if v in present), Verdict.OK)


SAME_SERVER = "the same server"
FRESH_BOOT = "a fresh boot"
"""Where a regression was re-measured (Cell.confirmed_on), as the reports say it: `re-measured on a fresh boot`."""


@dataclass(frozen=True)
class Cell:
    """The checks of one test x variant."""

    test_id: str
    variant: str
    checks: tuple[MetricCheck, ...]
    simulated: bool
    updated: bool = False
    """The measured values were recorded as the new baseline (--sglang-update-baselines)."""
    stale: tuple[str, ...] = ()
    """What differs from the baseline's request, server args, model or GPUs ("max_tokens 512 -> 128")."""
    confirmation: tuple[MetricCheck, ...] | None = None
    """The re-measure's checks, when a regression was re-measured before failing (where: `confirmed_on`)."""
    confirmed_on: str = SAME_SERVER
    """Where the re-measure ran: SAME_SERVER or FRESH_BOOT (session/confirmation.py decides)."""
    reused: str | None = None
    """How its server was reused (a kept server booted by an earlier run, --sglang-reuse); None: a fresh boot."""
    disturbed: str | None = None
    """Why the regression is inconclusive although it held: the re-measure's conditions (`host busy: ...`,
    gate/conditions.py)."""
    verdict: Verdict = field(init=False)
    """UPDATED when the baseline was refreshed (the test passes whatever the checks said), STALE when the
    baseline is not comparable, otherwise the most severe check (see SEVERITY). Decided once, when the cell is
    made, so that the rooms that read a cell (report, JUnit, failure text) read a record's field."""

    def __post_init__(self) -> None:
        decided = Verdict.UPDATED if self.updated else Verdict.STALE if self.stale else worst(
            c.verdict for c in self.checks)
        object.__setattr__(self, "verdict", decided)


def relative_change(baseline: float, measured: float) -> float | None:
    """(measured - baseline) / |baseline|, or None when the baseline is 0 (no relative change exists)."""
    if baseline == 0:
        return None
    return (measured - baseline) / abs(baseline)


def check_metric(name: str, baseline: BootValues | None, measured: Sequence[float], tolerance: float,
                 policy: GatePolicy = GatePolicy()) -> MetricCheck:
    """Compare one metric's measured values with its baseline values (None: no comparable baseline)."""
    spec = metric(name)
    if tolerance < 0 or not math.isfinite(tolerance):
        raise ValueError(f"tolerance for {name} must be a finite number >= 0, got {tolerance!r}")
    median = Summary.of(measured).median
    if baseline is None:  # what a later run of the same size could detect against these samples
        stats = log_difference([measured], measured)
        return MetricCheck(name, spec.unit, None, median, None, tolerance, Verdict.NEW,
                           detectable=_detectable(stats, policy), n=len(measured))
    old = Summary.of([v for boot in baseline for v in boot]).median
    change = relative_change(old, median)
    stats = log_difference(baseline, measured)
    p_worse = None if stats is None else _p_worse(spec, stats)
    verdict = _verdict(spec, old, median, change, tolerance, stats, policy)
    note = None
    if (spec.zero_is_a_value and stats is None and verdict in (Verdict.REGRESSED, Verdict.IMPROVED)
            and _zeros_among(baseline, measured)):
        # e.g. goodput: a round in which no request met the SLO is 0, and a log-scale test cannot take it. With
        # several samples that is not "too few to test": a change without evidence is never a verdict.
        verdict = Verdict.INCONCLUSIVE if verdict is Verdict.REGRESSED else Verdict.OK
        note = f"{name}: no statistical test (a value of 0 among the samples)"
    return MetricCheck(name, spec.unit, old, median, change, tolerance, verdict, p_value=p_worse,
                       detectable=_detectable(stats, policy), method=None if stats is None else stats.method,
                       n=len(measured), note=note)


def _zeros_among(baseline: BootValues, measured: Sequence[float]) -> bool:
    """Several samples on both sides, some of them not > 0."""
    reference = [v for boot in baseline for v in boot]
    return len(reference) >= 2 and len(measured) >= 2 and min(*reference, *measured) <= 0


def _detectable(stats: LogDifference | None, policy: GatePolicy) -> float | None:
    return None if stats is None else stats.detectable(policy.alpha, policy.power)


def _p_worse(spec: Metric, stats: LogDifference) -> float:
    return stats.p_decrease() if spec.higher_is_better else stats.p_increase()


def _p_better(spec: Metric, stats: LogDifference) -> float:
    return stats.p_increase() if spec.higher_is_better else stats.p_decrease()


def _verdict(spec: Metric, baseline: float, measured: float, change: float | None, tolerance: float,
             stats: LogDifference | None, policy: GatePolicy) -> Verdict:
    if abs(measured - baseline) <= spec.abs_floor:
        return Verdict.OK
    # a zero baseline has no relative change: any difference beyond the floor counts as infinite
    worse = spec.worse(math.copysign(math.inf, measured - baseline) if change is None else change)
    if worse > tolerance:
        if stats is None or _p_worse(spec, stats) < policy.alpha:
            return Verdict.REGRESSED
        return Verdict.INCONCLUSIVE
    if -worse > tolerance and (stats is None or _p_better(spec, stats) < policy.alpha):
        return Verdict.IMPROVED
    return Verdict.OK


def within_tolerance(name: str, baseline: BootValues, measured: Sequence[float], tolerance: float,
                     policy: GatePolicy) -> bool:
    """Whether the samples show, at the policy's confidence, that the metric is not worse than its tolerance:
    the one-sided bound of the change in the worse direction is inside it (the adaptive plan stops there)."""
    spec = metric(name)
    stats = log_difference(baseline, measured)
    if stats is None:
        return False
    low, high = stats.interval(1.0 - 2.0 * policy.alpha)  # each bound is one-sided at alpha
    worst_case = spec.worse(low) if spec.higher_is_better else spec.worse(high)
    return worst_case < tolerance


def check_all(
    measured: Mapping[str, Sequence[float]],
    baseline: Mapping[str, BootValues] | None,
    tolerances: Mapping[str, float],
    policy: GatePolicy = GatePolicy(),
) -> tuple[MetricCheck, ...]:
    """Check every measured metric, and every metric the baseline has, in METRICS order.

    `baseline` None: no comparable baseline, every check is NEW. A metric missing from `tolerances` uses its
    default tolerance; a metric the baseline lacks is NEW; a metric the baseline has but no measured value defines
    is INCONCLUSIVE (`not_measured`): the table shows it, never drops it.
    """
    for name in measured:
        metric(name)  # an unknown metric name is a programming error: fail with the list of known ones
    checks: list[MetricCheck] = []
    for name, spec in METRICS.items():
        tolerance = tolerances.get(name, spec.default_tolerance)
        reference = None if baseline is None else baseline.get(name)
        if measured.get(name):
            checks.append(check_metric(name, reference, measured[name], tolerance, policy))
        elif reference:
            checks.append(not_measured(name, reference, tolerance))
    return floored_by_ttft(tuple(checks))


def floored_by_ttft(checks: tuple[MetricCheck, ...]) -> tuple[MetricCheck, ...]:
    """prefill_throughput is the prompt's tokens over each request's TTFT: a change of its TTFT within ttft's floor
    (timer and scheduler noise) never counts for it either, however large a share of a short TTFT that is."""
    ttft = next((c for c in checks if c.metric == "ttft"), None)
    if ttft is None or ttft.baseline is None or ttft.measured is None or \
            abs(ttft.measured - ttft.baseline) > metric("ttft").abs_floor:
        return checks
    return tuple(replace(c, verdict=Verdict.OK, note=_within_ttft_floor(c)) if c.metric == PREFILL and c.verdict in (
        Verdict.REGRESSED, Verdict.IMPROVED, Verdict.INCONCLUSIVE) else c for c in checks)


def _within_ttft_floor(check: MetricCheck) -> str:
    floor = metric("ttft").abs_floor
    return (f"{PREFILL}: its TTFT moved less than ttft's floor ({floor * 1e3:g} ms)"
            + (f"; {check.note}" if check.note else ""))


def not_measured(name: str, baseline: BootValues, tolerance: float) -> MetricCheck:
    """A metric the baseline has and this run could not measure: not gated, so not OK either."""
    old = Summary.of([v for boot in baseline for v in boot]).median
    return MetricCheck(name, metric(name).unit, old, None, None, tolerance, Verdict.INCONCLUSIVE,
                       note=f"{name}: not measured in this run")
