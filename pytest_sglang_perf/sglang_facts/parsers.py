"""Where SGLang's argument parser comes from: the installed SGLang, or the flag table of the version the simulator
models (for a CPU runner, a CI job, or `--sglang-simulate`)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ArgParser:
    """A source of SGLang's parser: `source` says which (installed SGLang, or the simulator's flag table)."""

    source: str
    version: str
    make: Callable[[], argparse.ArgumentParser]


def installed_sglang_parser() -> ArgParser | None:
    """The installed SGLang's own parser, or None when SGLang is not importable."""
    try:
        from sglang.srt.server_args import ServerArgs  # heavy: only here, only when a parser is asked for
        from sglang.version import __version__
    except Exception:
        return None

    def make() -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog="sglang serve")
        ServerArgs.add_cli_args(parser)
        return parser

    return ArgParser(f"the installed SGLang {__version__}", str(__version__), make)


def flag_table_parser() -> ArgParser:
    """The parser of the SGLang version the simulator models, from the shipped flag table."""
    from pytest_sglang_perf.sglang_facts.flags import build_sglang_parser, load_flag_table

    table = load_flag_table()
    return ArgParser(f"the flag table of SGLang {table.sglang_version}", table.sglang_version,
                     lambda: build_sglang_parser(table))


def choose_parser(*, simulate: bool) -> ArgParser:
    """The simulator's flags when simulating; else the installed SGLang's, falling back to the table."""
    if not simulate:
        installed = installed_sglang_parser()
        if installed is not None:
            return installed
    return flag_table_parser()
