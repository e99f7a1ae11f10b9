"""What the session says while it runs, at pytest's verbosity.

Plain Python (no pytest): `say` writes one line to the terminal (plugin.py prefixes it with `sglang-perf: `).
Below 0 (-q): only what went wrong (pre-flight findings, a failed boot). 0: a heartbeat while a boot is silent
and one line per booted server (`[default] ready in 61.5 s (graphs 12.40 s; config ok; log default.log)`).
1 and more (-v): every boot step, the exact command, the effective configuration and each server stop.
"""

from __future__ import annotations

from collections.abc import Callable

from pytest_sglang_perf.server.describe import config_brief, config_lines, ready_line
from pytest_sglang_perf.server.progress import BootProgress
from pytest_sglang_perf.session.variant_run import VariantRun
from pytest_sglang_perf.wrapping import wrap_lines

_PREFIX = len("sglang-perf: ")


class Live:
    def __init__(self, say: Callable[[str], None], *, verbosity: int, heartbeat: float, simulated: bool) -> None:
        self.say = say
        self.verbosity = verbosity
        self._heartbeat = heartbeat
        self._simulated = simulated

    def detail(self, message: str) -> None:
        """A line only -v shows."""
        if self.verbosity >= 1:
            self.say(message)

    def note(self, message: str) -> None:
        """A line the default verbosity shows (not -q), wrapped at 120 characters."""
        if self.verbosity >= 0:
            for line in wrap_lines([message], width=120 - _PREFIX):
                self.say(line)

    def finding(self, message: str) -> None:
        """A line every verbosity shows (a pre-flight finding): wrapped at 120 characters, whole with -v."""
        for line in [message] if self.verbosity >= 1 else wrap_lines([message], width=120 - _PREFIX):
            self.say(line)

    def boot_progress(self, name: str) -> BootProgress:
        """The live lines of one boot of the variant (server/progress.py)."""
        return BootProgress(name, self.say, verbosity=self.verbosity, heartbeat=self._heartbeat)

    def booted(self, run: VariantRun) -> None:
        """A server that came up and was inspected: one line, or (-v) its effective configuration."""
        if run.config is None or run.server is None or self.verbosity < 0:
            return
        if self.verbosity >= 1:
            for line in config_lines(run.config):
                self.say(f"[{run.name}] {line}")
            return
        tag = "SIMULATED; " if self._simulated else ""
        if run.plan.url is not None:
            self.say(f"[{run.name}] remote server {run.plan.url} ({tag}{config_brief(run.config)})")
            return
        if run.kept is not None and run.kept.reused:
            self.say(f"[{run.name}] kept server up, not booted ({tag}{config_brief(run.config)}; log "
                     f"{run.server.log_path})")
            return
        self.say(f"[{run.name}] " + ready_line(run.config, run.startup, run.server.boot_seconds, self._simulated,
                                               run.server.log_path.name))
