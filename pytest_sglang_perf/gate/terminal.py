"""Text reports: the small table a failing test shows, and the session's terminal summary.

Every table of simulated numbers says SIMULATED, so nobody mistakes a dry run for a measurement.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_sglang_perf.gate.compare import Cell, MetricCheck, Verdict
from pytest_sglang_perf.measurement.metrics import METRICS, Direction

SIMULATED = "SIMULATED"
_COUNT_ORDER = (Verdict.OK, Verdict.REGRESSED, Verdict.IMPROVED, Verdict.NEW, Verdict.UPDATED)
_NEEDS_REFRESH = (Verdict.REGRESSED, Verdict.NEW, Verdict.IMPROVED)


def format_value(metric: str, value: float) -> str:
    """A value in its metric's unit: `52.31 tok/s`, `120.4 ms` (below 1 s), `2.50 s`, `3.00 tok/step`."""
    unit = METRICS[metric].unit if metric in METRICS else ""
    if unit == "s":
        return _seconds(value)
    if unit == "tok/s":
        return f"{value:.1f} tok/s" if abs(value) >= 100 else f"{value:.2f} tok/s"
    if unit == "tok/step":
        return f"{value:.2f} tok/step"
    return f"{value:.4g} {unit}".rstrip()


def _seconds(value: float) -> str:
    if abs(value) >= 1:
        return f"{value:.2f} s"
    if abs(value) >= 0.01:
        return f"{value * 1000:.1f} ms"
    return f"{value * 1000:.2f} ms"


def format_change(change: float | None) -> str:
    return "n/a" if change is None else f"{change * 100:+.1f}%"


def format_allowed(check: MetricCheck) -> str:
    """The band in the worse direction, signed: `-5.0%` for throughput, `+10.0%` for latency."""
    spec = METRICS.get(check.metric)
    sign = "-" if spec is not None and spec.direction is Direction.HIGHER_IS_BETTER else "+"
    return f"{sign}{check.allowed * 100:.1f}%"


def _verdict_text(check: MetricCheck, cell: Cell) -> str:
    text = check.verdict.value.upper() if check.verdict is Verdict.REGRESSED else check.verdict.value
    if cell.updated and check.verdict not in (Verdict.OK, Verdict.UPDATED):
        return f"updated (was {text})"
    return "updated" if cell.updated else text


def _baseline_text(check: MetricCheck) -> str:
    return "-" if check.baseline is None else format_value(check.metric, check.baseline)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> list[str]:
    """Indented columns, each left- ("l") or right-aligned ("r") as `align` says."""
    lines = [header, *rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]

    def cell(i: int, text: str) -> str:
        return text.ljust(widths[i]) if align[i] == "l" else text.rjust(widths[i])

    return [("  " + "  ".join(cell(i, t) for i, t in enumerate(line))).rstrip() for line in lines]


def _simulated_tag(simulated: bool) -> str:
    return f" ({SIMULATED})" if simulated else ""


def failure_message(cell: Cell, refresh_command: str, context: Sequence[str] = ()) -> str:
    """What a failing test shows: metric | baseline | measured | change | allowed | verdict, what the server
    ran (`context`), then the fix."""
    header = ("metric", "baseline", "measured", "change", "allowed", "verdict")
    rows = [
        (c.metric, _baseline_text(c), format_value(c.metric, c.measured), format_change(c.change),
         format_allowed(c), _verdict_text(c, cell))
        for c in cell.checks
    ]
    title = f"sglang-perf: {cell.test_id} [{cell.variant}]: {cell.verdict.value}"
    return "\n".join([
        title + _simulated_tag(cell.simulated),
        *_table(header, rows, align="lrrrrl"),
        *context,
        "To record the measured values as the new baseline, re-run with:",
        f"  {refresh_command}",
    ])


def summary_lines(cells: Sequence[Cell], refresh_flag: str = "--sglang-update-baselines") -> list[str]:
    """The terminal summary: one table per variant (test x metric), a count line and the refresh hint.

    No cells, no lines.
    """
    if not cells:
        return []
    lines: list[str] = []
    for variant in dict.fromkeys(c.variant for c in cells):
        lines.extend(_variant_table(variant, [c for c in cells if c.variant == variant]))
    lines.append(_count_line(cells))
    lines.extend(_refresh_hint(cells, refresh_flag))
    return lines


def _variant_table(variant: str, cells: Sequence[Cell]) -> list[str]:
    header = ("test", "metric", "baseline", "measured", "change", "verdict")
    rows: list[tuple[str, ...]] = []
    for cell in cells:
        rows.extend(_cell_rows(cell))
    title = f"variant {variant}{_simulated_tag(any(c.simulated for c in cells))}"
    return [title, *_table(header, rows, align="llrrrl")]


def _cell_rows(cell: Cell) -> list[tuple[str, ...]]:
    if not cell.checks:
        return [(cell.test_id, "(no metrics)", "-", "-", "-", cell.verdict.value)]
    return [
        (cell.test_id if i == 0 else "", c.metric, _baseline_text(c), format_value(c.metric, c.measured),
         format_change(c.change), _verdict_text(c, cell))
        for i, c in enumerate(cell.checks)
    ]


def _count_line(cells: Sequence[Cell]) -> str:
    verdicts = [c.verdict for c in cells]
    counts = ", ".join(f"{verdicts.count(v)} {v.value}" for v in _COUNT_ORDER)
    noun = "cell" if len(cells) == 1 else "cells"
    return f"sglang-perf: {len(cells)} {noun}: {counts}{_simulated_tag(any(c.simulated for c in cells))}"


def _refresh_hint(cells: Sequence[Cell], refresh_flag: str) -> list[str]:
    pending = [c.verdict for c in cells if c.verdict in _NEEDS_REFRESH]
    if not pending:
        return []
    what = ", ".join(f"{pending.count(v)} {v.value}" for v in _NEEDS_REFRESH if v in pending)
    return [f"re-run with {refresh_flag} to record the measured values as the new baselines ({what})"]
