"""The running simulator: boot phases with the port closed, then HTTP, warmup, a scheduler watchdog, shutdown.

A scheduler that fails during boot (engine/crash.py) or a failed warmup ends the process as SGLang's does:
the traceback in the log, then the whole process tree killed, the main process by its own SIGKILL
(docs/sglang-0.5.23.md §10).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import signal
import subprocess
from typing import Any, NoReturn

import orjson
from aiohttp import web

from pytest_sglang_perf.sglang_facts.log_wordings import wording_for
from pytest_sglang_perf.simulator.api.app import ACTIVE, access_logger_class, build_app
from pytest_sglang_perf.simulator.api.generate import error_object
from pytest_sglang_perf.simulator.api.serving import INJECTED_500
from pytest_sglang_perf.simulator.args.server_config import ServerConfig
from pytest_sglang_perf.simulator.engine.boot import engine_startup_line, scheduler_ranks
from pytest_sglang_perf.simulator.engine.crash import MSG_SIGQUIT, SchedulerCrash, kill_tree_line, warmup_traceback
from pytest_sglang_perf.simulator.engine.engine import ServerStatus, SimEngine
from pytest_sglang_perf.simulator.engine.factory import start_engine
from pytest_sglang_perf.simulator.logs import SimLogger, rank_prefixes

WATCHDOG_SECONDS = 0.5
SITE_SHUTDOWN_SECONDS = 0.2
CHILD_KILL_WAIT = 1.0
READY_MESSAGE = "The server is fired up and ready to roll!"


class SimServer:
    def __init__(self, config: ServerConfig, log: SimLogger, child: subprocess.Popen[bytes]) -> None:
        self.config, self.resolution = config, config.resolution
        self.log, self.child = log, child
        self.engine: SimEngine | None = None
        self._runner: web.AppRunner | None = None
        self._active: set[asyncio.Task[Any]] = set()

    async def run(self) -> int:
        """Boot, serve until cancelled; returns an exit code when it stops on its own (errors)."""
        try:
            engine = await start_engine(self.config, self.log)
        except SchedulerCrash as crash:
            self._scheduler_died(crash, scheduler_ranks(self.resolution))
        if self.child.poll() is not None:
            self.log.error(f"RuntimeError: Rank 0 scheduler died during initialization (exit code: "
                           f"{self.child.returncode}).")
            return 1
        if wording_for(engine.setup.knobs.sglang_version).startup_timings:  # from SGLang 0.5.17
            self.log.info(engine_startup_line(engine.setup.scheduler_startup, engine.setup.tokenizer_e2e))
        self.engine = engine
        engine.start(on_crash=lambda error: self._sigquit())
        try:
            if not await self._start_http(engine):
                return 1
            await self._warmup(engine, engine.setup.warmup_seconds)
            return await self._watch_child()
        finally:
            await self._shutdown()

    def on_signal(self, signum: int) -> None:
        """SGLang installs its own SIGTERM handler once serving; SIGINT goes straight to uvicorn."""
        if signum == signal.SIGTERM and self.engine is not None and self.engine.ready:
            self.log.warning(f"SIGTERM received. signum={signum} frame=None. Draining requests and shutting down...")

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
        """SGLang's warmup: poll /model_info, one 8-token generation; health answers 503 until it is done."""
        if not self.resolution.args.get("skip_server_warmup"):
            loop = asyncio.get_running_loop()
            await asyncio.sleep(seconds / 2)
            self.log.access(_client(), "GET /model_info HTTP/1.1", 200)
            if engine.faults.fail_warmup:
                self._warmup_failed(engine)
            tic = loop.time()
            await engine.warmup()
            await asyncio.sleep(max(0.0, seconds / 2 - (loop.time() - tic)))
            self.log.access(_client(), f"POST {engine.warmup_path} HTTP/1.1", 200)
        engine.status = ServerStatus.UP
        self.log.access(_client(), "POST /freeze_gc HTTP/1.1", 200)
        self.log.info(READY_MESSAGE)

    def _warmup_failed(self, engine: SimEngine) -> NoReturn:
        """The `fail-warmup` fault: the warmup request comes back 500; SGLang logs it and kills its tree."""
        body = orjson.dumps(error_object(INJECTED_500)).decode()
        self.log.access(_client(), f"POST {engine.warmup_path} HTTP/1.1", 500)
        self.log.error(f"Initialization failed. warmup error: {warmup_traceback(500, body)}")
        self._kill_process_tree()

    def _scheduler_died(self, crash: SchedulerCrash, ranks: tuple[str, ...]) -> NoReturn:
        for prefix in ranks if crash.all_ranks else ranks[:1]:
            self.log.error(f"Scheduler hit an exception: {crash.traceback()}", prefix)
        self.log.error(MSG_SIGQUIT)
        self._kill_process_tree()

    def _sigquit(self) -> NoReturn:
        """The scheduler loop failed while serving: SGLang's running-phase SIGQUIT handler kills the tree."""
        self.log.error("SIGQUIT received. signum=3, frame=None. It usually means one child failed.")
        self._kill_process_tree()

    def _kill_process_tree(self) -> NoReturn:
        """utils/common.py::kill_process_tree(os.getpid()): SIGKILL the children, then this process."""
        pid = os.getpid()
        self.log.info(kill_tree_line(pid))
        self.child.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.child.wait(timeout=CHILD_KILL_WAIT)
        os.kill(pid, signal.SIGKILL)
        raise SystemExit(-signal.SIGKILL)  # not reached

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
        if runner is not None:
            self.log.uvicorn("Shutting down")
            for task in list(self._active):
                task.cancel()
            self.log.uvicorn("Waiting for application shutdown.")
            await runner.cleanup()
            self.log.uvicorn("Application shutdown complete.")
            self.log.uvicorn(f"Finished server process [{os.getpid()}]")
        if self.engine is not None:
            await self.engine.stop()


def _client() -> str:
    """A plausible client address for the access lines of SGLang's own warmup requests."""
    return f"127.0.0.1:{random.randint(40000, 60999)}"
