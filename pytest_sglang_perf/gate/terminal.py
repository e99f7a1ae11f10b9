"""Text reports: the small table a failing test shows, and the session's terminal summary.

Every table of simulated numbers says SIMULATED, so nobody mistakes a dry run for a measurement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_sglang_perf.gate.cell_ids import collected_test
from pytest_sglang_perf.gate.compare import Cell, MetricCheck, Verdict
from pytest_sglang_perf.gate.errored import ErroredVariant
from pytest_sglang_perf.gate.formats import format_allowed, format_change, format_detectable, format_p, format_value
from pytest_sglang_perf.gate.reasons import inconclusive_reason, listed
from pytest_sglang_perf.wrapping import wrap_lines as wrap_all

SIMULATED = "SIMULATED"
_GLUE = "\xa0"
"""Joins the words of a change that wrapping must keep whole (textwrap never breaks at it)."""
_WHOLE = 60
"""A change up to this long stays on one line."""
_NOTABLE = (Verdict.REGRESSED, Verdict.INCONCLUSIVE, Verdict.IMPROVED)
"""The metric verdicts a default-verbosity table always shows (the other rows are counted, -v shows them)."""
_COUNT_ORDER = (Verdict.OK, Verdict.REGRESSED, Verdict.INCONCLUSIVE, Verdict.IMPROVED, Verdict.NEW, Verdict.STALE,
                Verdict.UPDATED)
_NEEDS_REFRESH = (Verdict.REGRESSED, Verdict.STALE, Verdict.NEW, Verdict.IMPROVED)


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


def _reused_tag(cells: Sequence[Cell]) -> str:
    """Said of cells measured on a kept server an earlier run booted (--sglang-reuse): not a fresh boot."""
    return " (on a reused server)" if any(cell.reused for cell in cells) else ""


def failure_message(cell: Cell, refresh_command: str, context: Sequence[str] = ()) -> str:
    """What a failing test shows: metric | baseline | measured | change | allowed | p | detectable | verdict (and
    the re-measure's change), why the baseline is not comparable, what the server ran (`context`), then the fix."""
    again = {c.metric: c for c in cell.confirmation or ()}
    header: tuple[str, ...] = ("metric", "baseline", "measured", "change", "allowed", "p", "detectable", "verdict")
    if again:
        header = (*header[:4], "re-measured", *header[4:])
    rows = []
    for c in cell.checks:
        row = [c.metric, _baseline_text(c), _measured_text(c), format_change(c.change),
               format_allowed(c), format_p(c), format_detectable(c), _verdict_text(c, cell)]
        if again:
            second = again.get(c.metric)
            row.insert(4, "-" if second is None else format_change(second.change))
        rows.append(tuple(row))
    title = f"sglang-perf: {cell.test_id} [{cell.variant}]: {_cell_title(cell)}"
    return "\n".join([
        headline(cell),
        title + _simulated_tag(cell.simulated) + _reused_tag([cell]),
        *_table(header, rows, align="lrrrrrrrl"[: len(header) - 1] + "l"),
        *_stale_lines(cell),
        *wrap_all(_note_lines(cell)),
        *context,
        *_failure_fix(cell, refresh_command),
    ])


def headline(cell: Cell) -> str:
    """A failing cell's first line, which pytest's short test summary shows: what failed, and by how much
    (`[default] regressed: output_throughput -16.6% (allowed -5.0%)`)."""
    verdict = cell.verdict
    if verdict in (Verdict.REGRESSED, Verdict.INCONCLUSIVE):
        what = ", ".join(f"{c.metric} {format_change(c.change)} (allowed {format_allowed(c)})"
                         for c in cell.checks if c.verdict is verdict)
        return f"[{cell.variant}] {verdict.value}: {what}" + ("" if verdict is Verdict.REGRESSED else
                                                                ", not established")
    if verdict is Verdict.STALE:
        return f"[{cell.variant}] stale: the baseline was recorded for something else: {'; '.join(cell.stale)}"
    if verdict is Verdict.NEW:
        return f"[{cell.variant}] new: no baseline recorded for this cell"
    return f"[{cell.variant}] {verdict.value}"


def _failure_fix(cell: Cell, refresh_command: str) -> list[str]:
    """How to go on: investigate a regression that was not intended, or record the values of an intended one."""
    if cell.verdict not in (Verdict.REGRESSED, Verdict.INCONCLUSIVE):
        return ["To record the measured values as the baseline, re-run with:", f"  {refresh_command}"]
    return ["Not intended? Start with the server's log and findings above, and what it ran in the sglang-perf "
            "servers section.",
            "Intended? Record the measured values as the new baseline:", f"  {refresh_command}"]


def _cell_title(cell: Cell) -> str:
    verdict = cell.verdict
    if verdict is Verdict.REGRESSED and cell.confirmation is not None:
        return f"regressed (confirmed: re-measured on {cell.confirmed_on}, it regressed again)"
    if verdict is Verdict.INCONCLUSIVE and cell.disturbed is not None and cell.confirmation is None:
        return f"inconclusive (measured under disturbed conditions: {cell.disturbed})"
    if verdict is Verdict.INCONCLUSIVE and cell.disturbed is not None:
        return f"inconclusive (regressed, re-measured too, but under disturbed conditions: {cell.disturbed})"
    if verdict is Verdict.INCONCLUSIVE and cell.confirmation is not None:
        return f"inconclusive (the regression did not hold when re-measured on {cell.confirmed_on})"
    if verdict is Verdict.INCONCLUSIVE:
        return "inconclusive (worse beyond the tolerance, but not statistically established)"
    if verdict is Verdict.NEW:
        return "new (no baseline recorded for this cell)"
    return str(verdict.value)


def _measured_text(check: MetricCheck) -> str:
    return "-" if check.measured is None else format_value(check.metric, check.measured)


def _note_lines(cell: Cell) -> list[str]:
    """Metrics that some samples could not define, or that this run did not measure at all (never dropped)."""
    notes = [c.note for c in cell.checks if c.note]
    return [f"samples that define each metric: {'; '.join(notes)}"] if notes else []


def _stale_lines(cell: Cell, prefix: str = "") -> list[str]:
    """What makes the baseline not comparable, wrapped: a short change (`--tp-size 1 -> 2`) is never split."""
    if not cell.stale:
        return []
    changes = "; ".join(c.replace(" ", _GLUE) if len(c) <= _WHOLE else c for c in cell.stale)
    text = f"{prefix}the baseline is not comparable (recorded for something else): {changes}"
    return [line.replace(_GLUE, " ") for line in wrap_all([text])]


@dataclass(frozen=True)
class Pointers:
    """Where a reader investigates a regression, as the summary names them."""

    logs: str | None = None
    """The folder of this run's server logs."""
    results: str | None = None
    """This run's results file (--sglang-results), if one is written."""
    servers_shown: bool = True
    """Whether the summary has its sglang-perf servers section (not with -q)."""


_NO_POINTERS = Pointers()


def summary_lines(cells: Sequence[Cell], refresh_flag: str = "--sglang-update-baselines", *,
                  errored: Sequence[ErroredVariant] = (), verbosity: int = 0,
                  pointers: Pointers = _NO_POINTERS, baselines: Sequence[str] = ()) -> list[str]:
    """The terminal summary: a table per variant (test x metric), the counts, the variants that errored, then how
    to go on. With verbosity 0 a table shows each cell's first metric and the notable ones (regressed,
    inconclusive, improved) and counts the others; with 1 or more, every metric; below 0 (-q), no tables, so the
    lines that count the new, stale and errored cells name them (gate/reasons.py; inconclusive ones at every level).

    `baselines`: what the run did with the baseline files (gate/ledger.py), after the counts.
    No cells and no errored variant, no lines.
    """
    if not cells and not errored:
        return []
    lines: list[str] = []
    if verbosity >= 0:
        for variant in dict.fromkeys(c.variant for c in cells):
            lines.extend(_variant_table(variant, [c for c in cells if c.variant == variant], full=verbosity > 0))
    lines.append(_count_line(cells, errored))
    notes = [*baselines, *_errored_line(errored, verbosity), *_underpowered(cells, full=verbosity > 0),
             *_not_gated(cells, verbosity)]
    lines.extend(wrap_all(notes))
    lines.extend(wrap_all(_closing_hint(cells, refresh_flag, pointers)))
    return lines


def _variant_table(variant: str, cells: Sequence[Cell], *, full: bool) -> list[str]:
    title = f"variant {variant}{_simulated_tag(any(c.simulated for c in cells))}{_reused_tag(cells)}"
    if not full and all(_quietly_ok(cell) for cell in cells):
        metrics = sum(len(cell.checks) for cell in cells)
        noun = "cell" if len(cells) == 1 else "cells"
        return [f"{title}: {len(cells)} {noun} ok ({metrics} metrics; -v shows every metric)"]
    header = ("test", "metric", "baseline", "measured", "change", "p", "detectable", "verdict")
    rows: list[tuple[str, ...]] = []
    hidden: list[str] = []
    for cell in cells:
        for i, (row, check) in enumerate(_cell_rows(cell)):
            if full or i == 0 or _notable(check, cell):
                rows.append(row)  # a notable row follows its cell's first row, which names the test
            else:
                hidden.append(row[-1].split(" ")[0])
    lines = [title, *_table(header, rows, align="llrrrrrl")]
    for cell in cells:
        lines.extend(_stale_lines(cell, prefix=f"  {cell.test_id}: "))
        lines.extend(wrap_all([f"  {cell.test_id}: {line}" for line in _note_lines(cell)]))
    if hidden:
        counts = ", ".join(f"{hidden.count(v)} {v}" for v in dict.fromkeys(hidden))
        lines.append(f"  ({len(hidden)} more metric(s): {counts}; -v shows every metric)")
    return lines


def _quietly_ok(cell: Cell) -> bool:
    """A cell with nothing to read at the default verbosity: ok, every metric ok, no note."""
    return (bool(cell.checks) and cell.verdict is Verdict.OK and not _note_lines(cell)
            and all(c.verdict is Verdict.OK for c in cell.checks))


def _notable(check: MetricCheck | None, cell: Cell) -> bool:
    return check is not None and not cell.updated and not cell.stale and check.verdict in _NOTABLE


def _cell_rows(cell: Cell) -> list[tuple[tuple[str, ...], MetricCheck | None]]:
    """Each metric's row (the first one names the test), with its check."""
    if not cell.checks:
        return [((cell.test_id, "(no metrics)", "-", "-", "-", "-", "-", cell.verdict.value), None)]
    return [
        ((cell.test_id if i == 0 else "", c.metric, _baseline_text(c), _measured_text(c),
          format_change(c.change), format_p(c), format_detectable(c),
          "stale" if cell.stale and not cell.updated else _verdict_text(c, cell)), c)
        for i, c in enumerate(cell.checks)
    ]


def _underpowered(cells: Sequence[Cell], *, full: bool = True) -> list[str]:
    """A warning per cell with metrics whose samples cannot detect a change as small as their tolerance; not
    `full` (the default verbosity) and several such cells: one line that counts them (-v names each)."""
    lines = []
    for cell in cells:
        weak = [c for c in cell.checks if c.underpowered and c.detectable is not None]
        if weak:
            what = ", ".join(f"{c.metric} >= {c.detectable * 100:.1f}% (tolerance {c.allowed * 100:.1f}%)"
                             for c in weak if c.detectable is not None)
            unit = "rounds" if collected_test(cell.test_id) != cell.test_id else "requests"  # a concurrency level
            lines.append(f"warning: {cell.test_id} [{cell.variant}]: {weak[0].n} {unit} detect only changes of "
                         f'{what}; {_MEASURE_MORE}')
    if full or len(lines) < 2:
        return lines
    return [f"warning: {len(lines)} cells measure too few requests to detect a change as small as their tolerance "
            f"(-v names them); {_MEASURE_MORE}"]


_MEASURE_MORE = 'measure more (request.repeats, or repeats = "auto")'


def _not_gated(cells: Sequence[Cell], verbosity: int) -> list[str]:
    """The cells that passed without a verdict the gate can stand on: say so, loudly. Each inconclusive cell is named
    with why, at every verbosity (no table says it); each new or stale one with -q, where no table names it."""
    lines = []
    inconclusive = [c for c in cells if c.verdict is Verdict.INCONCLUSIVE]
    if inconclusive:
        lines.append(f"sglang-perf: {len(inconclusive)} inconclusive cell(s) passed (worse than allowed, not "
                     "established); --sglang-fail-inconclusive fails them")
        lines.extend(listed([f"{c.test_id} [{c.variant}] inconclusive: {inconclusive_reason(c)}"
                             for c in inconclusive], verbosity))
    unbased = [c for c in cells if c.verdict in (Verdict.NEW, Verdict.STALE)]
    if unbased:
        verdicts = [c.verdict for c in unbased]
        what = ", ".join(f"{verdicts.count(v)} {v.value}" for v in (Verdict.NEW, Verdict.STALE) if v in verdicts)
        lines.append(f"sglang-perf: {len(unbased)} cell(s) NOT GATED, no comparable baseline ({what}); "
                     "--sglang-require-baselines fails them")
        if verbosity < 0:
            lines.extend(listed([f"{c.test_id} {headline(c)}" for c in unbased], verbosity))
    return lines


def _count_line(cells: Sequence[Cell], errored: Sequence[ErroredVariant]) -> str:
    """`sglang-perf: 3 cells: 2 ok, ..., 0 updated, 1 errored`: each test of an errored variant is an errored cell."""
    verdicts = [c.verdict for c in cells]
    failed = sum(len(e.tests) for e in errored)
    counts = ", ".join(f"{verdicts.count(v)} {v.value}" for v in _COUNT_ORDER)
    total = len(cells) + failed
    noun = "cell" if total == 1 else "cells"
    return f"sglang-perf: {total} {noun}: {counts}, {failed} errored{_simulated_tag(any(c.simulated for c in cells))}"


def _errored_line(errored: Sequence[ErroredVariant], verbosity: int) -> list[str]:
    """The variants whose tests errored; with -q (no servers section, no tables) each errored cell below, with the
    first line of the error."""
    if not errored:
        return []
    line = f"sglang-perf: ERRORED, nothing measured: {', '.join(e.describe() for e in errored)}"
    if verbosity >= 0:
        return [line]
    return [line, *listed([f"{test} errored: {e.first_line()}" for e in errored for test in e.tests], verbosity)]


def _closing_hint(cells: Sequence[Cell], refresh_flag: str, pointers: Pointers) -> list[str]:
    """How to go on: investigate a regression that was not intended or record an intended one; record the values
    of new, stale and improved cells."""
    verdicts = [c.verdict for c in cells]
    lines = _regressed_hint(verdicts.count(Verdict.REGRESSED), refresh_flag, pointers)
    pending = [v for v in verdicts if v in _NEEDS_REFRESH and v is not Verdict.REGRESSED]
    if pending:
        what = ", ".join(f"{pending.count(v)} {v.value}" for v in _NEEDS_REFRESH if v in pending)
        lines.append(f"sglang-perf: to record these values as the new baselines ({what}), re-run with {refresh_flag}")
    return lines


def _regressed_hint(regressed: int, refresh_flag: str, pointers: Pointers) -> list[str]:
    if not regressed:
        return []
    noun = "cell" if regressed == 1 else "cells"
    logs = f"{pointers.logs} (a <variant>.log per variant)" if pointers.logs else "named in each failure report"
    ran = ("each variant's effective configuration, in the sglang-perf servers section above"
           if pointers.servers_shown else "each variant's effective configuration: the sglang-perf servers section "
           "(without -q)")
    samples = pointers.results or "re-run with --sglang-results FILE"
    return [
        f"sglang-perf: {regressed} regressed {noun}. Not intended? Investigate:",
        f"  server logs:   {logs}",
        f"  what ran:      {ran}",
        f"  every sample:  {samples}; compare two runs: sglang-perf compare before.json after.json",
        f"Intended? Record the new values: the command at the end of each failure, or re-run with {refresh_flag}",
    ]
