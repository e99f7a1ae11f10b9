"""Hints for failed boots: known SGLang failure messages, matched in the reason and the log tail.

The patterns are data (the SGLang version's rules, `boot_hints`: see `sglang_facts.rules`); unknown flags get
the pre-flight check's suggestion (renames and the closest real flag names).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pytest_sglang_perf.server.preflight import suggest_for_message
from pytest_sglang_perf.sglang_facts.parsers import ArgParser
from pytest_sglang_perf.sglang_facts.rules import DEFAULT_VERSION, BootHint, load_rules


def boot_hints(reason: str, log_tail: Iterable[str], parser: ArgParser | None = None,
               version: str = DEFAULT_VERSION) -> list[str]:
    """Every hint whose pattern occurs in the failure reason or the log tail, in table order, no repeats."""
    text = "\n".join([reason, *log_tail])
    hints = [_fill(rule, match) for rule in load_rules(version).boot_hints
             if (match := rule.pattern.search(text)) is not None]
    if parser is not None:
        hints += suggest_for_message(text, parser)
    return list(dict.fromkeys(hints))


def _fill(rule: BootHint, match: re.Match[str]) -> str:
    return rule.hint.format(**{k: (v or "").strip() for k, v in match.groupdict().items()})
