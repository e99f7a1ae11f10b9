"""A variant's server as a kept one, for this run (--sglang-reuse, session/kept.py): plain data the cells and the
report read."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pytest_sglang_perf.server.kept import duration_text
from pytest_sglang_perf.server.kept_locks import FileLock


@dataclass
class KeptUse:
    """A variant's server as a kept one, for this run: its key, whether this run reused it, and the run's use lock."""

    key: str
    reused: bool
    booted_at: float
    run_number: int
    """This run is the server's n-th (1: the run that booted it)."""
    lock: FileLock
    attached_at: float = field(default_factory=time.time)
    """When this run took the server (its age is told as of then, the same in every line of the run)."""

    def describe(self, now: float | None = None) -> str:
        """What a cell says about its server: `reused kept server 3f2a.. (booted 4 min ago; run 3 on it)`."""
        if not self.reused:
            return f"booted by this run and kept (key {self.key})"
        age = max((self.attached_at if now is None else now) - self.booted_at, 0.0)
        return f"reused kept server {self.key} (booted {duration_text(age)} ago; run {self.run_number} on it)"
