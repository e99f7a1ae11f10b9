"""Markdown building blocks for the report: escaped text, code spans, tables, collapsible blocks, fenced blocks.

What GitHub renders (GitHub Flavored Markdown) decides the escaping: a `|` ends a table cell even inside a code
span unless it is written `\\|`; `*`, `_`, `~` and backticks may start emphasis, strikethrough or code; a `<` before
a letter may start an HTML tag that GitHub then hides. Text from a results file (test ids, reasons, notes) goes
through `text()` or `code()`, never into the Markdown as is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_SPECIAL = re.compile(r"([\\`*_~\[\]|])")
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_BACKTICKS = re.compile(r"`+")


def _one_line(value: object) -> str:
    return " ".join(str(value).split())


def text(value: object) -> str:
    """Plain text on one line, with every character Markdown could take for markup escaped."""
    return _TAG_START.sub(r"\\<", _SPECIAL.sub(r"\\\1", _one_line(value)))


def code(value: object, *, in_table: bool = False) -> str:
    """A code span (test ids, variant names, commands), on one line; `in_table`: its `|` escaped (GitHub reads
    `\\|` as `|` in a table cell, but as a backslash and a bar elsewhere)."""
    body = _one_line(value)
    if in_table:
        body = body.replace("|", "\\|")
    runs = [len(run) for run in _BACKTICKS.findall(body)]
    fence = "`" * (max(runs) + 1 if runs else 1)
    pad = " " if runs or body.startswith(" ") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def number(value: object, digits: int = 1) -> str:
    """A number with `digits` decimals; `-` for anything that is not one (a field missing from the results file)."""
    return f"{value:.{digits}f}" if isinstance(value, int | float) and not isinstance(value, bool) else "-"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], align: str) -> list[str]:
    """A GitHub table; `align` has one letter per column: `l` left, `r` right. Cells are Markdown already (made
    with text() and code()), so only line breaks are removed here."""
    rule = {"l": "---", "r": "---:"}
    lines = [_row(header), "| " + " | ".join(rule[a] for a in align) + " |"]
    lines.extend(_row(row) for row in rows)
    return lines


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(" ".join(cell.split()) or " " for cell in cells) + " |"


def details(summary: str, body: Sequence[str]) -> list[str]:
    """A collapsed block: `summary` (Markdown) shows, `body` opens on a click. The blank lines around the body
    are what makes GitHub render the Markdown inside it."""
    return ["<details>", f"<summary>{summary}</summary>", "", *body, "", "</details>"]


def fenced(body: str) -> list[str]:
    """A fenced code block that keeps `body`'s lines as they are (its fence is longer than any backtick run)."""
    runs = [len(run) for run in _BACKTICKS.findall(body)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return [fence, *body.rstrip("\n").splitlines(), fence]


def bullets(items: Sequence[str], indent: int = 0) -> list[str]:
    """A bullet list of Markdown items."""
    return [" " * indent + f"- {item}" for item in items]
