"""The numbers of a concurrency sweep's picture, from a results document: per test whose cells were measured at two
or more levels (`...::test_x`, `...::test_x@c16`, `...::test_x@cmax`: gate/cell_ids.py), each variant's output
throughput, TTFT and TPOT p99 and goodput against the streams sent at once (each cell's `load` and `summaries`
records: measurement/concurrency.py's load_record). No drawing here (plots/sweep.py draws)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pytest_sglang_perf.gate.cell_ids import collected_test
from pytest_sglang_perf.plots.data import cells_of


@dataclass(frozen=True)
class SweepLine:
    """One variant's values, by the streams sent at once (ascending)."""

    variant: str
    points: tuple[tuple[int, float], ...]


@dataclass(frozen=True)
class SweepPanel:
    title: str
    unit: str
    lines: tuple[SweepLine, ...]


@dataclass(frozen=True)
class SweepFigure:
    test_id: str
    """The collected test: the level's suffix left out."""
    panels: tuple[SweepPanel, ...]
    simulated: bool


def _median(name: str) -> Callable[[Mapping[str, Any]], Any]:
    return lambda cell: _get(cell, "summaries", name, "median")


def _p99_ms(name: str) -> Callable[[Mapping[str, Any]], Any]:
    def value(cell: Mapping[str, Any]) -> Any:
        p99 = _get(cell, "load", "latency_percentiles", name, "p99")
        return p99 * 1000 if _number(p99) else None
    return value


_PANELS: tuple[tuple[str, str, Callable[[Mapping[str, Any]], Any]], ...] = (
    ("output throughput (median over rounds)", "tok/s", _median("output_throughput")),
    ("TTFT p99 over every request", "ms", _p99_ms("ttft")),
    ("TPOT p99 over every request", "ms", _p99_ms("tpot")),
    ("goodput (median over rounds)", "req/s", _median("goodput")),
)
"""What each panel shows; a panel no cell has a value of is left out (goodput needs an SLO)."""


def sweep_figures(doc: Mapping[str, Any]) -> list[SweepFigure]:
    """A figure per test measured at two or more concurrency levels, in the document's order."""
    levels: dict[str, dict[str, dict[int, Mapping[str, Any]]]] = {}
    for cell in cells_of(doc):
        streams = _get(cell, "load", "streams")
        if isinstance(streams, int) and not isinstance(streams, bool) and streams >= 1:
            test = collected_test(str(cell.get("test_id")))
            levels.setdefault(test, {}).setdefault(str(cell.get("variant")), {})[streams] = cell
    figures = []
    for test, variants in levels.items():
        if len({streams for cells in variants.values() for streams in cells}) < 2:
            continue
        panels = [panel for panel in (_panel(spec, variants) for spec in _PANELS) if panel.lines]
        simulated = any(bool(cell.get("simulated")) for cells in variants.values() for cell in cells.values())
        if panels:
            figures.append(SweepFigure(test, tuple(panels), simulated))
    return figures


def _panel(spec: tuple[str, str, Callable[[Mapping[str, Any]], Any]],
           variants: Mapping[str, Mapping[int, Mapping[str, Any]]]) -> SweepPanel:
    title, unit, read = spec
    lines = []
    for variant, cells in variants.items():
        points = tuple((streams, float(value)) for streams, value in
                       ((streams, read(cell)) for streams, cell in sorted(cells.items())) if _number(value))
        if points:
            lines.append(SweepLine(variant, points))
    return SweepPanel(title, unit, tuple(lines))


def _get(record: Any, *keys: str) -> Any:
    for key in keys:
        if not isinstance(record, Mapping):
            return None
        record = record.get(key)
    return record


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value  # NaN is no number
