"""From a command line to a ready engine: what SGLang does from `sglang serve ...` to `Engine startup timings`.

`build_engine` reads the command line (args/server_config.py), then `start_engine` plans the memory, runs the
scheduler's boot phases (boot.py: their log lines and waits) and sets the engine up. The CLI runs the two halves
apart, as it logs the resolution and starts the scheduler child in between (process/cli.py, process/server.py);
tests call `build_engine` with a quiet logger, a sleep that skips the waits and a config.json given as a dict.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_sglang_perf.sglang_facts.log_wordings import wording_for
from pytest_sglang_perf.simulator.args.memory import plan_memory
from pytest_sglang_perf.simulator.args.resolve import Resolution
from pytest_sglang_perf.simulator.args.server_config import ServerConfig, read_command_line
from pytest_sglang_perf.simulator.engine.boot import BootPlan, SchedulerBoot, Sleep
from pytest_sglang_perf.simulator.engine.engine import SimEngine
from pytest_sglang_perf.simulator.engine.setup import EngineSetup
from pytest_sglang_perf.simulator.logs import SimLogger


async def build_engine(args: Sequence[str], *, log: SimLogger | None = None, sleep: Sleep = asyncio.sleep,
                       model_config: Mapping[str, Any] | None = None,
                       environ: Mapping[str, str] | None = None) -> SimEngine:
    """A booted engine for a command line (SGLang's flags and the `--sim-*` knobs), not started yet.

    `log` defaults to the server's logger (`--log-level`); `model_config` stands for the config.json under
    `--model-path`; `environ` (os.environ by default) holds the `SGLANG_SIM_*` knobs. Raises what
    server_config.read_command_line raises, and crash.SchedulerCrash where a real scheduler fails to boot."""
    config = read_command_line(args, environ=environ, model_config=model_config)
    return await start_engine(config, log or server_logger(config.resolution), sleep)


async def start_engine(config: ServerConfig, log: SimLogger, sleep: Sleep = asyncio.sleep) -> SimEngine:
    """Plan the memory, boot every scheduler rank (raises crash.SchedulerCrash as a real one fails) and set the
    engine up; `tokenizer_e2e` counts from here."""
    tic = time.perf_counter()
    resolution, model, gpu = config.resolution, config.model, config.gpu
    memory = plan_memory(resolution, model, gpu)
    plan = BootPlan.for_knobs(config.knobs, resolution, bool(memory.decode_capture_bs))
    startup = await SchedulerBoot(resolution, model, memory, plan, log, sleep, gpu, config.knobs.faults,
                                  wording_for(config.knobs.sglang_version)).run()
    setup = EngineSetup(resolution, model, memory, config.knobs, gpu, startup, time.perf_counter() - tic,
                        config.launch_command, plan.warmup)
    return SimEngine(setup, log)


def server_logger(resolution: Resolution) -> SimLogger:
    """The server's logger at its `--log-level` / `--log-level-http`."""
    return SimLogger(resolution.args.get("log_level"), resolution.args.get("log_level_http"))
