"""Text reports: the small table a failing test shows, and the session's terminal summary.

Every table of simulated numbers says SIMULATED, so nobody mistakes a dry run for a measurement.
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_sglang_perf.gate.compare import Cell, MetricCheck, Verdict
from pytest_sglang_perf.measurement.metrics import METRICS, Direction

SIMULATED = "SIMULATED"
_COUNT_ORDER = (Verdict.OK, Verdict.REGRESSED, Verdict.INCONCLUSIVE, Verdict.IMPROVED, Verdict.NEW, Verdict.STALE,
                Verdict.UPDATED)
_NEEDS_REFRESH = (Verdict.REGRESSED, Verdict.STALE, Verdict.NEW, Verdict.IMPROVED)


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


def format_p(check: MetricCheck) -> str:
    """The one-sided p-value of the worse direction; `-` when no test was possible."""
    if check.p_value is None:
        return "-"
    return "<0.001" if check.p_value < 0.001 else f"{check.p_value:.3f}"


def format_detectable(check: MetricCheck) -> str:
    return "-" if check.detectable is None else f"{check.detectable * 100:.1f}%"


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
    """What a failing test shows: metric | baseline | measured | change | allowed | p | detectable | verdict (and
    the re-measure's change), why the baseline is not comparable, what the server ran (`context`), then the fix."""
    again = {c.metric: c for c in cell.confirmation or ()}
    header: tuple[str, ...] = ("metric", "baseline", "measured", "change", "allowed", "p", "detectable", "verdict")
    if again:
        header = (*header[:4], "re-measured", *header[4:])
    rows = []
    for c in cell.checks:
        row = [c.metric, _baseline_text(c), format_value(c.metric, c.measured), format_change(c.change),
               format_allowed(c), format_p(c), format_detectable(c), _verdict_text(c, cell)]
        if again:
            second = again.get(c.metric)
            row.insert(4, "-" if second is None else format_change(second.change))
        rows.append(tuple(row))
    title = f"sglang-perf: {cell.test_id} [{cell.variant}]: {_cell_title(cell)}"
    return "\n".join([
        title + _simulated_tag(cell.simulated),
        *_table(header, rows, align="lrrrrrrrl"[: len(header) - 1] + "l"),
        *_stale_lines(cell),
        *context,
        "To record the measured values as the new baseline, re-run with:",
        f"  {refresh_command}",
    ])


def _cell_title(cell: Cell) -> str:
    verdict = cell.verdict
    if verdict is Verdict.REGRESSED and cell.confirmation is not None:
        return "regressed (confirmed: re-measured on the same server, it regressed again)"
    if verdict is Verdict.INCONCLUSIVE and cell.confirmation is not None:
        return "inconclusive (the regression did not hold when re-measured on the same server)"
    if verdict is Verdict.INCONCLUSIVE:
        return "inconclusive (worse beyond the tolerance, but not statistically established)"
    if verdict is Verdict.NEW:
        return "new (no baseline recorded for this cell)"
    return str(verdict.value)


def _stale_lines(cell: Cell) -> list[str]:
    if not cell.stale:
        return []
    return ["the baseline is not comparable (recorded for something else): " + "; ".join(cell.stale)]


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
    lines.extend(_underpowered(cells))
    lines.extend(_not_gated(cells))
    lines.extend(_refresh_hint(cells, refresh_flag))
    return lines


def _variant_table(variant: str, cells: Sequence[Cell]) -> list[str]:
    header = ("test", "metric", "baseline", "measured", "change", "p", "detectable", "verdict")
    rows: list[tuple[str, ...]] = []
    for cell in cells:
        rows.extend(_cell_rows(cell))
    title = f"variant {variant}{_simulated_tag(any(c.simulated for c in cells))}"
    lines = [title, *_table(header, rows, align="llrrrrrl")]
    for cell in cells:
        lines.extend(f"  {cell.test_id}: {line}" for line in _stale_lines(cell))
    return lines


def _cell_rows(cell: Cell) -> list[tuple[str, ...]]:
    if not cell.checks:
        return [(cell.test_id, "(no metrics)", "-", "-", "-", "-", "-", cell.verdict.value)]
    return [
        (cell.test_id if i == 0 else "", c.metric, _baseline_text(c), format_value(c.metric, c.measured),
         format_change(c.change), format_p(c), format_detectable(c),
         "stale" if cell.stale and not cell.updated else _verdict_text(c, cell))
        for i, c in enumerate(cell.checks)
    ]


def _underpowered(cells: Sequence[Cell]) -> list[str]:
    """A warning per cell with metrics whose samples cannot detect a change as small as their tolerance."""
    lines = []
    for cell in cells:
        weak = [c for c in cell.checks if c.underpowered and c.detectable is not None]
        if weak:
            what = ", ".join(f"{c.metric} >= {c.detectable * 100:.1f}% (tolerance {c.allowed * 100:.1f}%)"
                             for c in weak if c.detectable is not None)
            lines.append(f"warning: {cell.test_id} [{cell.variant}]: {weak[0].n} requests detect only changes of "
                         f'{what}; measure more (request.repeats, or repeats = "auto")')
    return lines


def _not_gated(cells: Sequence[Cell]) -> list[str]:
    """The cells that passed without a verdict the gate can stand on: say so, loudly."""
    lines = []
    verdicts = [c.verdict for c in cells]
    if Verdict.INCONCLUSIVE in verdicts:
        lines.append(f"sglang-perf: {verdicts.count(Verdict.INCONCLUSIVE)} inconclusive cell(s) passed (worse beyond "
                     "the tolerance, not established); --sglang-fail-inconclusive fails them")
    unbased = [v for v in verdicts if v in (Verdict.NEW, Verdict.STALE)]
    if unbased:
        what = ", ".join(f"{unbased.count(v)} {v.value}" for v in (Verdict.NEW, Verdict.STALE) if v in unbased)
        lines.append(f"sglang-perf: {len(unbased)} cell(s) NOT GATED, no comparable baseline ({what}); "
                     "--sglang-require-baselines fails them")
    return lines


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
