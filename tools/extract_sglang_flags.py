"""Dump the installed SGLang's server argument parser as a JSON flag table.

Run it in an environment where `sglang.srt.server_args` imports (see README, "SGLang on CPU"):

    python tools/extract_sglang_flags.py > pytest_sglang_perf/sglang_facts/data/sglang-<version>-flags.json

The table is data (flag names, types, defaults, choices), read from SGLang's own parser; the simulator
builds its CLI from it and `sglang-perf check` falls back to it when SGLang is not importable.
"""

from __future__ import annotations

import argparse
import enum
import json
import sys
from typing import Any


def _jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return _jsonable(value.value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)


def _action_kind(action: argparse.Action) -> str:
    name = type(action).__name__
    known = {
        "_StoreAction": "store", "_StoreTrueAction": "store_true", "_StoreFalseAction": "store_false",
        "_AppendAction": "append", "_StoreConstAction": "store_const", "_CountAction": "count",
        "BooleanOptionalAction": "boolean_optional",
    }
    if name in known:
        return known[name]
    return "store_true" if action.nargs == 0 else "store"


def _type_name(action: argparse.Action) -> str | None:
    if action.type is None:
        return None
    return getattr(action.type, "__name__", type(action.type).__name__)


def describe(action: argparse.Action) -> dict[str, Any]:
    return {
        "flags": list(action.option_strings),
        "dest": action.dest,
        "action": _action_kind(action),
        "action_class": type(action).__name__,
        "type": _type_name(action),
        "nargs": action.nargs if isinstance(action.nargs, str | type(None)) else int(action.nargs),
        "choices": _jsonable(list(action.choices)) if action.choices is not None else None,
        "default": _jsonable(action.default),
        "required": bool(action.required),
        "deprecated": "Deprecated" in type(action).__name__,
        **_extras(action),
    }


_UNSET = object()


def _extras(action: argparse.Action) -> dict[str, Any]:
    """What SGLang's parser holds beyond argparse's common fields, written only where present: the flag a deprecated
    option names as its replacement (`new_flag`), the value a deprecated const option stores (`const_value`), the
    value of a bare `nargs="?"` option (`const`), and whether the option is left out of the usage (`hidden`)."""
    out: dict[str, Any] = {}
    if getattr(action, "new_flag", None) is not None:
        out["new_flag"] = str(action.new_flag)  # type: ignore[attr-defined]
    const_value = getattr(action, "const_value", _UNSET)
    if const_value is not _UNSET:
        out["const_value"] = _jsonable(const_value)
    if action.nargs == "?":
        out["const"] = _jsonable(action.const)
    if action.help == argparse.SUPPRESS:
        out["hidden"] = True
    return out


def main() -> int:
    from sglang.srt.server_args import ServerArgs  # the installed SGLang, imported only here
    from sglang.version import __version__

    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    options = [describe(a) for a in parser._actions if a.option_strings and a.dest != "help"]
    table = {"sglang_version": __version__, "prog": parser.prog, "options": options}
    json.dump(table, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
