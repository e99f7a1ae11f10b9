"""Log lines in SGLang's formats, written and flushed one line at a time.

SGLang (srt/utils/common.py::configure_logger): `[YYYY-MM-DD HH:MM:SS<prefix>] <message>` on stderr,
no level name; scheduler lines carry ` DP<i>` / ` PP<i>` / ` TP<i>` when those sizes are > 1.
uvicorn (set_uvicorn_logging_configs): `[YYYY-MM-DD HH:MM:SS] INFO:     <message>` on stderr, access lines
`[...] INFO:     HOST:PORT - "GET /path HTTP/1.1" 200 OK` on stdout.
"""

from __future__ import annotations

import http
import logging
import sys
import time
from typing import TextIO

_UVICORN_LEVEL_WIDTH = 10


def level_number(name: str | None, default: int = logging.INFO) -> int:
    if not name:
        return default
    value = logging.getLevelName(name.upper())
    return value if isinstance(value, int) else default


def rank_prefixes(tp_size: int, pp_size: int = 1, dp_size: int = 1) -> tuple[str, ...]:
    """The scheduler log prefix of every rank, rank 0 first: ("",) for a single GPU."""
    prefixes = []
    for dp in range(dp_size):
        for pp in range(pp_size):
            for tp in range(tp_size):
                prefixes.append((f" DP{dp}" if dp_size > 1 else "") + (f" PP{pp}" if pp_size > 1 else "")
                                + (f" TP{tp}" if tp_size > 1 else ""))
    return tuple(prefixes)


class SimLogger:
    def __init__(self, level: str | None = "info", http_level: str | None = None,
                 stream: TextIO | None = None, access_stream: TextIO | None = None) -> None:
        self.level = level_number(level)
        self.http_level = level_number(http_level, self.level)
        self._stream = stream or sys.stderr
        self._access_stream = access_stream or sys.stdout

    def info(self, message: str, prefix: str = "") -> None:
        self.log(logging.INFO, message, prefix)

    def warning(self, message: str, prefix: str = "") -> None:
        self.log(logging.WARNING, message, prefix)

    def error(self, message: str, prefix: str = "") -> None:
        self.log(logging.ERROR, message, prefix)

    def log(self, level: int, message: str, prefix: str = "") -> None:
        if level >= self.level:
            self._write(self._stream, f"[{_now()}{prefix}] {message}")

    def uvicorn(self, message: str, level: int = logging.INFO) -> None:
        if level >= self.http_level:
            self._write(self._stream, f"[{_now()}] {_level_prefix(level)}{message}")

    def access(self, client: str, request_line: str, status: int) -> None:
        if self.http_level <= logging.INFO:
            line = f'{client} - "{request_line}" {status} {_phrase(status)}'
            self._write(self._access_stream, f"[{_now()}] {_level_prefix(logging.INFO)}{line}")

    @staticmethod
    def _write(stream: TextIO, line: str) -> None:
        try:
            stream.write(line + "\n")
            stream.flush()
        except (BrokenPipeError, ValueError):
            pass


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S")


def _level_prefix(level: int) -> str:
    return f"{logging.getLevelName(level)}:".ljust(_UVICORN_LEVEL_WIDTH)


def _phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return ""
