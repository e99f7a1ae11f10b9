"""Simulator parts for unit tests, built the way the CLI builds them (engine/factory.py): a resolved server, its
engine, the seed scenario. Models come as config.json dicts; boot waits are skipped; `SGLANG_SIM_*` is ignored."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

from pytest_sglang_perf.sglang_facts.gpus import Gpu
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig
from pytest_sglang_perf.simulator.args.knobs import KNOB_SPECS, Knobs
from pytest_sglang_perf.simulator.args.resolve import Resolution
from pytest_sglang_perf.simulator.args.server_config import read_command_line
from pytest_sglang_perf.simulator.engine.engine import SimEngine
from pytest_sglang_perf.simulator.engine.factory import build_engine
from pytest_sglang_perf.simulator.engine.roofline import StepCosts
from pytest_sglang_perf.simulator.logs import SimLogger

REPO = Path(__file__).resolve().parents[2]
SEED_CONFIG = json.loads((REPO / "tests" / "perf" / "models" / "qwen3.6-27b" / "config.json").read_text())
SEED_FLAGS = ("--tp-size", "2", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
              "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")
LLAMA_1B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
            "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192,
            "vocab_size": 128256, "max_position_embeddings": 131072, "eos_token_id": 128001}
MODEL_PATH = "/models/m"


def knob_flags(knobs: Knobs) -> list[str]:
    """The `--sim-*` flags that set `knobs` (those that differ from the defaults)."""
    flags: list[str] = []
    for spec in KNOB_SPECS:
        value = getattr(knobs, spec.name)
        if value is not None and value != spec.default:
            flags += [spec.flag, str(value)]
    return flags


def command_line(*flags: str, knobs: Knobs | None = None) -> list[str]:
    return ["--model-path", MODEL_PATH, *flags, *knob_flags(knobs or Knobs())]


def resolve(config: dict[str, Any], *flags: str, gpu: str | None = None) -> tuple[ModelConfig, Resolution, Gpu]:
    knobs = Knobs() if gpu is None else Knobs(gpu=gpu)
    server = read_command_line(command_line(*flags, knobs=knobs), model_config=config, environ={})
    return server.model, server.resolution, server.gpu


def costs(config: dict[str, Any], *flags: str, gpu: str | None = None) -> StepCosts:
    return engine(config, *flags, knobs=Knobs() if gpu is None else Knobs(gpu=gpu)).costs


async def _no_sleep(seconds: float) -> None:
    return None


def quiet() -> SimLogger:
    return SimLogger(stream=io.StringIO(), access_stream=io.StringIO())


def engine(config: dict[str, Any], *flags: str, knobs: Knobs | None = None,
           log: SimLogger | None = None) -> SimEngine:
    """A booted engine (not started) for the model `config`, SGLang's `flags` and the `knobs`."""
    return asyncio.run(build_engine(command_line(*flags, knobs=knobs), log=log or quiet(), sleep=_no_sleep,
                                    model_config=config, environ={}))
