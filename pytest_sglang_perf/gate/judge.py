"""The gate's decisions for one session: find a cell's comparable baseline, judge a measurement against it, confirm
a regression with a re-measure, and tell the adaptive plan when a verdict is decided.

Plain Python (no pytest, no server): the session gives each cell its `CellPlace` (the baseline file key and the
cell's identity) and a re-measure to call; docs/verdicts.md describes the rules.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from pytest_sglang_perf.gate.across_boots import NOT_ESTABLISHED, held_across_boots
from pytest_sglang_perf.gate.baseline import BaselineEntry
from pytest_sglang_perf.gate.compare import (
    SAME_SERVER,
    BootValues,
    Cell,
    GatePolicy,
    MetricCheck,
    Verdict,
    check_all,
    check_metric,
    within_tolerance,
)
from pytest_sglang_perf.gate.efficiency import judged_efficiency, with_efficiency
from pytest_sglang_perf.gate.identity import CellIdentity, differences
from pytest_sglang_perf.gate.store import BaselineStore
from pytest_sglang_perf.measurement.concurrency import Slo
from pytest_sglang_perf.measurement.metrics import metric
from pytest_sglang_perf.measurement.result import Result
from pytest_sglang_perf.measurement.values import BOOT_METRICS, measures_prefill, result_coverage

EARLY_STOP_SHARE = 1 / 3
"""The adaptive plan stops early on a change only at this share of the policy's alpha: every look at growing data
is another chance of a false alarm, and the final look (at the maximum count) keeps the full alpha."""
_COUNTED_KEY = re.compile(r"^(?P<prefix>(?:simulated-)?)(?P<count>\d+)x(?P<rest>.+)$")
NO_IDENTITY = "the baseline was recorded without the cell's identity (by an older pytest-sglang-perf)"


@dataclass(frozen=True)
class CellPlace:
    """Where a cell's baseline lives and what the cell measures."""

    key: str
    """The baseline file's environment key (GPU model x GPUs used, model)."""
    identity: CellIdentity


@dataclass(frozen=True)
class Comparable:
    """A cell's baseline as the gate sees it: the entry when it is comparable, else what differs."""

    entry: BaselineEntry | None
    stale: tuple[str, ...] = ()


