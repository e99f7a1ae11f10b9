"""What to launch for a variant: the exact command line and environment (plain Python, no pytest)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_sglang_perf.config.settings import ConfigError, Settings, Variant, table_location
from pytest_sglang_perf.sglang_facts.known_models import known_models_text, shipped_config
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
    model_config: Path | None = None
    """The config.json the simulator reads for the model (server/model_dir.py hashes it); None on a real run."""
    url: str | None = None
    """A running server to measure instead (the variant's `url`): nothing is booted or stopped, and `command` is
    only what the server is expected to run."""
    admin_api_key: str | None = None
    """The key of SGLang's admin endpoints (/flush_cache), when the server has one."""


API_KEY_ENV = "SGLANG_PERF_API_KEY"
ADMIN_KEY_ENV = "SGLANG_PERF_ADMIN_API_KEY"
"""A remote server's keys come from the environment (a secret stays out of the configuration); a booted server's
from its own `--api-key`/`--admin-api-key`."""


def plan_server(settings: Settings, variant: Variant, *, simulate: bool,
                environ: Mapping[str, str] = os.environ) -> ServerPlan:
    program = _program(settings, simulate)
    model = simulated_model(settings) if simulate else PlannedModel(settings.model, None)
    extra = settings.simulate.args if simulate else ()
    args = (*settings.args, *variant.args)
    remote = variant.url is not None
    return ServerPlan(
        variant=variant,
        args=args,
        command=(*program, "--model-path", model.model_path, *args, *extra),
        env={**settings.env, **variant.env},
        simulated=simulate,
        api_key=(remote and environ.get(API_KEY_ENV)) or flag_value(args, "--api-key"),
        uses_default_launcher=not simulate and settings.server_command is None and not remote,
        model_config=model.config_file,
        url=variant.url,
        admin_api_key=(remote and environ.get(ADMIN_KEY_ENV)) or flag_value(args, "--admin-api-key"),
    )


def _program(settings: Settings, simulate: bool) -> tuple[str, ...]:
    if simulate:
        return (sys.executable, *SIMULATOR)
    if settings.server_command is not None:
        return settings.server_command
    return (sys.executable, *SGLANG_LAUNCHER)


@dataclass(frozen=True)
class PlannedModel:
    """The model as a planned command line names it."""

    model_path: str
    """What `--model-path` gets."""
    config_file: Path | None
    """The config.json the simulator reads for it (None on a real run)."""


def simulated_model(settings: Settings) -> PlannedModel:
    """Where the simulator finds the model's config.json, first found wins: `[simulate] model_path`, the model as a
    local folder (relative to the rootdir, or as given), the config the project ships for a known model id
    (`--model-path` keeps the id, as on a GPU runner; the simulator looks it up itself). Checked before any server
    starts (sglang_facts/model_fields.py); a ConfigError that says how to point at a config.json otherwise."""
    if settings.simulate.model_path is not None:
        folder = settings.simulate.model_path
        _check_model_config(folder / "config.json", settings)
        return PlannedModel(str(folder), folder / "config.json")
    for folder in (settings.root / settings.model, Path(settings.model)):
        if (folder / "config.json").is_file():
            _check_model_config(folder / "config.json", settings)
            return PlannedModel(str(folder), folder / "config.json")
    shipped = shipped_config(settings.model)
    if shipped is None:
        raise ConfigError(_unknown_model(settings))
    return PlannedModel(settings.model, shipped)


def _unknown_model(settings: Settings) -> str:
    model = settings.model
    return (
        f"{settings.source}: model = {model!r}: --sglang-simulate needs the model's config.json (its sizes set the "
        f"simulated speed and memory), and {model!r} is neither a local folder with a config.json nor a model the "
        f"plugin ships a config for ({known_models_text()}); copy the model's config.json (from "
        f"https://huggingface.co/{model}/blob/main/config.json; no weights needed) into a folder and set "
        f"model_path = \"<that folder>\" under {table_location(settings.source, 'simulate')}"
    )


def _check_model_config(config_file: Path, settings: Settings) -> None:
    """The fields the simulator needs (sglang_facts/model_fields.py), checked before any server starts."""
    try:
        read_model_config(config_file)
    except ModelConfigFileError as exc:
        raise ConfigError(f"--sglang-simulate: {exc}") from None
    except FileNotFoundError:
        raise ConfigError(
            f"{settings.source}: simulate.model_path: {config_file} does not exist; the simulator reads the model's "
            "config.json from there: copy the model's config.json into that folder, or fix model_path under "
            f"{table_location(settings.source, 'simulate')}") from None


def flag_value(args: Sequence[str], flag: str) -> str | None:
    """The value given to `flag` (last occurrence wins, as with argparse), `--flag=value` included."""
    value = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value
