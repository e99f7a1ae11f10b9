"""Booting one variant's server with live progress, and what a test sees of it once it runs.

Plain Python (no pytest). The session decides when a variant boots and stops (session/facade.py); this module starts
the process (launcher.py), hands its progress to a BootProgress (progress.py: what the terminal shows) and stops it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_sglang_perf.config.settings import DEFAULT_STOP_GRACE
from pytest_sglang_perf.server.launcher import BootError, LaunchSpec, ServerProcess
from pytest_sglang_perf.server.plan import ServerPlan
from pytest_sglang_perf.server.progress import BootProgress


@dataclass(frozen=True)
class RunningServer:
    plan: ServerPlan
    base_url: str
    boot_seconds: float
    pid: int | None
    log_path: Path
    exit_description: Callable[[float], str | None] = field(default=lambda wait: None, compare=False)
    """How the server process ended, waiting up to the given seconds for it to finish exiting; None while it runs
    (launcher.ServerProcess.exit_description)."""
    log_text: Callable[[], str] = field(default=lambda: "", compare=False)
    """This boot's log so far, secrets redacted (launcher.ServerProcess.attempt_log_text)."""


def boot_server(plan: ServerPlan, log_path: Path, startup_timeout: float, progress: BootProgress, *,
                stop_grace: float = DEFAULT_STOP_GRACE, pass_fds: tuple[int, ...] = ()) -> tuple[ServerProcess,
                                                                                                  RunningServer]:
    """Start the variant's server and wait until it is ready; raises BootError (after saying so) if it fails.
    `pass_fds`: descriptors the server inherits (its GPU claim's locks)."""
    spec = LaunchSpec(name=plan.variant.name, command=plan.command, log_path=log_path,
                      startup_timeout=startup_timeout, env=plan.env, api_key=plan.api_key, stop_grace=stop_grace,
                      pass_fds=pass_fds)
    server = ServerProcess(spec, on_progress=lambda event: progress.step(event, server.command_line, log_path))
    try:
        with progress:
            server.start()
    except BootError as exc:
        progress.failed(exc.reason)
        raise
    return server, RunningServer(plan, server.base_url, server.boot_seconds, server.pid, log_path,
                                 server.exit_description, server.attempt_log_text)


def stop_server(server: ServerProcess, say: Callable[[str], None]) -> None:
    server.stop()
    say(f"[{server.spec.name}] server stopped")
