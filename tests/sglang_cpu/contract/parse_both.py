"""SGLang's own argument parser next to the simulator's, as JSON (run as a script where `sglang` imports).

stdin is one request, stdout its answer, with a key for each part asked:
- `{"lines": [[arg, ...], ...]}` -> `{"results": [{"sglang": Outcome, "simulator": Outcome}, ...],
  "unordered": [[choice, ...], ...]}`. An outcome is `{"exit", "stderr", "stdout", "args"}` of one parse, done
  in-process with both streams captured and a parser built afresh per line, as each launch does. `unordered`: choice
  lists that SGLang keeps in a `set`, so their order in its messages changes from process to process.
- `{"parsers": true}` -> both parsers' settings and options, one descriptor per argparse action.
- `{"table": "path/to/extract_sglang_flags.py"}` -> `{"table": ..., "unordered_dests": [...]}`: the flag table that tool
  writes for the installed SGLang.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

PROG = "sglang serve"
Parse = Callable[[list[str]], Mapping[str, Any]]


def jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return repr(value)


def sglang_parser() -> argparse.ArgumentParser:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser(prog=PROG)
    ServerArgs.add_cli_args(parser)
    return parser


def simulator_parser() -> argparse.ArgumentParser:
    from pytest_sglang_perf.sglang_facts.flags import load_flag_table
    from pytest_sglang_perf.simulator.args.command_line import build_sglang_parser

    return build_sglang_parser(load_flag_table())


def sglang_parse(argv: list[str]) -> Mapping[str, Any]:
    """The parse step of `sglang/srt/server_args.py::prepare_server_args`."""
    parser = sglang_parser()
    if "--config" in argv:
        from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger

        argv = ConfigArgumentMerger(parser).merge_config_with_args(argv)
    return vars(parser.parse_args(argv))


def simulator_parse(argv: list[str]) -> Mapping[str, Any]:
    """The parse step of `python -m pytest_sglang_perf.simulator` (its knobs left out)."""
    from pytest_sglang_perf.sglang_facts.flags import load_flag_table
    from pytest_sglang_perf.simulator.process.cli import parse_command_line

    raw, _knobs = parse_command_line(load_flag_table(), argv)
    return raw


def outcome(parse: Parse, argv: list[str]) -> dict[str, Any]:
    err, out = io.StringIO(), io.StringIO()
    args: Mapping[str, Any] | None = None
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            args = parse(argv)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception as exc:  # uncaught in a real launch: Python prints the traceback and exits 1
            traceback.print_exception(exc, limit=0)
            code = 1
    return {"exit": code, "stderr": err.getvalue(), "stdout": out.getvalue(),
            "args": None if args is None else jsonable(dict(args))}


def is_unordered(action: argparse.Action) -> bool:
    return isinstance(action.choices, set | frozenset)


def describe(action: argparse.Action, unordered: set[str]) -> dict[str, Any]:
    choices = None if action.choices is None else [str(c) for c in action.choices]
    return {
        "option_strings": list(action.option_strings), "dest": action.dest, "nargs": jsonable(action.nargs),
        "const": jsonable(action.const), "default": jsonable(action.default), "required": action.required,
        "choices": sorted(choices) if choices is not None and action.dest in unordered else choices,
        "type": getattr(action.type, "__name__", None if action.type is None else repr(action.type)),
        "help_suppressed": action.help == argparse.SUPPRESS, "metavar": jsonable(action.metavar),
    }


def settings(parser: argparse.ArgumentParser) -> dict[str, Any]:
    keys = ("prog", "prefix_chars", "fromfile_prefix_chars", "allow_abbrev", "exit_on_error", "argument_default",
            "conflict_handler")
    return {key: jsonable(getattr(parser, key)) for key in keys}


def parsers() -> dict[str, Any]:
    """Choices SGLang keeps in a set are sorted on both sides."""
    unordered = {a.dest for a in sglang_parser()._actions if is_unordered(a)}
    out: dict[str, Any] = {}
    for name, build in (("sglang", sglang_parser), ("simulator", simulator_parser)):
        parser = build()
        out[name] = {"settings": settings(parser), "actions": [describe(a, unordered) for a in parser._actions]}
    return out


def lines(argvs: list[list[str]]) -> dict[str, Any]:
    results = [{"sglang": outcome(sglang_parse, argv), "simulator": outcome(simulator_parse, argv)} for argv in argvs]
    unordered = [sorted(str(c) for c in a.choices or ()) for a in sglang_parser()._actions if is_unordered(a)]
    return {"results": results, "unordered": unordered}


def table(tool: str) -> dict[str, Any]:
    """`tools/extract_sglang_flags.py` as its `main()` runs it, without its stdout."""
    spec = importlib.util.spec_from_file_location("extract_sglang_flags", tool)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    written = io.StringIO()
    with contextlib.redirect_stdout(written):
        module.main()
    unordered = [a.dest for a in sglang_parser()._actions if is_unordered(a)]
    return {"table": json.loads(written.getvalue()), "unordered_dests": unordered}


def main() -> int:
    for name in [key for key in os.environ if key.startswith("SGLANG_SIM_")]:
        del os.environ[name]
    request = json.load(sys.stdin)
    answer: dict[str, Any] = {}
    if "lines" in request:
        answer["lines"] = lines(request["lines"])
    if request.get("parsers"):
        answer["parsers"] = parsers()
    if "table" in request:
        answer["table"] = table(str(Path(request["table"])))
    json.dump(answer, sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
