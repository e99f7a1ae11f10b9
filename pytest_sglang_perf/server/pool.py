"""One server per variant for the whole session: boot on first use, stop after its last test.

Plain Python (no pytest): the plugin tells the pool when a variant is first needed and when its last test is
done; the pool remembers a failed boot so that the variant's other tests fail fast with the same report.
"""

from __future__ import annotations

import tempfile
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


class ServerPool:
    def __init__(self, log_dir: Path | None, startup_timeout: float, say: Callable[[str], None]) -> None:
        self._log_dir = log_dir
        self._startup_timeout = startup_timeout
        self._say = say
        self._servers: dict[str, ServerProcess] = {}
        self._running: dict[str, RunningServer] = {}
        self._failed: dict[str, BootError] = {}
        self.boots = 0

    def get(self, plan: ServerPlan) -> RunningServer:
        """The variant's running server, booting it if needed; raises the variant's BootError if it failed."""
        name = plan.variant.name
        if name in self._failed:
            raise self._failed[name]
        if name not in self._running:
            self._boot(plan)
        return self._running[name]

    def failure(self, name: str) -> BootError | None:
        return self._failed.get(name)

    def _boot(self, plan: ServerPlan) -> None:
        name = plan.variant.name
        spec = LaunchSpec(
            name=name,
            command=plan.command,
            log_path=self._logs() / f"{name}.log",
            startup_timeout=self._startup_timeout,
            env=plan.env,
            api_key=plan.api_key,
        )
        server = ServerProcess(spec, on_progress=lambda event: self._progress(name, server, event))
        self.boots += 1
        try:
            server.start()
        except BootError as exc:
            self._failed[name] = exc
            self._say(f"[{name}] boot FAILED: {exc.reason}")
            raise
        self._servers[name] = server
        self._running[name] = RunningServer(plan, server.base_url, server.boot_seconds, server.pid, spec.log_path,
                                            server.exit_description, server.attempt_log_text)

    def _logs(self) -> Path:
        if self._log_dir is None:
            self._log_dir = Path(tempfile.mkdtemp(prefix="sglang-perf-logs-"))
        return self._log_dir

    def _progress(self, name: str, server: ServerProcess, event: ProgressEvent) -> None:
        if event.phase == "launched":
            self._say(f"[{name}] booting ({event.message}): {server.command_line}")
            self._say(f"[{name}] log: {server.spec.log_path}")
        elif event.phase == "ready":
            self._say(f"[{name}] {event.message}")
        else:
            self._say(f"[{name}] {event.message} ({event.elapsed:.1f} s)")

    def stop(self, name: str) -> None:
        server = self._servers.pop(name, None)
        self._running.pop(name, None)
        if server is not None:
            server.stop()
            self._say(f"[{name}] server stopped")

    def stop_all(self) -> None:
        for name in list(self._servers):
            self.stop(name)
