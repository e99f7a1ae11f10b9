"""Booting one variant's server with live progress, and what a test sees of it once it runs.

Plain Python (no pytest). The session decides when a variant boots and stops (session.py); this module starts
the process (launcher.py), reports its progress lines and stops it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_sglang_perf.server.launcher import BootError, LaunchSpec, ServerProcess
from pytest_sglang_perf.server.logscan import ProgressEvent
from pytest_sglang_perf.server.plan import ServerPlan


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


def boot_server(plan: ServerPlan, log_path: Path, startup_timeout: float,
                say: Callable[[str], None]) -> tuple[ServerProcess, RunningServer]:
    """Start the variant's server and wait until it is ready; raises BootError (after saying so) if it fails."""
    name = plan.variant.name
    spec = LaunchSpec(name=name, command=plan.command, log_path=log_path, startup_timeout=startup_timeout,
                      env=plan.env, api_key=plan.api_key)
    server = ServerProcess(spec, on_progress=lambda event: _progress(say, name, server, event))
    try:
        server.start()
    except BootError as exc:
        say(f"[{name}] boot FAILED: {exc.reason}")
        raise
    return server, RunningServer(plan, server.base_url, server.boot_seconds, server.pid, log_path,
                                 server.exit_description, server.attempt_log_text)


def _progress(say: Callable[[str], None], name: str, server: ServerProcess, event: ProgressEvent) -> None:
    if event.phase == "launched":
        say(f"[{name}] booting ({event.message}): {server.command_line}")
        say(f"[{name}] log: {server.spec.log_path}")
    elif event.phase == "ready":
        say(f"[{name}] {event.message}")
    else:
        say(f"[{name}] {event.message} ({event.elapsed:.1f} s)")


def stop_server(server: ServerProcess, say: Callable[[str], None]) -> None:
    server.stop()
    say(f"[{server.spec.name}] server stopped")
