"""What the terminal shows while one server boots: each step (with -v), a heartbeat while nothing is said, a failure.

Plain Python (no pytest). The launcher reports each boot step it reads in the server's log (a ProgressEvent); a
real server can spend minutes in one step without a line (loading 50 GB of weights, capturing graphs), so a
heartbeat line says that the boot is alive and which step it is in after `heartbeat` seconds of terminal silence,
and again every `heartbeat` seconds. The launcher blocks the main thread while it waits for readiness: the
heartbeat runs on a daemon thread, and a lock keeps its lines and the step lines whole.

Verbosity follows pytest's: below 0 (-q) nothing but a failure; 0 the heartbeat and a failure (the session says
the one-line summary once the server is ready); 1 and more (-v) every step, the exact command and the log file.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from pytest_sglang_perf.server.logscan import ProgressEvent

HEARTBEAT_SECONDS = 15.0
"""Seconds of silence during a boot before a heartbeat line (the default of --sglang-heartbeat)."""


class BootProgress:
    """One boot's live lines; use it as a context manager around the wait for readiness (it runs the heartbeat)."""

    def __init__(self, name: str, say: Callable[[str], None], *, verbosity: int = 0,
                 heartbeat: float = HEARTBEAT_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self._name = name
        self._say = say
        self._verbosity = verbosity
        self._heartbeat = heartbeat
        self._clock = clock
        self._lock = threading.Lock()
        now = clock()
        self._launched = self._last_said = self._step_at = now
        self._step = "launching"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def beating(self) -> bool:
        """Whether this boot has a heartbeat: not with -q, nor with a heartbeat of 0 seconds."""
        return self._verbosity >= 0 and self._heartbeat > 0

    def __enter__(self) -> BootProgress:
        if self.beating:
            self._thread = threading.Thread(target=self._run, name=f"sglang-perf heartbeat [{self._name}]",
                                            daemon=True)
            self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        tick = min(1.0, self._heartbeat / 4)
        while not self._stop.wait(tick):
            self.beat()

    def step(self, event: ProgressEvent, command_line: str, log_path: Path) -> None:
        """A boot step the launcher read (or did): remembered for the heartbeat, said with -v."""
        with self._lock:
            now = self._clock()
            if event.phase == "launched":
                self._launched = now
            self._step, self._step_at = event.message, now
            if self._verbosity < 1:
                return
            if event.phase == "launched":
                self._emit(f"booting ({event.message}): {command_line}", now)
                self._emit(f"log: {log_path}", now)
            elif event.phase == "ready":
                self._emit(event.message, now)
            else:
                self._emit(f"{event.message} ({event.elapsed:.1f} s)", now)

    def beat(self) -> None:
        """Say where the boot is if nothing was said about it for `heartbeat` seconds (the thread calls this)."""
        with self._lock:
            now = self._clock()
            if not self.beating or now - self._last_said < self._heartbeat:
                return
            self._emit(f"still booting, {now - self._launched:.0f} s in; {now - self._step_at:.0f} s since the last "
                       f"step: {self._step}", now)

    def failed(self, reason: str) -> None:
        """The boot failed (said at every verbosity: the variant's tests error with the full report)."""
        with self._lock:
            self._emit(f"boot FAILED: {reason}", self._clock())

    def _emit(self, message: str, now: float) -> None:
        self._last_said = now
        self._say(f"[{self._name}] {message}")
