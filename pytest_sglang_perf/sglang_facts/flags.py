"""SGLang's command line, rebuilt from a JSON table of its real argparse options.

The table (`pytest_sglang_perf/sglang_facts/data/sglang-0.5.23-flags.json`) lists every option of
`sglang serve` 0.5.23: flags, dest, action, type, nargs, choices, default, required. The parser built
from it keeps argparse's `allow_abbrev=True`, as SGLang does, so an unknown flag exits 2 with
`unrecognized arguments` and a non-unique prefix with `ambiguous option`.

The plugin's pre-flight check parses variants with it when SGLang is not installed; the simulator parses its
command line with it (adding its own `--sim-*` knobs in `simulator/args/command_line.py`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.sglang_facts.converters import converter

DEFAULT_TABLE = Path(__file__).resolve().parent / "data" / "sglang-0.5.23-flags.json"

_ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "<absent>"})()
"""A table entry without the key (distinct from a JSON null)."""


class FlagTableError(SGLangPerfError):
    """The flag table is missing or malformed."""


@dataclass(frozen=True)
class FlagSpec:
    flags: tuple[str, ...]
    dest: str
    action: str
    type: str | None = None
    nargs: int | str | None = None
    choices: tuple[Any, ...] | None = None
    default: Any = None
    required: bool = False
    action_class: str | None = None
    deprecated: bool = False
    new_flag: str | None = None
    """What a deprecated option names instead (SGLang's `new_flag=`): its warning says `Use '<new_flag>' instead.`"""
    const_value: Any = _ABSENT
    """The value a deprecated const option stores (SGLang's `const_value=`); _ABSENT where it has none."""
    const: Any = _ABSENT
    """The value of a bare `nargs="?"` option; _ABSENT for another option."""
    hidden: bool = False
    """Registered with `help=argparse.SUPPRESS`: absent from the usage line."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FlagSpec:
        choices = data.get("choices")
        return cls(
            flags=tuple(data["flags"]), dest=str(data["dest"]), action=str(data.get("action") or "store"),
            type=data.get("type"), nargs=data.get("nargs"),
            choices=None if choices is None else tuple(choices), default=data.get("default"),
            required=bool(data.get("required", False)), action_class=data.get("action_class"),
            deprecated=bool(data.get("deprecated", False)), new_flag=data.get("new_flag"),
            const_value=data.get("const_value", _ABSENT), const=data.get("const", _ABSENT),
            hidden=bool(data.get("hidden", False)),
        )


@dataclass(frozen=True)
class FlagTable:
    sglang_version: str
    prog: str
    options: tuple[FlagSpec, ...]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FlagTable:
        options = tuple(FlagSpec.from_dict(item) for item in data["options"])
        return cls(str(data.get("sglang_version", "unknown")), str(data.get("prog", "sglang serve")), options)


def load_flag_table(path: Path | str = DEFAULT_TABLE) -> FlagTable:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return FlagTable.from_dict(data)
    except FileNotFoundError:
        raise FlagTableError(f"SGLang flag table not found: {path}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise FlagTableError(f"malformed SGLang flag table {path}: {exc!r}") from None


def table_for(version: str) -> tuple[FlagTable, str | None]:
    """The flag table of SGLang `version`, or of the covered version that serves it (versions.py), with the line
    that says so (None for the version's own table)."""
    from pytest_sglang_perf.sglang_facts.versions import facts_version

    chosen = facts_version(version, "flags")
    return load_flag_table(DEFAULT_TABLE.with_name(f"sglang-{chosen.used}-flags.json")), chosen.note


def build_sglang_parser(table: FlagTable, full_help: Callable[[], str] | None = None) -> argparse.ArgumentParser:
    """Exactly SGLang's options (errors and usage read as SGLang's). `full_help`, when given, is what `-h/--help`
    prints instead of this parser's own help (the simulator lists its knobs there too)."""
    parser = argparse.ArgumentParser(prog=table.prog, add_help=full_help is None)
    if full_help is not None:
        parser.add_argument("-h", "--help", action=_CustomHelp, full_help=full_help,
                            help="show this help message and exit")
    for spec in table.options:
        add_option(parser, spec)
    return parser


def add_option(parser: argparse.ArgumentParser, spec: FlagSpec) -> None:
    kwargs: dict[str, Any] = {"dest": spec.dest, "default": spec.default}
    if spec.hidden:
        kwargs["help"] = argparse.SUPPRESS
    if spec.action == "boolean_optional":
        flags = [f for f in spec.flags if not f.startswith("--no-")]
        parser.add_argument(*flags, action=argparse.BooleanOptionalAction, **kwargs)
    elif spec.action in ("store_true", "store_false", "store_const", "append_const"):
        parser.add_argument(*spec.flags, **_flag_action(spec), **kwargs)
    elif spec.action == "count":
        parser.add_argument(*spec.flags, action="count", **kwargs)
    else:
        parser.add_argument(*spec.flags, **kwargs, **_value_kwargs(spec))


def _flag_action(spec: FlagSpec) -> dict[str, Any]:
    if spec.action_class == "DeprecatedStoreConstAction":
        return {"action": DeprecatedStoreConstAction, "new_flag": spec.new_flag, "nargs": 0,
                "const_value": True if spec.const_value is _ABSENT else spec.const_value}
    if spec.deprecated:
        return {"action": DeprecatedStoreTrueAction, "new_flag": spec.new_flag}
    return {"action": "store_false" if spec.action == "store_false" else "store_true"}


def _value_kwargs(spec: FlagSpec) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"required": spec.required}
    if spec.action_class == "DeprecatedStoreConstAction":
        kwargs.update(action=DeprecatedStoreConstAction, new_flag=spec.new_flag,
                      const_value=True if spec.const_value is _ABSENT else spec.const_value)
    elif spec.action_class == "DeprecatedAliasStoreAction":
        kwargs.update(action=DeprecatedAliasStoreAction, new_flag=spec.new_flag)
    elif spec.action_class == "LoRAPathAction":
        kwargs["action"] = LoRAPathAction
    elif spec.action == "append":
        kwargs["action"] = "append"
    type_func = converter(spec.type)
    if type_func is not None:
        kwargs["type"] = type_func
    if spec.nargs is not None and spec.nargs != 0:
        kwargs["nargs"] = spec.nargs
    if spec.nargs == "?" and spec.const is not _ABSENT:
        kwargs["const"] = spec.const
    if spec.choices is not None:
        kwargs["choices"] = list(spec.choices)
    return kwargs


def _warn_deprecated(option_string: str | None, new_flag: str | None) -> None:
    replacement = f" Use '{new_flag}' instead." if new_flag else ""
    message = f"'{option_string}' is deprecated and will be removed in a future release.{replacement}"
    print(f"\033[1;33m{message}\033[0m", file=sys.stderr, flush=True)


class _Deprecated(argparse.Action):
    """A deprecated option as SGLang registers it: it names its replacement (`new_flag`) and warns when used."""

    def __init__(self, option_strings: Sequence[str], dest: str, new_flag: str | None = None,
                 **kwargs: Any) -> None:
        self.new_flag = new_flag
        super().__init__(option_strings, dest, **kwargs)


class DeprecatedStoreTrueAction(_Deprecated):
    """A retired boolean that still stores True and warns, like SGLang's DeprecatedStoreTrueAction."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest, nargs=0, const=True, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _warn_deprecated(option_string, self.new_flag)
        setattr(namespace, self.dest, True)


class DeprecatedStoreConstAction(_Deprecated):
    """An old boolean whose replacement is one value of a valued flag: it stores that value (`const_value`) in the
    new flag's field (SGLang's DeprecatedStoreConstAction; `--enforce-piecewise-cuda-graph` in 0.5.19 stores
    `tc_piecewise` in `cuda_graph_backend_prefill`)."""

    def __init__(self, option_strings: Sequence[str], dest: str, const_value: Any = True, **kwargs: Any) -> None:
        self.const_value = const_value
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _warn_deprecated(option_string, self.new_flag)
        setattr(namespace, self.dest, self.const_value)


class DeprecatedAliasStoreAction(_Deprecated):
    """An old name of a valued flag: it stores its value in the new flag's field and warns."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _warn_deprecated(option_string, self.new_flag)
        setattr(namespace, self.dest, values)


class LoRAPathAction(argparse.Action):
    """`--lora-paths`: plain paths stay strings, `{"lora_name": .., "lora_path": ..}` items become dicts."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, [_lora_path(item) for item in values or ()])


def _lora_path(item: str) -> str | dict[str, Any]:
    text = item.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return text
    entry = json.loads(text)
    if not isinstance(entry, dict) or "lora_path" not in entry or "lora_name" not in entry:
        raise AssertionError(
            f"{text!r} looks like a JSON str, but it does not contain 'lora_name' and 'lora_path' keys.")
    return entry


class _CustomHelp(argparse.Action):
    """`-h/--help` that prints a given text (e.g. SGLang's options and the simulator's knobs) and exits."""

    def __init__(self, option_strings: Sequence[str], dest: str, full_help: Callable[[], str], **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)
        self._full_help = full_help

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        sys.stdout.write(self._full_help())
        parser.exit()
