"""What a kept server's watchdog checks each second once the server is kept (server/watchdog.py's keep mode): its
record is still there, and some run used it within its idle timeout.

Plain Python (no pytest). "Used" means a run holds the server's use lock (server/kept_locks.py), or released it
less than the idle timeout ago (the record's `released_at`, written by the run): a run shorter than the keeper's tick
is still seen. The keeper reads the record from its file each time: nothing else ties it to the run.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from pytest_sglang_perf.server.kept_locks import FileLock

TICK_SECONDS = 1.0
"""How often a keeper checks its server's record and use."""


@dataclass
class Keep:
    """One kept server's keeper state: the record file, the use lock file and the idle timeout."""

    record_file: Path
    use_lock_file: Path
    idle_timeout: float
    last_active: float = field(default_factory=time.time)
    lock: FileLock | None = None
    """The use lock, held by the keeper once it decided to stop the server: no run attaches meanwhile."""

    def message(self) -> str:
        """The line pytest writes to the watchdog to put it in keep mode."""
        return f"keep {self.idle_timeout!r} {self.record_file}\t{self.use_lock_file}\n"

    @classmethod
    def parse(cls, line: str) -> Keep:
        idle, paths = line.removeprefix("keep ").split(" ", 1)
        record_file, use_lock_file = paths.split("\t", 1)
        return cls(Path(record_file), Path(use_lock_file), float(idle))

    def why_stop(self, now: float | None = None) -> str | None:
        """Why the server must stop now, or None: its record is gone, or no run used it for the idle timeout."""
        now = time.time() if now is None else now
        released = self._released_at()
        if released is False:
            return f"its record {self.record_file} is gone (sglang-perf stop, or the state folder was removed)"
        probe = FileLock(self.use_lock_file)
        if not probe.try_acquire():
            self.last_active = now  # a run measures on it
            return None
        idle = now - max(self.last_active, released or 0.0)
        if idle < self.idle_timeout:
            probe.release()
            return None
        self.lock = probe
        return f"idle for {idle:.0f} s (no run used it; idle timeout {self.idle_timeout:g} s)"

    def _released_at(self) -> float | bool | None:
        """The record's `released_at`; False when the record is gone; None when unreadable for a moment or unset."""
        try:
            text = self.record_file.read_text(encoding="utf-8")
        except FileNotFoundError:
            return False
        except OSError:
            return None
        try:
            value = json.loads(text).get("released_at")
        except (ValueError, AttributeError):
            return None
        return float(value) if isinstance(value, int | float) else None

    def forget(self, pid: int | None) -> None:
        """The server `pid` is gone: drop its record (unless it is already another server's), then the use lock."""
        try:
            if json.loads(self.record_file.read_text(encoding="utf-8")).get("pid") == pid:
                self.record_file.unlink()
        except (OSError, ValueError, AttributeError):
            pass
        if self.lock is not None:
            self.lock.release()
