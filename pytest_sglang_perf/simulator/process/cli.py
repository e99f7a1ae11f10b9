"""`python -m pytest_sglang_perf.simulator`: parse like SGLang, resolve, boot, serve, stop on a signal.

Order as in SGLang (docs/sglang-0.5.23.md §2.1): parse and resolve the args, log `server_args=`, start the scheduler
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
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pytest_sglang_perf.sglang_facts.config_file import ConfigFileError
from pytest_sglang_perf.sglang_facts.flags import FlagTable, FlagTableError
from pytest_sglang_perf.sglang_facts.model_sizes import ModelConfigError
from pytest_sglang_perf.simulator.args.command_line import parse_args_and_knobs
from pytest_sglang_perf.simulator.args.knobs import KnobError, Knobs, knob_errors
from pytest_sglang_perf.simulator.args.server_config import ServerConfig, played_table, read_command_line
from pytest_sglang_perf.simulator.args.server_fields import shown_record
from pytest_sglang_perf.simulator.args.speculative import ResolutionError
from pytest_sglang_perf.simulator.engine.factory import server_logger
from pytest_sglang_perf.simulator.engine.schedule import accept_length_warning
from pytest_sglang_perf.simulator.logs import SimLogger
from pytest_sglang_perf.simulator.process.devices import DeviceProblem, device_line, devices_used, gpus_needed, occupy
from pytest_sglang_perf.simulator.process.server import SimServer

CHILD_STOP_SECONDS = 1.0
HELP_HINT = "the knobs are listed under 'simulator knobs' by `python -m pytest_sglang_perf.simulator --help`"


def main(argv: list[str] | None = None) -> int:
    """Exit codes: 0 after a signal, 1 when SGLang would fail at startup, 2 for command-line errors."""
    prepared = prepare(list(sys.argv[1:] if argv is None else argv))
    if isinstance(prepared, int):
        return prepared
    held = _take_devices(prepared)
    if isinstance(held, int):
        return held
    log = server_logger(prepared.resolution)
    _log_resolution(log, prepared)
    return _run(_serve_main(prepared, log))


def _take_devices(config: ServerConfig) -> list[TextIO] | int:
    """The GPUs the server runs on (process/devices.py), said on stderr and locked with --sim-device-dir; 1 (SGLang
    would fail at startup) when too few are visible or another simulated server holds one."""
    try:
        devices = devices_used(gpus_needed(config.resolution.args, config.knobs.sglang_version), os.environ)
        held = occupy(devices, Path(config.knobs.device_dir)) if config.knobs.device_dir else []
    except DeviceProblem as exc:
        print(f"simulator: {exc}", file=sys.stderr, flush=True)
        return 1
    print(f"simulator: {device_line(devices)}", file=sys.stderr, flush=True)
    return held


def prepare(args: Sequence[str]) -> ServerConfig | int:
    """Parse and resolve like SGLang's `prepare_server_args` + `resolve_once()`; an exit code when SGLang would
    stop there (2 for a bad command line, 1 for a failed resolution, its error printed as SGLang's ends).

    The simulator's own `--sim-*` knobs are checked first: a bad one exits 2 with `simulator: <cause>` lines only
    (not SGLang's usage text, which lists no knob)."""
    knob_problems = knob_errors(args)
    if knob_problems:
        _print_knob_errors(knob_problems)
        return 2
    try:
        table = played_table(args, os.environ)
    except FlagTableError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        with _exits_like_sglang(table):
            return read_command_line(args, table=table)
    except ModelConfigError as exc:  # config.json: printed like Python's error
        print(f"OSError: {exc}", file=sys.stderr, flush=True)
    except ResolutionError as exc:  # SGLang's traceback ends with this line
        if exc.hint:
            print(f"simulator: {exc.hint}", file=sys.stderr)
        print(exc.traceback_line(), file=sys.stderr, flush=True)
    return 1


def parse_command_line(table: FlagTable, args: Sequence[str]) -> tuple[dict[str, Any], Knobs]:
    """The parse step alone (SGLang's args by dest, and the knobs), exiting as SGLang does (`_exits_like_sglang`);
    the contract harness (tests/sglang_cpu/contract/parse_both.py) compares it with SGLang's own parser."""
    with _exits_like_sglang(table):
        return parse_args_and_knobs(table, args, os.environ)


def _print_knob_errors(problems: Sequence[str]) -> None:
    for problem in problems:
        print(f"simulator: {problem}", file=sys.stderr)
    print(f"simulator: {HELP_HINT}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _exits_like_sglang(table: FlagTable) -> Iterator[None]:
    """2 with argparse's text on a bad SGLang command line, 2 with `simulator: <cause>` on a bad SGLANG_SIM_*
    variable (a knob of the command line also fails argparse's way here; prepare() checks knobs first), 1 with the
    error's last traceback line on a bad `--config` file."""
    try:
        yield
    except ConfigFileError as exc:
        print(f"ValueError: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None
    except KnobError as exc:
        print(f"simulator: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


def _log_resolution(log: SimLogger, config: ServerConfig) -> None:
    resolution = config.resolution
    for message in resolution.messages:
        log.warning(message)
    clamp = accept_length_warning(config.knobs, resolution.spec)
    if clamp is not None:
        log.warning(clamp)
    log.info(f"server_args={shown_record(resolution.args)!r}")


def _run(coroutine: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return int(uvloop.run(coroutine))


async def _serve_main(config: ServerConfig, log: SimLogger) -> int:
    stop = _StopSignal()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.receive, signum)
    child = spawn_scheduler_child()
    server = SimServer(config, log, child)
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
    command = [sys.executable, "-m", "pytest_sglang_perf.simulator.process.child", "scheduler",
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

