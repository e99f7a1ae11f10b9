"""Building simulator parts in-process for unit tests: a resolved server, its engine, the seed scenario."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path
from typing import Any

from pytest_sglang_perf.sglang_facts.flags import load_flag_table
from pytest_sglang_perf.sglang_facts.gpus import Gpu, find_gpu
from pytest_sglang_perf.simulator.args.command_line import build_parser
from pytest_sglang_perf.simulator.args.memory import MemoryPlan, plan_memory
from pytest_sglang_perf.simulator.args.model import ModelConfig, model_config_from_dict
from pytest_sglang_perf.simulator.args.resolve import Resolution, resolve_args
from pytest_sglang_perf.simulator.engine.engine import EngineSetup, SimEngine
from pytest_sglang_perf.simulator.engine.roofline import StepCosts
from pytest_sglang_perf.simulator.process.boot import BootPlan, SchedulerBoot
from pytest_sglang_perf.simulator.process.knobs import Knobs, knob_dests
from pytest_sglang_perf.simulator.process.logs import SimLogger

REPO = Path(__file__).resolve().parents[2]
SEED_CONFIG = json.loads((REPO / "tests" / "perf" / "models" / "qwen3.6-27b" / "config.json").read_text())
SEED_FLAGS = ("--tp-size", "2", "--speculative-algorithm", "NEXTN", "--speculative-num-steps", "3",
              "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")
LLAMA_1B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
            "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 8192,
            "vocab_size": 128256, "max_position_embeddings": 131072, "eos_token_id": 128001}


def resolve(config: dict[str, Any], *flags: str, gpu: str | None = None) -> tuple[ModelConfig, Resolution, Gpu]:
    model = model_config_from_dict("/models/m", config)
    namespace = build_parser(load_flag_table()).parse_args(["--model-path", model.path, *flags])
    raw = {k: v for k, v in vars(namespace).items() if k not in knob_dests()}
    device = find_gpu(gpu)
    return model, resolve_args(raw, model, device), device


def costs(config: dict[str, Any], *flags: str, gpu: str | None = None) -> StepCosts:
    model, resolution, device = resolve(config, *flags, gpu=gpu)
    memory = plan_memory(resolution, model, device)
    return StepCosts.build(model, resolution, device, memory.decode_capture_bs)


async def _no_sleep(seconds: float) -> None:
    return None


def quiet() -> SimLogger:
    return SimLogger(stream=io.StringIO(), access_stream=io.StringIO())


def engine(config: dict[str, Any], *flags: str, knobs: Knobs | None = None,
           log: SimLogger | None = None) -> SimEngine:
    knobs = knobs or Knobs()
    model, resolution, device = resolve(config, *flags, gpu=knobs.gpu)
    memory: MemoryPlan = plan_memory(resolution, model, device)
    boot = SchedulerBoot(resolution, model, memory, BootPlan.split(0.0, resolution, True), quiet(), _no_sleep, device)
    startup = asyncio.run(boot.run())
    setup = EngineSetup(resolution, model, memory, knobs, device, startup, 0.0, " ".join(flags))
    return SimEngine(setup, log or quiet())
