"""SGLang's command line, rebuilt from a JSON table of its real argparse options.

The table (`pytest_sglang_perf/data/sglang-0.5.23-flags.json`) lists every option of
`sglang serve` 0.5.23: flags, dest, action, type, nargs, choices, default, required. The parser built
from it keeps argparse's `allow_abbrev=True`, as SGLang does, so an unknown flag exits 2 with
`unrecognized arguments` and a non-unique prefix with `ambiguous option`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_sglang_perf.simulator.converters import converter
from pytest_sglang_perf.simulator.knobs import add_knob_arguments

DEFAULT_TABLE = Path(__file__).resolve().parent.parent / "data" / "sglang-0.5.23-flags.json"

_DEPRECATION_HINTS: Mapping[str, str] = {
    "disable_cuda_graph": "--cuda-graph-backend-{decode,prefill}=disabled",
    "enable_dp_attention": "--attn-dp-size <dp-size>",
}


class FlagTableError(Exception):
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

    def defaults(self) -> dict[str, Any]:
        """Every dest with its default, in the table's order (first option of a dest wins)."""
        out: dict[str, Any] = {}
        for spec in self.options:
            out.setdefault(spec.dest, spec.default)
        return out


def load_flag_table(path: Path | str = DEFAULT_TABLE) -> FlagTable:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return FlagTable.from_dict(data)
    except FileNotFoundError:
        raise FlagTableError(f"SGLang flag table not found: {path}") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise FlagTableError(f"malformed SGLang flag table {path}: {exc!r}") from None


def build_parser(table: FlagTable) -> argparse.ArgumentParser:
    """SGLang's parser from the table, plus the simulator's `--sim-*` knobs."""
    parser = argparse.ArgumentParser(prog=table.prog)
    for spec in table.options:
        _add_option(parser, spec)
    add_knob_arguments(parser)
    return parser


def _add_option(parser: argparse.ArgumentParser, spec: FlagSpec) -> None:
    kwargs: dict[str, Any] = {"dest": spec.dest, "default": spec.default}
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
        return _DeprecatedStoreTrue
    return "store_false" if spec.action == "store_false" else "store_true"


def _value_kwargs(spec: FlagSpec) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"required": spec.required}
    if spec.action_class == "DeprecatedStoreConstAction":
        kwargs["action"] = _DeprecatedStoreConstTrue
    elif spec.action == "append":
        kwargs["action"] = "append"
    type_func = converter(spec.type)
    if type_func is not None:
        kwargs["type"] = type_func
    if spec.nargs is not None and spec.nargs != 0:
        kwargs["nargs"] = spec.nargs
    if spec.choices is not None:
        kwargs["choices"] = list(spec.choices)
    return kwargs


def _warn_deprecated(option_string: str | None, dest: str) -> None:
    hint = _DEPRECATION_HINTS.get(dest)
    replacement = f" Use '{hint}' instead." if hint else ""
    message = f"'{option_string}' is deprecated and will be removed in a future release.{replacement}"
    print(f"\033[1;33m{message}\033[0m", file=sys.stderr, flush=True)


class _DeprecatedStoreTrue(argparse.Action):
    """A retired boolean that still stores True and warns, like SGLang's DeprecatedStoreTrueAction."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        kwargs.pop("nargs", None)
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _warn_deprecated(option_string, self.dest)
        setattr(namespace, self.dest, True)


class _DeprecatedStoreConstTrue(argparse.Action):
    """A retired valued flag whose only accepted value became a boolean (`--monokernel-backend amd`)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        _warn_deprecated(option_string, self.dest)
        setattr(namespace, self.dest, True)
