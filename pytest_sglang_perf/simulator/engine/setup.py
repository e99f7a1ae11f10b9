"""What the engine is built from: the resolved configuration and what the boot measured (factory.py fills it)."""

from __future__ import annotations

from dataclasses import dataclass

from pytest_sglang_perf.sglang_facts.gpus import Gpu
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfig
from pytest_sglang_perf.simulator.args.knobs import Knobs
from pytest_sglang_perf.simulator.args.memory import MemoryPlan
from pytest_sglang_perf.simulator.args.resolve import Resolution
from pytest_sglang_perf.simulator.engine.boot import StartupTime


@dataclass(frozen=True)
class EngineSetup:
    """Everything decided before the HTTP server starts."""

    resolution: Resolution
    model: ModelConfig
    memory: MemoryPlan
    knobs: Knobs
    gpu: Gpu
    scheduler_startup: StartupTime
    tokenizer_e2e: float
    launch_command: str
    warmup_seconds: float
    """The boot plan's share for the warmup, which runs once the port is open."""
