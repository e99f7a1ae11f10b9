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
    note: str | None = None
    """Why the facts are another version's than the one asked for (sglang_facts/versions.py), or None."""


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


def flag_table_parser(version: str | None = None) -> ArgParser:
    """The parser of SGLang `version` from its flag table (read from the release's wheel; the nearest older covered
    version's where it has none, said in `note`); None: the version the simulator models."""
    from pytest_sglang_perf.sglang_facts.flags import build_sglang_parser, load_flag_table, table_for

    table, note = (load_flag_table(), None) if version is None else table_for(version)
    return ArgParser(f"the flag table of SGLang {table.sglang_version}", table.sglang_version,
                     lambda: build_sglang_parser(table), note)


def choose_parser(*, simulate: bool, version: str | None = None) -> ArgParser:
    """The flag table of `version` when given (`sglang-perf check --sglang-version`) or when simulating (the version
    the simulator models); else the installed SGLang's own parser, falling back to the table."""
    if not simulate and version is None:
        installed = installed_sglang_parser()
        if installed is not None:
            return installed
    return flag_table_parser(version)
