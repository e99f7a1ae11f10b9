"""The numbers the A/B and history plots show, pulled out of results documents without matplotlib.

A cell's metric is the geometric mean of its per-request values with a confidence interval on the log scale
(Student's t from gate/statistics.py), as the gate and `sglang-perf compare` reason about them; a variant's change
against the reference variant is gate/statistics.py's `log_difference`, the same as in the A/B report. The samples
are rebuilt from the document's dicts (Sample.from_dict) and their values taken with measurement/values.py's
metric_values, never re-derived here. The boot costs (one value per boot) are the boot timeline's, not these.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pytest_sglang_perf.gate.ab import DEFAULT_CONFIDENCE, DEFAULT_REFERENCE
from pytest_sglang_perf.gate.statistics import log_difference
from pytest_sglang_perf.gate.student_t import t_quantile
from pytest_sglang_perf.measurement.metrics import GATED_ORDER, METRICS
from pytest_sglang_perf.measurement.samples import Sample
from pytest_sglang_perf.measurement.values import BOOT_METRICS, measures_prefill, metric_values

REQUEST_METRICS = tuple(name for name in GATED_ORDER if name not in BOOT_METRICS)
"""The per-request metrics, in the gate's order: the ones with samples to draw an interval from."""


@dataclass(frozen=True)
class Estimate:
    """One cell's metric: the geometric mean of its per-request values and its confidence interval."""

    center: float
    """Geometric mean."""
    low: float
    high: float
    """The interval; both equal `center` for one value or identical values."""
    median: float
    n: int
    baseline: float | None = None
    """The baseline's median when the cell was compared with one (cells[].metrics[name].baseline)."""

    def scaled(self, factor: float) -> Estimate:
        """The same estimate in another unit (every value times `factor`)."""
        return Estimate(self.center * factor, self.low * factor, self.high * factor, self.median * factor, self.n,
                        None if self.baseline is None else self.baseline * factor)


@dataclass(frozen=True)
class Change:
    """A variant against the reference variant: relative change of the geometric mean, its interval, its meaning."""

    change: float
    low: float
    high: float
    verdict: str
    """"better", "worse" (the interval excludes 0, in the metric's direction) or "not significant"."""


@dataclass(frozen=True)
class Panel:
    """One metric of a figure: an estimate (None: no usable value) per column (variants, or results files)."""

    metric: str
    unit: str
    better: str | None
    """"higher is better" / "lower is better"; None for a metric the plugin does not know."""
    estimates: tuple[Estimate | None, ...]
    changes: tuple[Change | None, ...] = ()
    """A/B only: each column against the reference column (None for the reference itself and where impossible)."""


@dataclass(frozen=True)
class AbFigure:
    """One test's variants side by side, one panel per metric."""

    test_id: str
    variants: tuple[str, ...]
    reference: str | None
    """The variant the others' changes are against; None with one variant."""
    panels: tuple[Panel, ...]
    simulated: bool
    missing: tuple[str, ...]
    """Variants of this test without any sample (they failed to measure)."""


@dataclass(frozen=True)
class HistoryFigure:
    """One test x variant across results files (oldest first), one panel per metric."""

    test_id: str
    variant: str
    labels: tuple[str, ...]
    """Per results file: its date and commit (see run_label)."""
    simulated: tuple[bool, ...]
    panels: tuple[Panel, ...]