class Judge:
    def __init__(self, directory: Path, policy: GatePolicy, tolerance: Callable[[str], float],
                 default_of: Callable[[str], str | None], *, efficiency_gate: bool = False) -> None:
        self.directory = directory
        self.efficiency_gate = efficiency_gate
        """`tolerance.bandwidth_efficiency` is set: each cell's share of its bandwidth ceiling is gated too."""
        self.policy = policy
        self._tolerance = tolerance
        self._default_of = default_of
        self._stores: dict[str, BaselineStore] = {}

    def store(self, key: str) -> BaselineStore:
        if key not in self._stores:
            self._stores[key] = BaselineStore(self.directory, key)
        return self._stores[key]

    # Finding the baseline ------------------------------------------------------------------------------------

    def comparable(self, test_id: str, variant: str, place: CellPlace) -> Comparable:
        """The cell's baseline if it was recorded for the same request, args, model and GPUs."""
        entry = self.store(place.key).lookup(test_id, variant)
        if entry is None:
            return Comparable(None, self._elsewhere(test_id, variant, place))
        if entry.identity is None:
            return Comparable(None, (NO_IDENTITY,))
        changed = differences(entry.identity, place.identity, self._default_of)
        return Comparable(None, tuple(changed)) if changed else Comparable(entry)

    def _elsewhere(self, test_id: str, variant: str, place: CellPlace) -> tuple[str, ...]:
        """No baseline under this key: the same cell recorded for another GPU count of the same GPU model (a changed
        --tp-size) is stale, not new, and says what changed."""
        for key in self._sibling_keys(place.key):
            entry = self.store(key).lookup(test_id, variant)
            if entry is not None:
                changed = [] if entry.identity is None else differences(entry.identity, place.identity,
                                                                        self._default_of)
                return (f"the baseline was recorded as {key}", *changed)
        return ()

    def _sibling_keys(self, key: str) -> list[str]:
        match = _COUNTED_KEY.match(key)
        if match is None:
            return []
        pattern = re.compile(rf"^{re.escape(match['prefix'])}\d+x{re.escape(match['rest'])}$")
        stems = sorted(path.stem for path in self.directory.glob("*.json"))
        return [stem for stem in stems if stem != key and pattern.match(stem)]

    # Judging -------------------------------------------------------------------------------------------------

    def judge(self, test_id: str, result: Result, place: CellPlace) -> Cell:
        """The cell's checks against its comparable baseline (NEW checks without one)."""
        found = self.comparable(test_id, result.variant, place)
        reference = None if found.entry is None else reference_values(found.entry, gate=self.efficiency_gate,
                                                                      slo=result.params.slo)
        if reference is not None and result.reused:  # no boot in this run: its boot metrics are not compared
            reference = {name: values for name, values in reference.items() if name not in BOOT_METRICS}
        checks = check_all(result.values, reference, self._tolerances(result.values), self.policy)
        if self.efficiency_gate:
            checks = judged_efficiency(checks, None if found.entry is None else found.entry.roofline,
                                       has_entry=found.entry is not None, current=result.roofline)
        return Cell(test_id, result.variant, with_coverage(checks, result), result.simulated, stale=found.stale,
                    reused=result.reused)

    def confirm(self, cell: Cell, again: Result, place: CellPlace, *, on: str = SAME_SERVER,
                other_boot: Mapping[str, tuple[float, ...]] | None = None, first: Result | None = None) -> Cell:
        """A regressed cell re-measured `on` a fresh boot or the same server: each regression holds only if the
        re-measure regresses too; one that does not is INCONCLUSIVE. The re-measure's checks are kept for the report.

        A boot metric is only ever confirmed by a boot: on the same server, the re-measure's boot metrics are those
        `other_boot` measured (another boot of the variant in this session), judged against this cell's baseline,
        where given; else not measured. On a fresh boot, against a baseline of one boot, a request metric that
        regressed again holds only if the two boots (`first`, `again`) establish it (gate/across_boots.py)."""
        if on != SAME_SERVER:
            second = self.judge(cell.test_id, again, place).checks
            second = second if first is None else self._across_boots(cell.test_id, place, first, again, second)
        else:
            regressed = {check.metric for check in cell.checks if check.verdict is Verdict.REGRESSED}
            booted = {name: values for name, values in (other_boot or {}).items()
                      if name in BOOT_METRICS and name in regressed}
            unbooted = {name: values for name, values in again.values.items() if name not in BOOT_METRICS}
            second = tuple(_not_rebooted(check) if check.metric in BOOT_METRICS and check.metric not in booted
                           else check
                           for check in self.judge(cell.test_id, replace(again, values={**unbooted, **booted}),
                                                   place).checks)
        return replace(cell, checks=confirmed(cell.checks, second), confirmation=second, confirmed_on=on)

    def _across_boots(self, test_id: str, place: CellPlace, first: Result, again: Result,
                      second: tuple[MetricCheck, ...]) -> tuple[MetricCheck, ...]:
        """The fresh boot's checks, each regression that the two boots do not establish made INCONCLUSIVE."""
        entry = self.comparable(test_id, again.variant, place).entry
        if entry is None:
            return second
        reference = reference_values(entry, gate=self.efficiency_gate, slo=again.params.slo)
        out = []
        for check in second:
            baseline = reference.get(check.metric)
            if check.verdict is Verdict.REGRESSED and check.metric not in BOOT_METRICS and baseline is not None:
                held = held_across_boots(check.metric, baseline, first.values.get(check.metric, ()),
                                         again.values.get(check.metric, ()), self.policy.alpha)
                if held is False:
                    check = replace(check, verdict=Verdict.INCONCLUSIVE,
                                    note=NOT_ESTABLISHED.format(metric=check.metric))
            out.append(check)
        return tuple(out)

    def decided(self, test_id: str, place: CellPlace, *, recording: bool = False) -> Callable[[Result], bool]:
        """For the adaptive plan: whether a measurement so far settles every request metric's verdict. `recording`
        (a new baseline): once the samples could detect a change of the tolerance, whatever the old baseline."""
        def decided(result: Result) -> bool:
            entry = None if recording else self.comparable(test_id, result.variant, place).entry
            reference = None if entry is None else reference_values(entry, gate=self.efficiency_gate,
                                                                    slo=result.params.slo)
            return all(settled(name, values, None if reference is None else reference.get(name),
                               self._tolerance(name), self.policy)
                       for name, values in result.values.items() if name not in BOOT_METRICS)

        return decided

    def _tolerances(self, values: Mapping[str, object]) -> dict[str, float]:
        return {name: self._tolerance(name) for name in values}


