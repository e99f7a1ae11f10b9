"""Which flags a command line gives, with which values, as SGLang's own argument parser reads them.

argparse accepts unique prefixes (`--tp` for `--tp-size`) and keeps the last of repeated flags; the helpers here
resolve each flag as written to the option argparse picks, so that callers can reason about options, not spellings.
"""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from pytest_sglang_perf.sglang_facts.parsers import ArgParser


class ParseError(Exception):
    """SGLang's parser rejected the command line; the message is argparse's."""


@dataclass(frozen=True)
class Requested:
    """One flag of the command line: as written, its argparse dest and the value SGLang's parser gave it."""

    flag: str
    dest: str
    value: Any


@dataclass(frozen=True)
class Given:
    """One flag as written on the command line, the option argparse picks for it, and the values after it."""

    flag: str
    action: argparse.Action
    values: tuple[str, ...]


def raising_parser(source: ArgParser) -> argparse.ArgumentParser:
    """A fresh parser from `source` that raises ParseError where argparse would print and exit."""
    parser = source.make()

    def error(message: str) -> NoReturn:
        raise ParseError(message)

    parser.error = error  # type: ignore[method-assign]
    return parser


def parse_command_line(args: Sequence[str], parser: argparse.ArgumentParser) -> argparse.Namespace:
    """`args` as the server's parser reads them (the model path, which the plugin adds, stands in). What SGLang's
    deprecated options print while parsing is not shown: the pre-flight check reports them as findings."""
    with contextlib.redirect_stderr(io.StringIO()):
        return parser.parse_args(["--model-path", "m", *args])


def requested_flags(args: Sequence[str], source: ArgParser) -> list[Requested]:
    """Each flag of a command line that parses, with the value SGLang's own parser gives it (last one wins)."""
    parser = raising_parser(source)
    try:
        namespace = parse_command_line(args, parser)
    except ParseError:  # the pre-flight check reports it
        return []
    return [Requested(g.flag, g.action.dest, getattr(namespace, g.action.dest)) for g in given_flags(args, parser)]


def given_flags(args: Sequence[str], parser: argparse.ArgumentParser) -> list[Given]:
    """Every flag on the command line that names one of the parser's options, in order."""
    out = []
    for i, arg in enumerate(args):
        if not arg.startswith("--"):
            continue
        flag, eq, inline = arg.partition("=")
        action = lookup_option(parser, flag)
        if action is None:
            continue
        values = (inline,) if eq else tuple(_values_after(args, i + 1, action))
        out.append(Given(flag, action, values))
    return out


def lookup_option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action | None:
    """The option argparse would pick for `flag` (exact, or the unique prefix it accepts)."""
    exact = {s: a for a in parser._actions for s in a.option_strings}
    if flag in exact:
        return exact[flag]
    matches = {a.dest: a for s, a in exact.items() if s.startswith(flag)}
    return next(iter(matches.values())) if len(matches) == 1 else None


def _values_after(args: Sequence[str], start: int, action: argparse.Action) -> list[str]:
    if action.nargs == 0:
        return []
    values = []
    for arg in args[start:]:
        if arg.startswith("--"):
            break
        values.append(arg)
        if action.nargs is None or action.nargs == "?":
            break
    return values