def estimate(values: Sequence[float], confidence: float = DEFAULT_CONFIDENCE,
             baseline: float | None = None) -> Estimate | None:
    """The geometric mean of `values` with its two-sided t interval; None when there is no value or a value is not
    finite and > 0 (no geometric mean)."""
    if not values or not all(math.isfinite(v) and v > 0 for v in values):
        return None
    logs = [math.log(v) for v in values]
    mean = statistics.fmean(logs)
    half = 0.0
    if len(logs) > 1:
        half = t_quantile((1.0 + confidence) / 2.0, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return Estimate(math.exp(mean), math.exp(mean - half), math.exp(mean + half), statistics.median(values),
                    len(values), baseline)


def change(reference: Sequence[float], measured: Sequence[float], metric: str,
           confidence: float = DEFAULT_CONFIDENCE) -> Change | None:
    """`measured` against `reference` (one server boot each); None when no test is possible (log_difference)."""
    result = log_difference([list(reference)], list(measured)) if reference and measured else None
    if result is None:
        return None
    low, high = result.interval(confidence)
    return Change(result.change, low, high, _verdict(metric, low, high))


def _verdict(metric: str, low: float, high: float) -> str:
    if low <= 0 <= high:
        return "not significant"
    spec = METRICS.get(metric)
    if spec is None:
        return "higher" if low > 0 else "lower"
    return "better" if (low > 0) == spec.higher_is_better else "worse"


def better(metric: str) -> str | None:
    """"higher is better" or "lower is better" for a known metric."""
    spec = METRICS.get(metric)
    if spec is None:
        return None
    return "higher is better" if spec.higher_is_better else "lower is better"


def unit(metric: str, cells: Sequence[Mapping[str, Any] | None] = ()) -> str:
    """The metric's unit: METRICS', else what a cell's check says, else ''."""
    spec = METRICS.get(metric)
    if spec is not None:
        return spec.unit
    for cell in cells:
        found = _check(cell, metric).get("unit")
        if isinstance(found, str):
            return found
    return ""


def cell_values(cell: Mapping[str, Any]) -> dict[str, tuple[float, ...]]:
    """Each request metric's per-request values of a results cell (its `samples`); ValueError on a bad sample."""
    raw = cell.get("samples") or []
    params = cell.get("params")
    prefill = isinstance(params, Mapping) and measures_prefill(params.get("prompt_tokens"),
                                                               str(params.get("prefix_cache", "")))
    try:
        samples = [Sample.from_dict(item) for item in raw]
        return metric_values(samples, None, None, prefill=prefill)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as exc:
        where = f"{cell.get('test_id')} [{cell.get('variant')}]"
        raise ValueError(f"cell {where} has a malformed sample ({type(exc).__name__}: {exc})") from None


def baseline(cell: Mapping[str, Any] | None, metric: str) -> float | None:
    """The baseline median the cell was compared with, when it was."""
    value = _check(cell, metric).get("baseline")
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _check(cell: Mapping[str, Any] | None, metric: str) -> Mapping[str, Any]:
    metrics = (cell or {}).get("metrics")
    found = metrics.get(metric) if isinstance(metrics, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def cells_of(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The document's cells that are objects."""
    cells = doc.get("cells")
    return [cell for cell in cells if isinstance(cell, Mapping)] if isinstance(cells, list) else []


def ordered(items: Sequence[str]) -> list[str]:
    """Distinct items in first-seen order."""
    return list(dict.fromkeys(items))


def metric_names(values: Sequence[Mapping[str, Sequence[float]]]) -> list[str]:
    """The metrics any of these cells has values of: the gate's order first, then any other."""
    present = ordered([name for cell in values for name in cell])
    return [name for name in REQUEST_METRICS if name in present] + [n for n in present if n not in REQUEST_METRICS]


def ab_figures(doc: Mapping[str, Any], confidence: float = DEFAULT_CONFIDENCE) -> list[AbFigure]:
    """Per test of the document (in its order), the variants side by side; a test without samples is left out."""
    cells = cells_of(doc)
    figures = []
    for test_id in ordered([str(cell.get("test_id")) for cell in cells]):
        by_variant = {str(c.get("variant")): c for c in cells if str(c.get("test_id")) == test_id}
        values = {variant: cell_values(cell) for variant, cell in by_variant.items()}
        measured = [variant for variant, found in values.items() if found]
        if not measured:
            continue
        reference = _reference(measured)
        panels = tuple(_ab_panel(name, measured, reference, values, by_variant, confidence)
                       for name in metric_names([values[v] for v in measured]))
        simulated = bool(doc.get("simulated")) or any(bool(by_variant[v].get("simulated")) for v in measured)
        missing = tuple(variant for variant in by_variant if variant not in measured)
        figures.append(AbFigure(test_id, tuple(measured), reference, panels, simulated, missing))
    return figures


def _reference(variants: Sequence[str]) -> str | None:
    if len(variants) < 2:
        return None
    return DEFAULT_REFERENCE if DEFAULT_REFERENCE in variants else variants[0]


def _ab_panel(metric: str, variants: Sequence[str], reference: str | None,
              values: Mapping[str, Mapping[str, Sequence[float]]], cells: Mapping[str, Mapping[str, Any]],
              confidence: float) -> Panel:
    estimates = tuple(estimate(values[v].get(metric, ()), confidence, baseline(cells[v], metric)) for v in variants)
    changes: tuple[Change | None, ...] = ()
    if reference is not None:
        ref = values[reference].get(metric, ())
        changes = tuple(None if v == reference else change(ref, values[v].get(metric, ()), metric, confidence)
                        for v in variants)
    return Panel(metric, unit(metric, list(cells.values())), better(metric), estimates, changes)


def by_time(docs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The documents in generated_at order; one without a readable generated_at comes first (a stable sort)."""
    return sorted(docs, key=lambda doc: (_generated(doc) is not None, _generated(doc) or datetime.min))


def _generated(doc: Mapping[str, Any]) -> datetime | None:
    """generated_at as a naive UTC datetime; None when absent or unreadable."""
    raw = doc.get("generated_at")
    if not isinstance(raw, str):
        return None
    try:
        stamp = datetime.fromisoformat(raw)
    except ValueError:
        return None
    return stamp if stamp.tzinfo is None else stamp.astimezone(UTC).replace(tzinfo=None)


def run_label(doc: Mapping[str, Any]) -> str:
    """A results file's x label: run_date and, on a second line, run_commit when the file has one."""
    commit = run_commit(doc)
    return f"{run_date(doc)}\n{commit}" if commit else run_date(doc)


def run_date(doc: Mapping[str, Any]) -> str:
    """generated_at as 'YYYY-MM-DD HH:MM UTC'; the raw text when unreadable, 'date unknown' without one."""
    stamp = _generated(doc)
    if stamp is not None:
        return stamp.strftime("%Y-%m-%d %H:%M UTC")
    raw = doc.get("generated_at")
    return raw if isinstance(raw, str) and raw else "date unknown"


def run_commit(doc: Mapping[str, Any]) -> str | None:
    """machine.commit (10 characters, ' (dirty)' with uncommitted changes); None in a file without one."""
    machine = doc.get("machine")
    commit = machine.get("commit") if isinstance(machine, Mapping) else None
    if not isinstance(machine, Mapping) or not isinstance(commit, str) or not commit:
        return None
    return f"{commit[:10]}{' (dirty)' if machine.get('dirty') is True else ''}"


def history_figures(docs: Sequence[Mapping[str, Any]], confidence: float = DEFAULT_CONFIDENCE) -> list[HistoryFigure]:
    """Per test x variant with samples in 2+ of the documents, each metric across them in generated_at order."""
    runs = by_time(docs)
    tables = [{(str(c.get("test_id")), str(c.get("variant"))): c for c in cells_of(doc)} for doc in runs]
    keys = ordered([f"{t}\0{v}" for table in tables for (t, v) in table])
    figures = []
    for key in keys:
        test_id, variant = key.split("\0", 1)
        cells = [table.get((test_id, variant)) for table in tables]
        values = [cell_values(cell) if cell is not None else {} for cell in cells]
        if sum(1 for found in values if found) < 2:
            continue
        panels = tuple(
            Panel(name, unit(name, cells), better(name),
                  tuple(estimate(found.get(name, ()), confidence, baseline(cell, name))
                        for found, cell in zip(values, cells, strict=True)))
            for name in metric_names(values))
        simulated = tuple(bool(doc.get("simulated")) or bool((cell or {}).get("simulated"))
                          for doc, cell in zip(runs, cells, strict=True))
        figures.append(HistoryFigure(test_id, variant, tuple(run_label(doc) for doc in runs), simulated, panels))
    return figures
