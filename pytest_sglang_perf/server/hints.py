"""Hints for failed boots: known SGLang failure messages, matched in the reason and the log tail.

The patterns are data (`data/sglang-<version>-rules.json`, "boot_hints"); unknown flags get the pre-flight
check's suggestion (renames and the closest real flag names).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_sglang_perf.server.preflight import ArgParser, load_rules, suggest_for_message


def boot_hints(reason: str, log_tail: Iterable[str], parser: ArgParser | None = None,
               version: str = "0.5.23") -> list[str]:
    """Every hint whose pattern occurs in the failure reason or the log tail, in table order, no repeats."""
    text = "\n".join([reason, *log_tail])
    hints = [_fill(rule, match) for rule in load_rules(version).get("boot_hints", [])
             if (match := re.search(rule["pattern"], text)) is not None]
    if parser is not None:
        hints += suggest_for_message(text, parser)
    return list(dict.fromkeys(hints))


def _fill(rule: Mapping[str, Any], match: re.Match[str]) -> str:
    return str(rule["hint"]).format(**{k: (v or "").strip() for k, v in match.groupdict().items()})
