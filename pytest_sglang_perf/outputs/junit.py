"""A checked cell as JUnit properties (pytest's `record_property`): junit.xml carries the numbers and verdicts.

Names are `sglang_perf.<field>` for the cell and `sglang_perf.<metric>.<field>` per metric; values are numbers
where they are numbers (baseline and measured medians in the metric's unit, the relative change), so that a
dashboard fed by junit.xml can plot them. A field without a value (no baseline yet) is left out.
"""

from __future__ import annotations

from collections.abc import Iterator

from pytest_sglang_perf.gate.compare import Cell, MetricCheck

PREFIX = "sglang_perf"
Property = tuple[str, object]


def cell_properties(cell: Cell, *, cached_tokens: float | None = None) -> list[Property]:
    """The cell's properties: variant, verdict, simulated, then each metric's measured, baseline, change, allowed,
    unit and verdict; with `cached_tokens`, the median prompt tokens served from the prefix cache."""
    head: list[Property] = [(f"{PREFIX}.variant", cell.variant), (f"{PREFIX}.verdict", cell.verdict.value),
                            (f"{PREFIX}.simulated", cell.simulated)]
    if cell.stale:
        head.append((f"{PREFIX}.stale", "; ".join(cell.stale)))
    if cached_tokens is not None:
        head.append((f"{PREFIX}.cached_tokens", cached_tokens))
    return [*head, *(prop for check in cell.checks for prop in _metric(check))]


def _metric(check: MetricCheck) -> Iterator[Property]:
    name = f"{PREFIX}.{check.metric}"
    fields: tuple[tuple[str, object], ...] = (
        ("measured", check.measured), ("baseline", check.baseline), ("change", check.change),
        ("allowed", check.allowed), ("unit", check.unit), ("verdict", check.verdict.value),
    )
    for field, value in fields:
        if value is not None:
            yield f"{name}.{field}", value
