"""A simulated server's configuration, read from its command line as SGLang reads its own.

`read_command_line` does what SGLang's `prepare_server_args` + `resolve_once()` do (docs/sglang-0.5.23.md §2.1): parse
SGLang's flags (a `--config` file merged first) and the simulator's `--sim-*` knobs, load the model's config.json and
resolve the args for the simulated GPU. The resolution messages are not logged here (the CLI logs them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_sglang_perf.sglang_facts.flags import DEFAULT_TABLE, FlagTable, load_flag_table
from pytest_sglang_perf.sglang_facts.gpus import Gpu, find_gpu
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig, load_model_config, model_config_from_dict
from pytest_sglang_perf.simulator.args.command_line import parse_args_and_knobs, split_knobs
from pytest_sglang_perf.simulator.args.knobs import Knobs, played_version
from pytest_sglang_perf.simulator.args.resolve import Resolution, resolve_args


@dataclass(frozen=True)
class ServerConfig:
    """Everything a command line decides: SGLang's resolved args, the model, the simulated GPU, the knobs."""

    model: ModelConfig
    resolution: Resolution
    knobs: Knobs
    gpu: Gpu
    launch_command: str
    """SGLang's own command line (the knobs left out), as /server_info shows it."""


def played_table(args: Sequence[str], environ: Mapping[str, str]) -> FlagTable:
    """The flag table of the SGLang release the command line plays (`--sim-sglang-version`; 0.5.23 by default)."""
    version = played_version(args, environ)
    return load_flag_table(DEFAULT_TABLE.with_name(f"sglang-{version}-flags.json"))


def read_command_line(args: Sequence[str], *, table: FlagTable | None = None,
                      environ: Mapping[str, str] | None = None,
                      model_config: Mapping[str, Any] | None = None) -> ServerConfig:
    """Parse and resolve a command line (SGLang's flags and the `--sim-*` knobs; knobs also from `environ`,
    os.environ by default). `model_config`, when given, stands for the config.json under `--model-path`.

    Exits 2 on a bad command line (argparse, as SGLang); raises config_file.ConfigFileError, knobs.KnobError,
    model.ModelConfigError or speculative.ResolutionError where SGLang would stop."""
    environ = os.environ if environ is None else environ
    table = played_table(args, environ) if table is None else table
    raw, knobs = parse_args_and_knobs(table, args, environ)
    model = _model(str(raw["model_path"]), model_config)
    gpu = find_gpu(knobs.gpu)
    launch_command = " ".join(split_knobs(table, args)[1])
    return ServerConfig(model, resolve_args(raw, model, gpu), knobs, gpu, launch_command)


def _model(model_path: str, config: Mapping[str, Any] | None) -> ModelConfig:
    return load_model_config(model_path) if config is None else model_config_from_dict(model_path, config)
