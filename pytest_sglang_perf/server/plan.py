"""What to launch for a variant: the exact command line and environment (plain Python, no pytest)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_sglang_perf.config.settings import ConfigError, Settings, Variant
from pytest_sglang_perf.sglang_facts.model_fields import ModelConfigFileError, read_model_config

SGLANG_LAUNCHER = ("-m", "sglang.launch_server")
SIMULATOR = ("-m", "pytest_sglang_perf.simulator")


@dataclass(frozen=True)
class ServerPlan:
    """Everything needed to boot one variant's server."""

    variant: Variant
    args: tuple[str, ...]
    """The flags the user asked for (base + variant), without the plugin's own additions."""
    command: tuple[str, ...]
    env: Mapping[str, str]
    simulated: bool
    api_key: str | None
    uses_default_launcher: bool


def plan_server(settings: Settings, variant: Variant, *, simulate: bool) -> ServerPlan:
    program = _program(settings, simulate)
    model_path = _model_path(settings, simulate)
    extra = settings.simulate.args if simulate else ()
    args = (*settings.args, *variant.args)
    return ServerPlan(
        variant=variant,
        args=args,
        command=(*program, "--model-path", model_path, *args, *extra),
        env={**settings.env, **variant.env},
        simulated=simulate,
        api_key=flag_value(args, "--api-key"),
        uses_default_launcher=not simulate and settings.server_command is None,
    )


def _program(settings: Settings, simulate: bool) -> tuple[str, ...]:
    if simulate:
        return (sys.executable, *SIMULATOR)
    if settings.server_command is not None:
        return settings.server_command
    return (sys.executable, *SGLANG_LAUNCHER)


def _model_path(settings: Settings, simulate: bool) -> str:
    """What `--model-path` gets: the model; when simulated, a folder whose config.json the simulator can model."""
    if not simulate:
        return settings.model
    folder = _simulated_model_folder(settings)
    _check_model_config(Path(folder) / "config.json", settings.source)
    return folder


def _simulated_model_folder(settings: Settings) -> str:
    if settings.simulate.model_path is not None:
        return str(settings.simulate.model_path)
    local = settings.root / settings.model
    if (local / "config.json").is_file():
        return str(local)
    if (Path(settings.model) / "config.json").is_file():
        return settings.model
    raise ConfigError(
        f"{settings.source}: simulate.model_path: the simulator reads config.json from --model-path, and "
        f"{settings.model!r} is not a local folder with one; set [simulate] model_path to a folder holding "
        "the model's config.json (e.g. tests/perf/models/<model>)"
    )


def _check_model_config(config_file: Path, source: str) -> None:
    """The fields the simulator needs (sglang_facts/model_fields.py), checked before any server starts."""
    try:
        read_model_config(config_file)
    except ModelConfigFileError as exc:
        raise ConfigError(f"--sglang-simulate: {exc}") from None
    except FileNotFoundError:
        raise ConfigError(f"{source}: simulate.model_path: {config_file} does not exist; the simulator reads the "
                          "model's config.json from there: copy the model's config.json into that folder") from None


def flag_value(args: Sequence[str], flag: str) -> str | None:
    """The value given to `flag` (last occurrence wins, as with argparse), `--flag=value` included."""
    value = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value
