"""A server's log file as the launcher reads it: one header line per launch attempt, the lines appended since
the last read, and the tail a terminal would show.

Plain Python (no pytest).
"""

from __future__ import annotations

import codecs
from collections import deque
from datetime import datetime
from pathlib import Path

ATTEMPT_HEADER = "# pytest-sglang-perf "
"""Starts the line the launcher writes to the log file before each launch attempt."""
TAIL_LINES = 30
TAIL_LINE_CHARS = 400
"""Longer log lines (SGLang's `server_args={...}` runs to ~15,000 characters) are clipped in a boot report's tail."""


def attempt_header(name: str, command_line: str) -> str:
    """The line written to the log file before a launch attempt: ATTEMPT_HEADER, a timestamp, the variant and
    its command."""
    stamp = datetime.now().isoformat(sep=" ", timespec="seconds")
    return f"{ATTEMPT_HEADER}[{stamp}] {name}: {command_line}\n"


def last_attempt(text: str) -> str:
    """The part of a server log written by the last launch attempt (from its header line on)."""
    start = text.rfind("\n" + ATTEMPT_HEADER)
    return text if start < 0 else text[start + 1:]


def screen_line(line: str) -> str:
    """What a terminal shows of a line: the last carriage-return segment (tqdm bars), right-stripped; clipped to
    TAIL_LINE_CHARS."""
    segments = [segment for segment in line.split("\r") if segment.strip()]
    shown = segments[-1].rstrip() if segments else ""
    if len(shown) <= TAIL_LINE_CHARS:
        return shown
    return f"{shown[:TAIL_LINE_CHARS]}... ({len(shown) - TAIL_LINE_CHARS} more characters in the log file)"


class LogFeed:
    """The lines a server appended to its log since the last read, and the tail of its output."""

    def __init__(self, path: Path, offset: int) -> None:
        self._path = path
        self._offset = offset
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._partial = ""
        self._tail: deque[str] = deque(maxlen=TAIL_LINES)

    def new_lines(self) -> list[str]:
        """The complete lines appended since the last call (a line still being written waits for its newline)."""
        with self._path.open("rb") as log_file:
            log_file.seek(self._offset)
            data = log_file.read()
        self._offset += len(data)
        *lines, self._partial = (self._partial + self._decoder.decode(data)).split("\n")
        self._tail.extend(screen_line(line) for line in lines)
        return lines

    def tail(self) -> tuple[str, ...]:
        """The last TAIL_LINES lines as a terminal shows them, the unfinished one included."""
        partial = screen_line(self._partial)
        return (*self._tail, partial)[-TAIL_LINES:] if partial else tuple(self._tail)
