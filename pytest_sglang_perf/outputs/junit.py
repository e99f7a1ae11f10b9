"""A checked cell as JUnit properties (pytest's `record_property`): junit.xml carries the numbers and verdicts.

Names are `sglang_perf.<field>` for the cell and `sglang_perf.<metric>.<field>` per metric; values are numbers
where they are numbers (baseline and measured medians in the metric's unit, the relative change), so that a
dashboard fed by junit.xml can plot them. A field without a value (no baseline yet) is left out.
"""

from __future__ import annotations

from collections.abc import Iterator

from pytest_sglang_perf.gate.compare import Cell, MetricCheck
from pytest_sglang_perf.roofline.ceiling import DecodeCeiling

PREFIX = "sglang_perf"
Property = tuple[str, object]


def cell_properties(cell: Cell, *, cached_tokens: float | None = None,
                    roofline: DecodeCeiling | str | None = None, level: str = "") -> list[Property]:
    """The cell's properties: variant, verdict, simulated, then each metric's measured, baseline, change, allowed,
    unit and verdict; with `cached_tokens`, the median prompt tokens served from the prefix cache; with `roofline`,
    the decode's bandwidth ceiling (`sglang_perf.roofline.*`: efficiency, ceiling_tok_s, bandwidth_gb_s,
    bandwidth_source, diagnosis) or why there is none (`sglang_perf.roofline.unavailable`). A concurrency level's
    cell (`level` "@c16") names its properties `sglang_perf@c16.*`, so a sweep's levels stay apart."""
    prefix = PREFIX + level
    return [(prefix + name[len(PREFIX):], value) for name, value in _properties(cell, cached_tokens, roofline)]


def _properties(cell: Cell, cached_tokens: float | None, roofline: DecodeCeiling | str | None) -> list[Property]:
    head: list[Property] = [(f"{PREFIX}.variant", cell.variant), (f"{PREFIX}.verdict", cell.verdict.value),
                            (f"{PREFIX}.simulated", cell.simulated)]
    if cell.stale:
        head.append((f"{PREFIX}.stale", "; ".join(cell.stale)))
    if cell.reused:
        head.append((f"{PREFIX}.reused_server", cell.reused))
    if cached_tokens is not None:
        head.append((f"{PREFIX}.cached_tokens", cached_tokens))
    return [*head, *_roofline(roofline), *(prop for check in cell.checks for prop in _metric(check))]


def _roofline(ceiling: DecodeCeiling | str | None) -> list[Property]:
    name = f"{PREFIX}.roofline"
    if ceiling is None:
        return []
    if isinstance(ceiling, str):
        return [(f"{name}.unavailable", ceiling)]
    return [(f"{name}.efficiency", ceiling.efficiency), (f"{name}.ceiling_tok_s", ceiling.tok_s),
            (f"{name}.bandwidth_gb_s", ceiling.bandwidth.gb_s), (f"{name}.bandwidth_source", ceiling.bandwidth.source),
            (f"{name}.diagnosis", ceiling.diagnosis())]


def _metric(check: MetricCheck) -> Iterator[Property]:
    name = f"{PREFIX}.{check.metric}"
    fields: tuple[tuple[str, object], ...] = (
        ("measured", check.measured), ("baseline", check.baseline), ("change", check.change),
        ("allowed", check.allowed), ("unit", check.unit), ("verdict", check.verdict.value),
    )
    for field, value in fields:
        if value is not None:
            yield f"{name}.{field}", value