def reference_values(entry: BaselineEntry, *, gate: bool, slo: Slo | None = None) -> dict[str, BootValues]:
    """The entry's values per boot; with the optional gate on (gate/efficiency.py), its share of the bandwidth
    ceiling it was recorded against too, so that a run without a ceiling shows the metric as not measured. Goodput
    is the baseline's samples judged by the run's SLO (`slo`; none: no goodput), so a changed SLO compares like with
    like without making the cell stale."""
    values = entry.boot_values(slo)
    return with_efficiency(values, entry.roofline) if gate else dict(values)


def settled(name: str, values: Sequence[float], reference: BootValues | None, tolerance: float,
            policy: GatePolicy) -> bool:
    """The adaptive plan's stopping rule for one metric: its verdict is decided at the policy's confidence.

    Decided: regressed or improved with evidence at a third of alpha (EARLY_STOP_SHARE); a change below half the
    metric's absolute floor; or the one-sided
    bound of the change inside the tolerance (it cannot be a regression). Without a comparable baseline: once the
    samples could detect a change as small as the tolerance, so that the baseline they become is good enough.
    """
    check = check_metric(name, reference, values, tolerance, policy)
    if reference is None:
        return check.detectable is not None and check.detectable <= tolerance
    if check.verdict in (Verdict.REGRESSED, Verdict.IMPROVED):  # an early stop on a change needs stronger evidence
        return check.p_value is None or min(check.p_value, 1.0 - check.p_value) < policy.alpha * EARLY_STOP_SHARE
    measured, baseline = check.measured, check.baseline
    if measured is not None and baseline is not None and abs(measured - baseline) <= metric(name).abs_floor / 2:
        return True
    return check.verdict is Verdict.OK and within_tolerance(name, reference, values, tolerance, policy)


def with_coverage(checks: Sequence[MetricCheck], result: Result) -> tuple[MetricCheck, ...]:
    """Each check with a note when some of the result's samples could not define its metric (none is dropped),
    or when none did and the metric is not measured (Result.coverage)."""
    coverage = result.coverage if result.coverage is not None else result_coverage(
        result.samples, measures_prefill(result.params.prompt_tokens, result.params.prefix_cache))
    out = []
    for check in checks:
        cover = coverage.get(check.metric)
        if cover is not None and (cover.defined > 0 or check.measured is None):
            check = replace(check, note=cover.describe(check.metric))
        out.append(check)
    return tuple(out)


def _not_rebooted(check: MetricCheck) -> MetricCheck:
    """A boot metric's re-measure on the same server without another boot: not measured (the same boot again is no
    second measurement)."""
    return replace(check, measured=None, change=None, p_value=None, detectable=None, verdict=Verdict.INCONCLUSIVE,
                   note=f"{check.metric}: not re-measured (a boot metric is re-measured only by another boot)")


def confirmed(first: Sequence[MetricCheck], second: Sequence[MetricCheck]) -> tuple[MetricCheck, ...]:
    """The first checks, with each REGRESSED one that the second measurement does not regress made INCONCLUSIVE."""
    again = {check.metric: check.verdict for check in second}
    return tuple(
        replace(check, verdict=Verdict.INCONCLUSIVE)
        if check.verdict is Verdict.REGRESSED and again.get(check.metric) is not Verdict.REGRESSED else check
        for check in first
    )
