"""The simulator's command line: SGLang's options (from the flag table) plus the simulator's `--sim-*` knobs.

The command line is parsed in two stages (`parse_args_and_knobs`): the `--sim-*` knobs first, by their
exact names only, then the rest by a parser holding exactly SGLang's options. A knob therefore never
joins an `ambiguous option` list or turns SGLang's `unrecognized arguments` into something else.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_sglang_perf.sglang_facts.config_file import merge_config_file
from pytest_sglang_perf.sglang_facts.flags import FlagTable, add_option
from pytest_sglang_perf.sglang_facts.flags import build_sglang_parser as _build_sglang_parser
from pytest_sglang_perf.simulator.args.knobs import Knobs, add_knob_arguments, resolve_knobs


def build_parser(table: FlagTable) -> argparse.ArgumentParser:
    """SGLang's parser from the table, plus the simulator's `--sim-*` knobs (one parser: help, tests)."""
    parser = argparse.ArgumentParser(prog=table.prog)
    for spec in table.options:
        add_option(parser, spec)
    add_knob_arguments(parser)
    return parser


def build_sglang_parser(table: FlagTable) -> argparse.ArgumentParser:
    """Exactly SGLang's options (errors and usage read as SGLang's); `--help` also lists the knobs."""
    return _build_sglang_parser(table, full_help=lambda: build_parser(table).format_help())


def parse_args_and_knobs(table: FlagTable, args: Sequence[str],
                         environ: Mapping[str, str]) -> tuple[dict[str, Any], Knobs]:
    """(SGLang's args by dest, the knobs: command line > `environ` > default); exits 2 with argparse's message on a
    bad command line, like SGLang.

    A `--config FILE.yaml` is merged first, as SGLang's `prepare_server_args` does (raises
    config_file.ConfigFileError); a bad knob value raises knobs.KnobError."""
    knobs, rest = split_knobs(table, args)
    parser = build_sglang_parser(table)
    namespace = parser.parse_args(merge_config_file(parser, rest))
    return vars(namespace), resolve_knobs(knobs, environ)


def split_knobs(table: FlagTable, args: Sequence[str]) -> tuple[argparse.Namespace, list[str]]:
    """(the `--sim-*` knobs, by exact name; the rest of the command line: what SGLang itself would get)."""
    knob_parser = argparse.ArgumentParser(prog=table.prog, add_help=False, allow_abbrev=False)
    add_knob_arguments(knob_parser)
    knobs, rest = knob_parser.parse_known_args(list(args))
    return knobs, rest
