"""The locks of a kept server (server/kept.py): flock(2) locks on files of the per-user state folder.

Plain Python (no pytest). Two locks per kept server, both dropped by the kernel when their holder dies, so a killed
run leaves no stale lock:

- the *boot* lock, exclusive, held while a run decides whether to attach to the kept server or boot a new one, and
  while it boots and registers it: two runs that want the same server never boot it twice;
- the *use* lock, held by a run for as long as it measures on the server: exclusive by default (two runs never
  measure on one server at the same time), shared with `--sglang-reuse-shared`. The server's keeper takes it
  exclusively, without waiting, to learn that no run uses the server (its idle time starts) and while it stops it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

RETRY_SECONDS = 0.1
"""How often a waiting lock tries again."""
NOTE_SECONDS = 15.0
"""How often a waiting lock says it is still waiting."""


class FileLock:
    """One flock(2) lock on `path` (created when missing); not re-entrant. `acquire()` waits, `try_acquire()` does
    not; `release()` unlocks and closes. The descriptor is close-on-exec: no server inherits it."""

    def __init__(self, path: Path, *, shared: bool = False) -> None:
        self.path = path
        self.shared = shared
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it in a conflicting mode; whether it was taken."""
        if self._fd is not None:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if self.shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def acquire(self, timeout: float, waiting: Callable[[float], None] = lambda waited: None) -> bool:
        """Take the lock, waiting up to `timeout` seconds; whether it was taken. `waiting` hears the seconds waited
        so far, at once and every NOTE_SECONDS."""
        start = time.monotonic()
        next_note = start
        while not self.try_acquire():
            now = time.monotonic()
            if now - start >= timeout:
                return False
            if now >= next_note:
                waiting(now - start)
                next_note = now + NOTE_SECONDS
            time.sleep(RETRY_SECONDS)
        return True

    def release(self) -> None:
        """Unlock and close; idempotent."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            with contextlib.suppress(OSError):
                os.close(fd)


def in_use(path: Path) -> bool:
    """Whether some process holds the lock at `path` (in any mode), told by taking it exclusively for an instant."""
    probe = FileLock(path)
    if not probe.try_acquire():
        return True
    probe.release()
    return False
