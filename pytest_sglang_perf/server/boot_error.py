"""Why a server did not become ready: the error every boot failure is raised as, with its report (plain Python)."""

from __future__ import annotations

from pathlib import Path

from pytest_sglang_perf.errors import SGLangPerfError
from pytest_sglang_perf.server.failure_cause import boot_failure_cause


class BootError(SGLangPerfError):
    """A server did not become ready. `report()` says why, with the exact command and the log tail; for one that was
    never started (`started` False: its GPUs could not be claimed, its process could not be launched), that no
    process ran, so there is no exit code and no log of it."""

    def __init__(
        self, *, name: str, command: str, reason: str, log_path: Path, exit_code: int | None = None,
        log_tail: tuple[str, ...] = (), phase: str | None = None, started: bool = True,
        log_lines: tuple[str, ...] = (),
    ) -> None:
        what = "failed to boot" if started else "was not started"
        super().__init__(f"SGLang server {name!r} {what}: {reason}")
        self.name = name
        self.command = command
        self.reason = reason
        self.log_path = log_path
        self.exit_code = exit_code
        self.log_tail = log_tail
        self.phase = phase
        self.started = started
        self.log_lines = log_lines or log_tail  # the attempt's whole log: a cause may be far from the end

    def report(self) -> str:
        if not self.started:
            return "\n".join([str(self), f"  command:    {self.command} (not run)",
                              "  no server process was started, so there is no exit code and no server log"])
        exit_code = "none (the process had not exited on its own)" if self.exit_code is None else self.exit_code
        cause = boot_failure_cause(self.log_lines)
        lines = [
            str(self),
            *([f"  cause:      {cause}"] if cause is not None else []),
            f"  command:    {self.command}",
            f"  exit code:  {exit_code}",
            f"  last phase: {self.phase or 'none recognised in the log'}",
            f"  log file:   {self.log_path}",
        ]
        if not self.log_tail:
            return "\n".join([*lines, "  (the log is empty)"])
        return "\n".join([*lines, f"  last {len(self.log_tail)} log lines:", *(f"    | {t}" for t in self.log_tail)])
