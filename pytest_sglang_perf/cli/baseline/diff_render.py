"""The baseline diff (diff.py) as text: aligned columns for a terminal (at most 120 wide), or Markdown tables that
GitHub renders (for a pull request comment or a job summary)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pytest_sglang_perf.cli.baseline.diff import (
    ADDED,
    CHANGED,
    REMOVED,
    UNCHANGED,
    CellChange,
    FileChange,
    MetricChange,
)
from pytest_sglang_perf.cli.baseline.project import plural
from pytest_sglang_perf.gate.compare import Verdict, relative_change
from pytest_sglang_perf.gate.formats import format_allowed, format_change, format_value
from pytest_sglang_perf.outputs.markdown_text import code, text
from pytest_sglang_perf.wrapping import wrap_lines

_HEADER = ("metric", "old", "new", "change", "band", "verdict")
_WIDTHS = (21, 14, 14, 8, 7)
_VERDICT_TEXT = {Verdict.OK: "within band", Verdict.REGRESSED: "REGRESSED", Verdict.INCONCLUSIVE: "inconclusive",
                 Verdict.IMPROVED: "improved"}


def counts_text(files: Sequence[FileChange]) -> str:
    """`2 cells changed, 1 added, 0 removed, 6 unchanged`."""
    cells = [c for f in files for c in f.cells]
    count = {status: sum(c.status == status for c in cells) for status in (CHANGED, ADDED, REMOVED, UNCHANGED)}
    return (f"{plural(count[CHANGED], 'cell')} changed, {count[ADDED]} added, {count[REMOVED]} removed, "
            f"{count[UNCHANGED]} unchanged")


def terminal_lines(files: Sequence[FileChange], old_label: str, new_label: str) -> list[str]:
    lines = [f"baseline diff: {old_label} (old) -> {new_label} (new)"]
    for change in files:
        lines.append("")
        lines.append(f"{change.name} ({_file_status(change)}): {counts_text([change])}")
        for cell in change.cells:
            lines.extend(_terminal_cell(cell))
    lines.append("")
    lines.append(f"sglang-perf baseline diff: {counts_text(files)}")
    return wrap_lines(lines)


def _file_status(change: FileChange) -> str:
    return {ADDED: "new file", REMOVED: "file removed"}.get(change.status, "in both")


def _terminal_cell(cell: CellChange) -> Iterator[str]:
    where = f"  {cell.test_id} [{cell.variant}]"
    if cell.status != CHANGED:
        if cell.status != UNCHANGED:
            yield f"{where}: {cell.status}"
        return
    yield where
    if cell.not_comparable:
        yield f"    not comparable (the gate would call it stale): {'; '.join(cell.not_comparable)}"
    yield _row(_HEADER)
    for metric in cell.metrics:
        yield _row(_metric_cells(metric))


def _row(cells: Sequence[str]) -> str:
    padded = [text.ljust(width) for text, width in zip(cells, _WIDTHS, strict=False)]
    return ("    " + "  ".join([*padded, *cells[len(_WIDTHS):]])).rstrip()


def _metric_cells(metric: MetricChange) -> tuple[str, str, str, str, str, str]:
    old = "-" if metric.old is None else format_value(metric.metric, metric.old)
    new = "-" if metric.new is None else format_value(metric.metric, metric.new)
    change = None if metric.old is None or metric.new is None else relative_change(metric.old, metric.new)
    band = "-" if metric.check is None else format_allowed(metric.check)
    return metric.metric, old, new, "-" if change is None else format_change(change), band, _verdict(metric)


def _verdict(metric: MetricChange) -> str:
    if metric.old is None:
        return "metric added"
    if metric.new is None:
        return "metric removed"
    if metric.check is None:
        return "not comparable"
    return _VERDICT_TEXT.get(metric.check.verdict, metric.check.verdict.value)


def markdown_lines(files: Sequence[FileChange], old_label: str, new_label: str) -> list[str]:
    """A heading, then per file a table of its changed, added and removed cells (unchanged ones are counted)."""
    lines = [f"## Baseline diff: `{old_label}` → `{new_label}`", "", f"{counts_text(files)}."]
    for change in files:
        lines += ["", f"### `{change.name}` ({_file_status(change)})", "", f"{counts_text([change])}."]
        shown = [c for c in change.cells if c.status != UNCHANGED]
        if not shown:
            continue
        lines += ["", "| test | variant | metric | old | new | change | band | verdict |",
                  "|---|---|---|---:|---:|---:|---:|---|"]
        notes = []
        for cell in shown:
            lines.extend(_markdown_rows(cell))
            if cell.not_comparable:
                notes.append(f"- {code(f'{cell.test_id} [{cell.variant}]')}: not comparable (the gate would call "
                             f"it stale): {text('; '.join(cell.not_comparable))}")
        if notes:
            lines += ["", *notes]
    return lines


def _markdown_rows(cell: CellChange) -> Iterator[str]:
    test, variant = code(cell.test_id, in_table=True), code(cell.variant, in_table=True)
    if cell.status != CHANGED:
        yield f"| {test} | {variant} | | | | | | {cell.status} |"
        return
    for row, metric in enumerate(cell.metrics):
        name, old, new, change, band, verdict = _metric_cells(metric)
        if verdict == "REGRESSED":
            verdict = "**REGRESSED**"
        if row:  # the cell's test and variant on its first row only
            test = variant = ""
        yield f"| {test} | {variant} | {name} | {old} | {new} | {change} | {band} | {verdict} |"

