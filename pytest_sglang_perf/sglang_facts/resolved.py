"""A command line as SGLang's own parser resolves it: the flags it sets (spelling-independent) and the GPUs it uses.

`--tp 2` and `--tensor-parallel-size 2` set the same option; a baseline records the options and values, so that a
later run with another spelling still compares, and a changed value is named ("--tp-size 1 -> 2"). Which dests
count GPUs and which are secrets is data (`gpu_count_fields`, `secret_fields` in the rules file, docs §12).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_sglang_perf.sglang_facts.parsers import ArgParser
from pytest_sglang_perf.sglang_facts.requested import ParseError, parse_command_line, raising_parser, requested_flags
from pytest_sglang_perf.sglang_facts.rules import load_rules


def option_name(action: argparse.Action) -> str:
    """The shortest long option of an action (`--tp-size` for `--tensor-parallel-size`): how reports name it."""
    long = [s for s in action.option_strings if s.startswith("--")] or list(action.option_strings)
    return min(long, key=len)


def value_text(value: Any) -> str:
    """A parsed value as reports and baselines show it: `2`, `true`, `none`, `a b` for a list."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, list | tuple):
        return " ".join(value_text(v) for v in value)
    return str(value)


def resolved_args(args: Sequence[str], source: ArgParser) -> dict[str, str]:
    """Each option the command line sets (by its shortest long name) with the value SGLang's parser gives it;
    secrets left out. Empty when the command line does not parse (the pre-flight check reports that)."""
    parser = raising_parser(source)
    secret = set(load_rules(source.version).secret_fields)
    actions = {a.dest: a for a in parser._actions}
    out: dict[str, str] = {}
    for given in requested_flags(args, source):
        if given.dest not in secret and given.dest in actions:
            out[option_name(actions[given.dest])] = value_text(given.value)
    return out


def option_defaults(source: ArgParser) -> Mapping[str, str]:
    """Every option's default value as text, by its shortest long name."""
    parser = source.make()
    return {option_name(a): value_text(a.default) for a in parser._actions if a.option_strings}


def gpus_used(args: Sequence[str], source: ArgParser) -> int:
    """How many GPUs one server with this command line uses: the product of the rules' `gpu_count_fields`
    (tp x pp x dp in SGLang 0.5.23; dp not under DP attention before 0.5.22); 1 when the command line does not
    parse."""
    try:
        namespace = parse_command_line(args, raising_parser(source))
    except ParseError:
        return 1
    return load_rules(source.version).gpu_count(vars(namespace))
