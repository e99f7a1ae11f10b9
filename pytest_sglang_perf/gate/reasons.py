"""Why a cell passed without a verdict the gate can stand on, in a line: what the terminal summary lists under the
line that counts such cells (gate/terminal.py), a few at a time.

Every source of an inconclusive verdict leaves its reason on the cell: a change without statistical evidence
(gate/compare.py, its p-value), a metric without a test (a 0 among the samples) or not measured (compare.py, the
check's note), a bandwidth ceiling computed on other grounds (gate/efficiency.py, the note), a regression that did
not hold when re-measured (gate/judge.py, the cell's confirmation) and one re-measured under disturbed conditions
(session/conditions.py, the cell's `disturbed`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_sglang_perf.gate.compare import Cell, MetricCheck, Verdict
from pytest_sglang_perf.gate.formats import format_allowed, format_change, format_p
from pytest_sglang_perf.measurement.metrics import EFFICIENCY

LISTED = 5
"""How many cells a summary line that counts them names below it (then `... and N more`), except with -v."""


def listed(entries: Sequence[str], verbosity: int) -> list[str]:
    """One indented line per entry; below -v, the first LISTED of them and how many more there are."""
    shown = list(entries) if verbosity > 0 or len(entries) <= LISTED else list(entries[:LISTED])
    more = len(entries) - len(shown)
    return [f"  {entry}" for entry in shown] + ([f"  ... and {more} more (-v names every one)"] if more else [])


def inconclusive_reason(cell: Cell) -> str:
    """Why an inconclusive cell is not regressed: each inconclusive metric's change, grouped by what kept it from
    being a regression (no statistical evidence, a re-measure that did not regress, disturbed conditions, a metric
    this run did not measure or could not compare)."""
    again = {c.metric: c for c in cell.confirmation or ()}
    causes: dict[str, list[str]] = {}
    for check in cell.checks:
        if check.verdict is Verdict.INCONCLUSIVE:
            what, cause = _metric_reason(check, cell, again.get(check.metric))
            causes.setdefault(cause, []).append(what)
    return "; ".join(f"{', '.join(whats)}: {cause}" for cause, whats in causes.items()) or "no metric was judged"


def _metric_reason(check: MetricCheck, cell: Cell, again: MetricCheck | None) -> tuple[str, str]:
    """(the metric and its change, why that change is not a regression)."""
    if check.measured is None or check.change is None:  # a metric not measured, or without a relative change
        note = check.note or f"{check.metric}: not measured in this run"
        return check.metric, note.removeprefix(f"{check.metric}: ")
    change = f"{check.metric} {format_change(check.change)} (allowed {format_allowed(check)}"
    if check.note is not None and (check.p_value is None or check.metric == EFFICIENCY):
        return f"{change})", check.note.removeprefix(f"{check.metric}: ")  # no test possible, or not comparable
    if cell.disturbed is not None and cell.confirmation is None:  # a recording refused: never re-measured
        return f"{change})", f"measured under disturbed conditions: {cell.disturbed}"
    held = again is not None and again.verdict is Verdict.REGRESSED  # else the re-measure demoted it (judge.py)
    if cell.disturbed is not None and held:
        return f"{change})", f"regressed again when re-measured, but under disturbed conditions: {cell.disturbed}"
    if cell.confirmation is not None and not held:
        why = f"the regression did not hold when re-measured on {cell.confirmed_on}"
        if again is not None and again.note is not None and again.verdict is Verdict.INCONCLUSIVE:
            why = again.note.removeprefix(f"{check.metric}: ")  # worse again, not established across the boots
        return f"{change}, re-measured {format_change(None if again is None else again.change)})", why
    return f"{change}, p {format_p(check)})", "worse beyond the tolerance, but not statistically established"
