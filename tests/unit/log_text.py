"""SGLang log text for the log-reading tests: the line prefixes SGLang 0.5.23 writes, and logs built from messages."""

from __future__ import annotations

import re

PREFIXES = ["[2026-11-29 10:00:00] ", "[2026-11-29 10:00:00.123] ", "[2026-11-29 10:00:00 TP1] ",
            "[2026-11-29 10:00:00.007 DP0 TP1] ", "[2026-11-29 10:00:00 DP1 PP0 ATTN_CP0 MOE_DP0 TP3 EP3] ", ""]
"""Without rank tags (with and without milliseconds), with those of a TP, a DP+TP and a large MoE boot, and none."""

_RANK_NUMBER = re.compile(r"(?<=[A-Z])\d+")


def rank0(prefix: str) -> str:
    """The same prefix for the first rank (every rank tag set to 0)."""
    return _RANK_NUMBER.sub("0", prefix)


def log(lines: list[str], prefix: str = "[2026-11-29 10:00:00] ") -> str:
    return "".join(f"{prefix}{line}\n" for line in lines)


def tp2(lines: list[str]) -> str:
    """A TP2 log: each line from TP0, then from TP1 with every number changed (so a TP1 value would show)."""
    other = [re.sub(r"\d", "7", line) for line in lines]
    return "".join(f"[2026-11-29 10:00:00 TP0] {a}\n[2026-11-29 10:00:00 TP1] {b}\n"
                   for a, b in zip(lines, other, strict=True))
