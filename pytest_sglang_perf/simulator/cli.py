"""`python -m pytest_sglang_perf.simulator`: parse like SGLang, resolve, boot, serve, stop on a signal.

Order as in SGLang (reference §2.1): parse and resolve the args, log `server_args=`, start the scheduler
child, run the scheduler's boot phases with the port closed, log the startup timings, bind the HTTP port,
warm up (health endpoints answer 503 meanwhile), then log `The server is fired up and ready to roll!`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_sglang_perf.simulator.flags import FlagTableError, build_parser, load_flag_table
from pytest_sglang_perf.simulator.hardware import H100_80GB
from pytest_sglang_perf.simulator.knobs import KnobError, Knobs, knob_dests, resolve_knobs
from pytest_sglang_perf.simulator.logs import SimLogger
from pytest_sglang_perf.simulator.model import ModelConfig, ModelConfigError, load_model_config
from pytest_sglang_perf.simulator.resolve import Resolution, resolve_args
from pytest_sglang_perf.simulator.schedule import accept_length_warning
from pytest_sglang_perf.simulator.server import SimServer
from pytest_sglang_perf.simulator.speculative import ResolutionError

CHILD_STOP_SECONDS = 1.0


def main(argv: list[str] | None = None) -> int:
    """Exit codes: 0 after a signal, 1 when SGLang would fail at startup, 2 for command-line errors."""
    args = list(sys.argv[1:] if argv is None else argv)
    parsed = _parse_command_line(args)
    if isinstance(parsed, int):
        return parsed
    raw, knobs = parsed
    log = SimLogger(raw.get("log_level"), raw.get("log_level_http"))
    prepared = _prepare(raw)
    if isinstance(prepared, int):
        return prepared
    model, resolution = prepared
    _log_resolution(log, resolution, knobs)
    return _run(_serve_main(model, resolution, knobs, " ".join(args), log))


def _parse_command_line(args: list[str]) -> tuple[dict[str, Any], Knobs] | int:
    """SGLang's args by dest, and the knobs; argparse exits 2 itself on a bad command line."""
    try:
        table = load_flag_table()
    except FlagTableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    parser = build_parser(table)
    namespace = parser.parse_args(args)
    try:
        knobs = resolve_knobs(namespace, os.environ)
    except KnobError as exc:
        parser.error(str(exc))
    return {key: value for key, value in vars(namespace).items() if key not in knob_dests()}, knobs


def _log_resolution(log: SimLogger, resolution: Resolution, knobs: Knobs) -> None:
    for message in resolution.messages:
        log.warning(message)
    clamp = accept_length_warning(knobs, resolution.spec)
    if clamp is not None:
        log.warning(clamp)
    log.info(f"server_args={dict(resolution.args)!r}")


def _prepare(raw: Mapping[str, Any]) -> tuple[ModelConfig, Resolution] | int:
    """Load config.json and resolve the args; an error is printed like Python's and gives exit code 1."""
    try:
        model = load_model_config(str(raw["model_path"]))
        return model, resolve_args(raw, model, H100_80GB)
    except ModelConfigError as exc:
        print(f"OSError: {exc}", file=sys.stderr, flush=True)
    except ResolutionError as exc:
        print(f"ValueError: {exc}", file=sys.stderr, flush=True)
    return 1


def _run(coroutine: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return int(uvloop.run(coroutine))


async def _serve_main(model: ModelConfig, resolution: Resolution, knobs: Knobs, launch_command: str,
                      log: SimLogger) -> int:
    stop = _StopSignal()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.receive, signum)
    child = spawn_scheduler_child()
    server = SimServer(model, resolution, knobs, launch_command, log, child)
    try:
        return await _until_stopped(server.run(), stop, server)
    finally:
        stop_child(child)


@dataclass
class _StopSignal:
    event: asyncio.Event = field(default_factory=asyncio.Event)
    signum: int = signal.SIGTERM

    def receive(self, signum: int) -> None:
        self.signum = signum
        self.event.set()


async def _until_stopped(serving: Coroutine[Any, Any, int], stop: _StopSignal, server: SimServer) -> int:
    """Serve until the server stops on its own (its exit code) or a signal arrives (then 0)."""
    task = asyncio.ensure_future(serving)
    waiter = asyncio.ensure_future(stop.event.wait())
    done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        waiter.cancel()
        return task.result()
    server.on_signal(stop.signum)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return 0


def spawn_scheduler_child() -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "pytest_sglang_perf.simulator.child", "scheduler",
               "--parent-pid", str(os.getpid())]
    return subprocess.Popen(command, stdin=subprocess.DEVNULL)


def stop_child(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is not None:
        return
    child.terminate()
    try:
        child.wait(timeout=CHILD_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait(timeout=CHILD_STOP_SECONDS)

