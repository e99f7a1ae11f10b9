"""The report's per-variant section: a table of test x metric (baseline, measured, change, band, verdict) from the
results document's cells, the rows that need a reader first and the quiet ones in a collapsed block, then each
cell's notes (why its baseline is not comparable, the re-measure of a regression, samples that missed a metric).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_sglang_perf.gate.formats import format_change, format_value
from pytest_sglang_perf.measurement.metrics import METRICS, Direction
from pytest_sglang_perf.outputs.markdown_text import bullets, code, details, table, text

HEADER = ("test", "metric", "baseline", "measured", "change", "band", "verdict")
ALIGN = "llrrrrl"
_DASH = "-"
_QUIET = ("ok",)
"""Metric verdicts whose rows go into the collapsed block (an updated cell's too, when its metric was ok)."""
_WITH_P = ("regressed", "inconclusive", "improved")
"""Metric verdicts whose p-value is shown next to them."""

Row = tuple[str, ...]


def variant_section(variant: str, cells: Sequence[Mapping[str, Any]], *, simulated: bool) -> list[str]:
    """`### variant` (SIMULATED when so), the rows to read first, the quiet rows collapsed, the cells' notes."""
    tag = " (SIMULATED)" if simulated else ""
    reused = next((str(cell["reused"]) for cell in cells if cell.get("reused")), None)
    lines = [f"### Variant {code(variant)}{tag}{' (reused server)' if reused else ''}", ""]
    if reused:
        lines.extend([f"Measured on a server an earlier run booted and kept (`--sglang-reuse`): {reused}; no boot "
                      "metrics.", ""])
    loud: list[Row] = []
    quiet: list[Row] = []
    for cell in cells:
        cell_loud, cell_quiet = _cell_rows(cell)
        loud.extend(_name_first(cell, cell_loud))
        quiet.extend(_name_first(cell, cell_quiet))
    if loud:
        lines.extend([*table(HEADER, loud, ALIGN), ""])
    if quiet:
        summary = _quiet_summary(cells, len(quiet), everything=not loud)
        lines.extend([*details(summary, table(HEADER, quiet, ALIGN)), ""])
    notes = [note for cell in cells for note in cell_notes(cell)]
    if notes:
        lines.extend([*bullets(notes), ""])
    return lines[:-1] if lines[-1] == "" else lines


def _quiet_summary(cells: Sequence[Mapping[str, Any]], rows: int, *, everything: bool) -> str:
    noun = "metric" if rows == 1 else "metrics"
    if everything:
        verdicts = sorted({str(c.get("verdict")) for c in cells})
        cell_noun = "cell" if len(cells) == 1 else "cells"
        return f"{len(cells)} {cell_noun} {', '.join(verdicts)} ({rows} {noun})"
    return f"{rows} more {noun}, each ok"


def _name_first(cell: Mapping[str, Any], rows: Sequence[Row]) -> list[Row]:
    """The rows of one cell in one table: only the first names the test, so a cell reads as a group."""
    name = code(cell.get("test_id", "?"), in_table=True)
    return [(name if i == 0 else "", *row[1:]) for i, row in enumerate(rows)]


def _cell_rows(cell: Mapping[str, Any]) -> tuple[list[Row], list[Row]]:
    """(rows to read first, quiet rows) of one cell; a cell without metrics is one row that says so."""
    metrics: Mapping[str, Any] = cell.get("metrics") or {}
    if not metrics:
        return [("", text("(no metrics)"), _DASH, _DASH, _DASH, _DASH, verdict_text(cell, None, None))], []
    loud: list[Row] = []
    quiet: list[Row] = []
    for name, check in ordered(metrics):
        row = ("", code(name, in_table=True), _value(name, check.get("baseline")), _value(name, check.get("measured")),
               _change(check.get("change")), band(name, check), verdict_text(cell, name, check))
        (quiet if _is_quiet(cell, check) else loud).append(row)
    return loud, quiet


def ordered(metrics: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The metrics in the plugin's order (throughput, latencies, boot costs); a results file sorts its keys."""
    known = list(METRICS)
    return sorted(metrics.items(), key=lambda item: known.index(item[0]) if item[0] in known else len(known))


def _is_quiet(cell: Mapping[str, Any], check: Mapping[str, Any]) -> bool:
    stale = bool(cell.get("stale")) and not cell.get("updated")
    return not stale and check.get("verdict") in _QUIET


def _value(name: str, value: Any) -> str:
    return _DASH if not isinstance(value, int | float) else text(format_value(name, float(value)))


def _change(change: Any) -> str:
    return _DASH if not isinstance(change, int | float) else format_change(float(change))


def band(name: str, check: Mapping[str, Any]) -> str:
    """The change allowed in the worse direction, signed (`-5.0%` for throughput, `+10.0%` for a latency), and the
    smallest change the samples detect (`detects 2.1%`; flagged when it is wider than the band)."""
    allowed = check.get("allowed")
    if not isinstance(allowed, int | float):
        return _DASH
    spec = METRICS.get(name)
    sign = "-" if spec is not None and spec.direction is Direction.HIGHER_IS_BETTER else "+"
    shown = f"{sign}{allowed * 100:.1f}%"
    detectable = check.get("detectable")
    if isinstance(detectable, int | float):
        weak = " ⚠" if detectable > allowed else ""
        shown += f" (detects {detectable * 100:.1f}%{weak})"
    return shown


def verdict_text(cell: Mapping[str, Any], name: str | None, check: Mapping[str, Any] | None) -> str:
    """A metric's verdict as the row shows it: REGRESSED in bold, a p-value next to a change the test judged,
    `updated (was regressed)` in a recording run, `stale` for every metric of a stale cell."""
    verdict = str((check or {}).get("verdict") or cell.get("verdict") or "?")
    if cell.get("updated"):
        was = "stale" if cell.get("stale") else verdict
        return "updated" if was in ("ok", "updated") else f"updated (was {was})"
    if cell.get("stale"):
        return "stale"
    shown = "**REGRESSED**" if verdict == "regressed" else verdict
    p_value = (check or {}).get("p_value")
    if verdict in _WITH_P and isinstance(p_value, int | float):
        shown += " (p<0.001)" if p_value < 0.001 else f" (p={p_value:.3f})"
    floor = _under_floor(name, check) if verdict == "ok" else None
    return shown if floor is None else f"{shown} (under the {text(floor)} floor)"


def _under_floor(name: str | None, check: Mapping[str, Any] | None) -> str | None:
    """The metric's absolute floor, when an ok metric changed beyond its band by less than it (timer noise)."""
    spec = METRICS.get(str(name))
    raw = [(check or {}).get(key) for key in ("baseline", "measured", "allowed")]
    values = [float(v) for v in raw if isinstance(v, int | float)]
    if spec is None or not spec.abs_floor or len(values) != len(raw):
        return None
    old, new, allowed = values
    if not old or spec.worse((new - old) / abs(old)) <= allowed or abs(new - old) > spec.abs_floor:
        return None
    return format_value(spec.name, spec.abs_floor)


def cell_notes(cell: Mapping[str, Any]) -> list[str]:
    """Bullet items about one cell: why its baseline is not comparable, how its re-measure went, which metrics
    some samples could not define."""
    name = f"{code(cell.get('test_id', '?'))}"
    notes = []
    stale = cell.get("stale") or []
    if stale:
        notes.append(f"{name}: the baseline is not comparable (recorded for something else): "
                     f"{text('; '.join(map(str, stale)))}")
    confirmation = cell.get("confirmation")
    if isinstance(confirmation, Mapping):
        notes.append(f"{name}: {_confirmation(cell, confirmation)}")
    metric_notes = [str(check["note"]) for check in (cell.get("metrics") or {}).values() if check.get("note")]
    if metric_notes:
        notes.append(f"{name}: samples that define each metric: {text('; '.join(metric_notes))}")
    return notes


def _confirmation(cell: Mapping[str, Any], confirmation: Mapping[str, Any]) -> str:
    """`regression confirmed: re-measured on the same server: output_throughput -8.1% (regressed)`."""
    again: Mapping[str, Any] = confirmation.get("metrics") or {}
    changes = ", ".join(f"{code(name)} {_change(check.get('change'))} ({check.get('verdict')})"
                        for name, check in ordered(again)
                        if (cell.get("metrics") or {}).get(name, {}).get("verdict") in ("regressed", "inconclusive"))
    where = "a fresh boot" if confirmation.get("on") == "fresh-boot" else "the same server"
    if cell.get("verdict") == "regressed":
        head = f"regression confirmed: re-measured on {where}, it regressed again"
    else:
        head = f"the regression did not hold when re-measured on {where}"
    return f"{head}: {changes}" if changes else head
