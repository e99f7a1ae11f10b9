"""`--config FILE.yaml`: YAML options merged into the command line before parsing, as SGLang 0.5.23 does.

Semantics of srt/utils/server_args_config_parser.py::ConfigArgumentMerger: only the exact token `--config`
triggers it; the file's options go first (so the command line wins), `key: true` of a store_true flag adds
the bare flag, a list adds the flag with its items, a mapping is passed as JSON, anything else as `str()`.
Options whose action takes no single value (e.g. BooleanOptionalAction) are rejected. Errors are
`ValueError`s with SGLang's texts. PyYAML is imported only here, and only when a config file is given.
"""

from __future__ import annotations

import argparse
import importlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

CONFIG_FLAG = "--config"


class ConfigFileError(ValueError):
    """The config file is missing, not YAML, malformed, or sets an option the merge cannot pass on."""


def merge_config_file(parser: argparse.ArgumentParser, args: Sequence[str]) -> list[str]:
    """`args` with the options of the `--config` file put in front; `args` unchanged without `--config`."""
    argv = list(args)
    path = _config_path(argv)
    if path is None:
        return argv
    index = argv.index(CONFIG_FLAG)
    return _config_args(parser, _read_yaml(path)) + argv[:index] + argv[index + 2:]


def _config_path(argv: list[str]) -> str | None:
    count = argv.count(CONFIG_FLAG)
    if count > 1:
        raise ConfigFileError("Multiple config files specified! Only one allowed.")
    if count == 0:
        return None
    index = argv.index(CONFIG_FLAG)
    if index == len(argv) - 1:
        raise ConfigFileError("No config file specified after --config flag!")
    return argv[index + 1]


def _read_yaml(file_path: str) -> Mapping[str, Any]:
    path = Path(file_path)
    if path.suffix.lower() not in (".yaml", ".yml"):
        raise ConfigFileError(f"Config file must be YAML format, got: {path.suffix}")
    if not path.exists():
        raise ConfigFileError(f"Config file not found: {file_path}")
    try:
        yaml: Any = importlib.import_module("yaml")
    except ImportError:
        raise ConfigFileError(f"reading {CONFIG_FLAG} {file_path} needs PyYAML, as SGLang does: "
                              "pip install pyyaml") from None
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigFileError("Config file must contain a dictionary at root level")
    return data


def _config_keys(action: argparse.Action) -> set[str]:
    """YAML keys may use the dest or any long spelling of a flag."""
    return {action.dest} | {flag[2:].replace("-", "_") for flag in action.option_strings if flag.startswith("--")}


def _takes_one_value(action: argparse.Action) -> bool:
    return isinstance(action, argparse._StoreAction) or action.nargs is None


def _supported(action: argparse.Action) -> bool:
    return isinstance(action, argparse._StoreTrueAction) or _takes_one_value(action)


def _unsupported_keys(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    actions = [a for a in parser._actions if a.option_strings]
    supported = {key for action in actions if _supported(action) for key in _config_keys(action)}
    skipped = {CONFIG_FLAG, "--help", "-h"}
    return {key: action for action in actions if not _supported(action) and not skipped & set(action.option_strings)
            for key in _config_keys(action) if key not in supported}


def _store_true_keys(parser: argparse.ArgumentParser) -> set[str]:
    return {key for action in parser._actions if isinstance(action, argparse._StoreTrueAction)
            for key in _config_keys(action)}


def _config_args(parser: argparse.ArgumentParser, config: Mapping[str, Any]) -> list[str]:
    unsupported, store_true = _unsupported_keys(parser), _store_true_keys(parser)
    args: list[str] = []
    for key, value in config.items():
        norm = str(key).replace("-", "_")
        if norm in unsupported:
            raise ConfigFileError(
                f"Unsupported config option '{norm}' with action '{type(unsupported[norm]).__name__}'")
        args.extend(_option_args(str(key), value, norm in store_true))
    return args


def _option_args(key: str, value: Any, store_true: bool) -> list[str]:
    flag = f"--{key}"
    if isinstance(value, bool):
        if store_true:
            return [flag] if value else []
        return [flag, str(value).lower()]
    if isinstance(value, list):
        return [flag, *(str(item) for item in value)] if value else []
    if isinstance(value, dict):
        return [flag, json.dumps(value)]
    return [flag, str(value)]
