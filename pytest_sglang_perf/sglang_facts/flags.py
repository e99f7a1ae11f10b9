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

_DEPRECATION_HINTS: Mapping[str, str] = {
    "disable_cuda_graph": "--cuda-graph-backend-{decode,prefill}=disabled",
    "enable_dp_attention": "--attn-dp-size <dp-size>",
    "enable_amd_monokernel": "--enable-amd-monokernel",
}
"""The `new_flag=` SGLang's server_args.py registers each deprecated option with (not in the flag table)."""
_OPTIONAL_VALUE_CONSTS: Mapping[str, Any] = {"model_checksum": ""}
"""The `const=` of SGLang's `nargs="?"` options (the value of the bare flag; not in the flag table)."""
_HIDDEN_DESTS = frozenset({"forward_pass_metrics_worker_id", "forward_pass_metrics_ipc_name"})
"""Options SGLang registers with `help=argparse.SUPPRESS` (absent from its usage line; not in the flag table)."""


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

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FlagSpec:
        choices = data.get("choices")
        return cls(
            flags=tuple(data["flags"]), dest=str(data["dest"]), action=str(data.get("action") or "store"),
            type=data.get("type"), nargs=data.get("nargs"),
            choices=None if choices is None else tuple(choices), default=data.get("default"),
            required=bool(data.get("required", False)), action_class=data.get("action_class"),
            deprecated=bool(data.get("deprecated", False)),
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
    if spec.dest in _HIDDEN_DESTS:
        kwargs["help"] = argparse.SUPPRESS
    if spec.action == "boolean_optional":
        flags = [f for f in spec.flags if not f.startswith("--no-")]
        parser.add_argument(*flags, action=argparse.BooleanOptionalAction, **kwargs)
    elif spec.action in ("store_true", "store_false", "store_const", "append_const"):
        parser.add_argument(*spec.flags, action=_flag_action(spec), **kwargs)
    elif spec.action == "count":
        parser.add_argument(*spec.flags, action="count", **kwargs)
    else:
        parser.add_argument(*spec.flags, **kwargs, **_value_kwargs(spec))


def _flag_action(spec: FlagSpec) -> Any:
    if spec.deprecated:
        return DeprecatedStoreTrueAction
    return "store_false" if spec.action == "store_false" else "store_true"


def _value_kwargs(spec: FlagSpec) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"required": spec.required}
    if spec.action_class == "DeprecatedStoreConstAction":
        kwargs["action"] = DeprecatedStoreConstAction
    elif spec.action_class == "LoRAPathAction":
        kwargs["action"] = LoRAPathAction
    elif spec.action == "append":
        kwargs["action"] = "append"
    type_func = converter(spec.type)
    if type_func is not None:
        kwargs["type"] = type_func
    if spec.nargs is not None and spec.nargs != 0:
        kwargs["nargs"] = spec.nargs
    if spec.nargs == "?" and spec.dest in _OPTIONAL_VALUE_CONSTS:
        kwargs["const"] = _OPTIONAL_VALUE_CONSTS[spec.dest]
    if spec.choices is not None:
        kwargs["choices"] = list(spec.choices)
    return kwargs


def _warn_deprecated(option_string: str | None, dest: str) -> None:
    hint = _DEPRECATION_HINTS.get(dest)
    replacement = f" Use '{hint}' instead." if hint else ""
    message = f"'{option_string}' is deprecated and will be removed in a future release.{replacement}"
    print(f"\033[1;33m{message}\033[0m", file=sys.stderr, flush=True)


class DeprecatedStoreTrueAction(argparse.Action):
    """A retired boolean that still stores True and warns, like SGLang's DeprecatedStoreTrueAction."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest, nargs=0, const=True, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _warn_deprecated(option_string, self.dest)
        setattr(namespace, self.dest, True)


class DeprecatedStoreConstAction(argparse.Action):
    """A retired valued flag whose only accepted value became a boolean (`--monokernel-backend amd`)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _warn_deprecated(option_string, self.dest)
        setattr(namespace, self.dest, True)


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
