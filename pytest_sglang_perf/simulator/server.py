"""The running simulator: boot phases with the port closed, then HTTP, warmup, a scheduler watchdog, shutdown."""

from __future__ import annotations

import asyncio
import logging
import os
import random
import signal
import subprocess
import time
from typing import Any

from aiohttp import web

from pytest_sglang_perf.simulator.app import ACTIVE, access_logger_class, build_app
from pytest_sglang_perf.simulator.boot import BootError, BootPlan, SchedulerBoot, engine_startup_line
from pytest_sglang_perf.simulator.engine import EngineSetup, ServerStatus, SimEngine
from pytest_sglang_perf.simulator.hardware import H100_80GB
from pytest_sglang_perf.simulator.knobs import Knobs
from pytest_sglang_perf.simulator.logs import SimLogger, rank_prefixes
from pytest_sglang_perf.simulator.memory import plan_memory
from pytest_sglang_perf.simulator.model import ModelConfig
from pytest_sglang_perf.simulator.resolve import Resolution
from pytest_sglang_perf.simulator.schedule import jitter_factor

WATCHDOG_SECONDS = 0.5
SITE_SHUTDOWN_SECONDS = 0.2
READY_MESSAGE = "The server is fired up and ready to roll!"


class SimServer:
    def __init__(self, model: ModelConfig, resolution: Resolution, knobs: Knobs, launch_command: str,
                 log: SimLogger, child: subprocess.Popen[bytes]) -> None:
        self.model, self.resolution, self.knobs = model, resolution, knobs
        self.launch_command, self.log, self.child = launch_command, log, child
        self.engine: SimEngine | None = None
        self._runner: web.AppRunner | None = None
        self._active: set[asyncio.Task[Any]] = set()

    async def run(self) -> int:
        """Boot, serve until cancelled; returns an exit code when it stops on its own (errors)."""
        tic = time.perf_counter()
        memory = plan_memory(self.resolution, self.model, H100_80GB)
        plan = BootPlan.split(self._boot_seconds(), self.resolution, bool(memory.decode_capture_bs))
        boot = SchedulerBoot(self.resolution, self.model, memory, plan, self.log, asyncio.sleep)
        try:
            startup = await boot.run()
        except BootError as exc:
            self.log.error(f"Scheduler hit an exception: RuntimeError: {exc}", boot.ranks[0])
            return 1
        if self.child.poll() is not None:
            self.log.error(f"RuntimeError: Rank 0 scheduler died during initialization (exit code: "
                           f"{self.child.returncode}).")
            return 1
        tokenizer_e2e = time.perf_counter() - tic
        self.log.info(engine_startup_line(startup, tokenizer_e2e))
        setup = EngineSetup(self.resolution, self.model, memory, self.knobs, startup, tokenizer_e2e,
                            self.launch_command)
        self.engine = SimEngine(setup, self.log)
        try:
            if not await self._start_http(self.engine):
                return 1
            await self._warmup(self.engine, plan.warmup)
            return await self._watch_child()
        finally:
            await self._shutdown()

    def on_signal(self, signum: int) -> None:
        """SGLang installs its own SIGTERM handler once serving; SIGINT goes straight to uvicorn."""
        if signum == signal.SIGTERM and self.engine is not None and self.engine.ready:
            self.log.warning(f"SIGTERM received. signum={signum} frame=None. Draining requests and shutting down...")

    def _boot_seconds(self) -> float:
        jitter = jitter_factor(random.Random(f"{self.knobs.seed}|boot"), self.knobs.noise)
        return self.knobs.boot_seconds * self.knobs.time_scale * jitter

    async def _start_http(self, engine: SimEngine) -> bool:
        host, port = str(self.resolution["host"]), int(self.resolution["port"])
        app = build_app(engine)
        self._active = app[ACTIVE]
        runner = web.AppRunner(app, handle_signals=False, access_log_class=access_logger_class(self.log))
        await runner.setup()
        self._runner = runner
        self.log.uvicorn(f"Started server process [{os.getpid()}]")
        self.log.uvicorn("Waiting for application startup.")
        self.log.uvicorn("Application startup complete.")
        try:
            await web.TCPSite(runner, host, port, shutdown_timeout=SITE_SHUTDOWN_SECONDS).start()
        except OSError as exc:  # asyncio's text, as uvicorn logs it: "[Errno 98] error while attempting to bind..."
            self.log.uvicorn(str(exc), level=logging.ERROR)
            return False
        self.log.uvicorn(f"Uvicorn running on http://{host}:{port} (Press CTRL+C to quit)")
        return True

    async def _warmup(self, engine: SimEngine, seconds: float) -> None:
        """SGLang's warmup: poll /model_info, one 8-token /generate; health answers 503 until it is done."""
        if not self.resolution.args.get("skip_server_warmup"):
            await asyncio.sleep(seconds / 2)
            self.log.access(_client(), "GET /model_info HTTP/1.1", 200)
            engine.record_warmup()
            await asyncio.sleep(seconds / 2)
            self.log.access(_client(), "POST /generate HTTP/1.1", 200)
        engine.status = ServerStatus.UP
        self.log.access(_client(), "POST /freeze_gc HTTP/1.1", 200)
        self.log.info(READY_MESSAGE)

    async def _watch_child(self) -> int:
        """Serve until cancelled; a dead scheduler takes the server down, as in SGLang."""
        while self.child.poll() is None:
            await asyncio.sleep(WATCHDOG_SECONDS)
        await asyncio.sleep(WATCHDOG_SECONDS)  # a group-wide SIGTERM stops us first: no false alarm then
        prefix = rank_prefixes(self.resolution.tp_size)[0]
        self.log.error("SIGQUIT received. signum=3, frame=None. It usually means one child failed.", prefix)
        return 1

    async def _shutdown(self) -> None:
        if self.engine is not None:
            self.engine.status = ServerStatus.EXITING
        runner = self._runner
        if runner is None:
            return
        self.log.uvicorn("Shutting down")
        for task in list(self._active):
            task.cancel()
        self.log.uvicorn("Waiting for application shutdown.")
        await runner.cleanup()
        self.log.uvicorn("Application shutdown complete.")
        self.log.uvicorn(f"Finished server process [{os.getpid()}]")


def _client() -> str:
    """A plausible client address for the access lines of SGLang's own warmup requests."""
    return f"127.0.0.1:{random.randint(40000, 60999)}"
