"""The plugin's own report lines are wrapped at one width (tables aside): what both the server and the gate
reports use."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

WIDTH = 120


def wrap_lines(lines: Sequence[str], width: int = WIDTH) -> list[str]:
    """Each line wrapped at `width`; a continuation is indented two spaces deeper than its line."""
    wrapped: list[str] = []
    for line in lines:
        indent = " " * (len(line) - len(line.lstrip(" ")) + 2)
        wrapped.extend(textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False,
                                     break_long_words=False) or [line])
    return wrapped
