"""The Markdown report's bandwidth-ceiling section: each decode cell of the results document against the
memory-bandwidth ceiling (the cells' `roofline` records, roofline/ceiling.py), in a table, with each diagnosis."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pytest_sglang_perf.outputs.markdown_text import code, number, table, text

GB = 1e9


def roofline_section(cells: Sequence[Mapping[str, Any]], *, simulated: bool) -> list[str]:
    """`## Bandwidth ceiling` with a row per decode cell and the reasons of cells without one; empty when no cell
    decoded."""
    found = [(cell, cell["roofline"]) for cell in cells if isinstance(cell.get("roofline"), Mapping)]
    if not found:
        return []
    label = " (SIMULATED GPU)" if simulated else ""
    rows = [_row(cell, record) for cell, record in found if "unavailable" not in record]
    lines = [f"## Bandwidth ceiling{label}", "",
             "Decode at batch 1 against the bytes each step must read over the GPU's read bandwidth."]
    if rows:
        header = ("test", "variant", "measured", "ceiling", "efficiency", "bandwidth", "per step", "diagnosis")
        lines += ["", *table(header, rows, "llrrrrrl")]
    missing = {(str(cell.get("variant")), str(record["unavailable"])) for cell, record in found
               if "unavailable" in record}
    lines += ["", *(f"- {code(variant)}: {text(why)}" for variant, why in sorted(missing))] if missing else []
    notes = sorted({(str(cell.get("variant")), str(note)) for cell, record in found
                    for note in record.get("notes") or ()})
    lines += ["", *(f"- {code(variant)}: note: {text(note)}" for variant, note in notes)] if notes else []
    return lines


def _row(cell: Mapping[str, Any], record: Mapping[str, Any]) -> list[str]:
    bandwidth = record.get("bandwidth") or {}
    step = record.get("step_bytes") or {}
    how = "exact" if record.get("bytes_exact") else "estimated"
    return [code(cell.get("test_id"), in_table=True), code(cell.get("variant"), in_table=True),
            f"{number(record.get('measured_tok_s'))} tok/s", f"{number(record.get('ceiling_tok_s'))} tok/s",
            _percent(record.get("efficiency")),
            text(f"{number(bandwidth.get('gb_s'), 0)} GB/s {bandwidth.get('source', '?')}"),
            text(f"{number(_total(step) / GB, 2)} GB ({how})"), text(_after_colon(record.get("diagnosis")))]


def _total(step: Mapping[str, Any]) -> float:
    return sum(float(step.get(part) or 0.0) for part in ("target", "draft", "kv"))


def _after_colon(diagnosis: object) -> str:
    """The diagnosis without its head (the efficiency has its own column)."""
    words = str(diagnosis or "")
    return words.split(": ", 1)[1] if ": " in words else ""



def _percent(value: object) -> str:
    return f"{value:.0%}" if isinstance(value, int | float) else "-"
